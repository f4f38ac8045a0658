//! [`SharedInformerFactory`]: one informer per resource type (and options), shared by every
//! controller that asks for it.

use std::{
    any::{Any, TypeId},
    collections::{BTreeMap, HashMap},
    fmt::Debug,
    sync::Arc,
    time::Duration,
};

use futures_util::future::{BoxFuture, join_all};
use kube::{
    Client, Resource,
    api::{ApiResource, DynamicObject},
    core::{ClusterResourceScope, NamespaceResourceScope, PartialObjectMeta},
    discovery::Scope,
};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{
    Indexers,
    informer::{Failure, InformerHealth, InformerOptions, SharedIndexInformer, SyncError},
    list_watch::ClientListerWatcher,
    reflector::ReflectorOptions,
};

/// Settings shared by every informer of a factory.
#[derive(Debug, Clone, Default)]
pub struct FactoryOptions {
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    default_resync: Option<Duration>,
    resync_for: HashMap<String, Duration>,
    reflector: ReflectorOptions,
    #[cfg(feature = "metrics")]
    informer_metrics: Option<crate::informer::InformerMetrics>,
}

impl FactoryOptions {
    /// Watch only this namespace. Applies to namespaced types; informers of cluster-scoped
    /// types (nodes, namespaces) are cluster-wide whatever this says, as in client-go.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects matching this label selector (client-go's `WithTweakListOptions`).
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects matching this field selector.
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// The resync period of every informer's handlers (default: none).
    #[must_use]
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.default_resync = Some(period);
        self
    }

    /// The resync period of `K`'s informer, overriding the default.
    #[must_use]
    pub fn resync_for<K>(mut self, period: Duration) -> Self {
        self.resync_for
            .insert(std::any::type_name::<K>().to_owned(), period);
        self
    }

    /// How every reflector lists and watches (backoff, timeouts, streaming lists).
    #[must_use]
    pub fn reflector(mut self, options: ReflectorOptions) -> Self {
        self.reflector = options;
        self
    }

    /// Records every informer's and reflector's metrics (FIFO depth, processing time,
    /// handler backlogs; lists, watches, restarts) under the informer's name.
    #[cfg(feature = "metrics")]
    #[must_use]
    pub fn metrics(
        mut self,
        informers: &crate::informer::InformerMetrics,
        reflectors: &crate::reflector::ReflectorMetrics,
    ) -> Self {
        self.informer_metrics = Some(informers.clone());
        self.reflector = self.reflector.metrics(reflectors);
        self
    }
}

/// Whether a type's objects live in namespaces: decides whether the factory's namespace
/// applies. Implemented for the two scopes of k8s-openapi types (and of `Compact<K>`,
/// `PartialObjectMeta<K>`, which forward them).
pub trait FactoryScope {
    /// Whether objects of this scope live in namespaces.
    const NAMESPACED: bool;
}

impl FactoryScope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl FactoryScope for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// An informer whatever its type, as the factory keeps it.
trait AnyInformer: Send + Sync {
    fn run(&self, cancel: CancellationToken) -> BoxFuture<'static, ()>;
    fn wait_for_sync(&self, timeout: Duration) -> BoxFuture<'static, Result<(), SyncError>>;
    fn health(&self) -> InformerHealth;
    fn on_error(&self, handler: ErrorHandler);
    fn as_any(&self) -> &dyn Any;
}

impl<K: Resource + Clone + Send + Sync + 'static> AnyInformer for SharedIndexInformer<K> {
    fn run(&self, cancel: CancellationToken) -> BoxFuture<'static, ()> {
        let informer = self.clone();
        Box::pin(async move { informer.run(cancel).await })
    }

    fn wait_for_sync(&self, timeout: Duration) -> BoxFuture<'static, Result<(), SyncError>> {
        let informer = self.clone();
        Box::pin(async move { SharedIndexInformer::wait_for_sync(&informer, timeout).await })
    }

    fn health(&self) -> InformerHealth {
        SharedIndexInformer::health(self)
    }

    fn on_error(&self, handler: ErrorHandler) {
        let name = self.name().to_owned();
        SharedIndexInformer::on_error(self, move |failure| handler(&name, failure));
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

type ErrorHandler = Arc<dyn Fn(&str, &Failure) + Send + Sync>;

/// What tells two informers of a factory apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct InformerKey {
    objects: TypeId,
    /// `"typed"`, `"metadata"`, or a dynamic resource's `apiVersion/plural`.
    what: String,
    namespace: Option<String>,
}

struct Registered {
    key: InformerKey,
    informer: Box<dyn AnyInformer>,
    task: Option<JoinHandle<()>>,
}

/// Some informers of a factory did not sync in time; each says why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} informer(s) did not sync: {}", .unsynced.len(), list(.unsynced))]
pub struct CacheSyncError {
    /// One error per informer that did not sync.
    pub unsynced: Vec<SyncError>,
}

fn list(errors: &[SyncError]) -> String {
    let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
    all.join("; ")
}

/// Hands out one shared informer per resource type and options, starts them, waits for
/// their caches, and stops them (client-go's `SharedInformerFactory`).
///
/// ```no_run
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
/// use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
///
/// # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let factory = SharedInformerFactory::new(client, FactoryOptions::default().namespace("shop"));
/// factory.on_error(|informer, failure| eprintln!("{informer}: {failure}"));
/// let pods = factory.informer::<Pod>();       // controller A
/// let same_pods = factory.informer::<Pod>();  // controller B: the same informer
/// let nodes = factory.informer::<Node>();     // cluster-scoped: cluster-wide
/// factory.start();
/// factory.wait_for_sync(Duration::from_secs(60)).await?; // names any informer that did not
/// // ... run the controllers ...
/// factory.shutdown().await;
/// # let _ = (pods, same_pods, nodes); Ok(())
/// # }
/// ```
///
/// Cloning is cheap: clones share the informers (hand one to each controller).
#[derive(Clone)]
pub struct SharedInformerFactory {
    inner: Arc<FactoryInner>,
}

struct FactoryInner {
    client: Client,
    options: FactoryOptions,
    informers: Mutex<Vec<Registered>>,
    error_handlers: Mutex<Vec<ErrorHandler>>,
    cancel: CancellationToken,
}

impl std::fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<InformerKey> = self
            .inner
            .informers
            .lock()
            .iter()
            .map(|r| r.key.clone())
            .collect();
        f.debug_struct("SharedInformerFactory")
            .field("informers", &keys)
            .finish()
    }
}

/// A type's short name, e.g. `Pod` for `k8s_openapi::api::core::v1::Pod`.
fn short_name<K>() -> String {
    let full = std::any::type_name::<K>();
    let base = full.split('<').next().unwrap_or(full);
    let short = base.rsplit("::").next().unwrap_or(base);
    match full.split_once('<') {
        Some((_, args)) => {
            let inner = args.trim_end_matches('>');
            let inner = inner.split(',').next().unwrap_or(inner);
            format!("{short}<{}>", inner.rsplit("::").next().unwrap_or(inner))
        }
        None => short.to_owned(),
    }
}

impl SharedInformerFactory {
    /// A factory of informers using `client`.
    pub fn new(client: Client, options: FactoryOptions) -> Self {
        Self {
            inner: Arc::new(FactoryInner {
                client,
                options,
                informers: Mutex::new(Vec::new()),
                error_handlers: Mutex::new(Vec::new()),
                cancel: CancellationToken::new(),
            }),
        }
    }

    /// The client the informers list and watch with.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    fn informer_options<K: Resource + 'static>(
        &self,
        name: String,
        namespaced: bool,
    ) -> InformerOptions<K> {
        let mut reflector = self.inner.options.reflector.clone();
        if let Some(selector) = &self.inner.options.label_selector {
            reflector = reflector.label_selector(selector.clone());
        }
        if let Some(selector) = &self.inner.options.field_selector {
            reflector = reflector.field_selector(selector.clone());
        }
        let indexers = if namespaced {
            Indexers::new().namespace()
        } else {
            Indexers::new()
        };
        let mut options = InformerOptions::default()
            .reflector(reflector)
            .name(name)
            .indexers(indexers);
        #[cfg(feature = "metrics")]
        if let Some(metrics) = &self.inner.options.informer_metrics {
            options = options.metrics(metrics);
        }
        let resync = self
            .inner
            .options
            .resync_for
            .get(std::any::type_name::<K>())
            .copied()
            .or(self.inner.options.default_resync);
        if let Some(period) = resync {
            options = options.default_resync(period);
        }
        options
    }

    /// The namespace the factory watches for a type of this scope.
    fn namespace_for(&self, namespaced: bool) -> Option<String> {
        self.inner.options.namespace.clone().filter(|_| namespaced)
    }

    /// The informer registered under `key`, or a new one made by `make`.
    fn get_or_make<K: Resource + Clone + Send + Sync + 'static>(
        &self,
        key: InformerKey,
        name: String,
        namespaced: bool,
        make: impl FnOnce(InformerOptions<K>) -> SharedIndexInformer<K>,
    ) -> SharedIndexInformer<K> {
        let mut informers = self.inner.informers.lock();
        if let Some(found) = informers.iter().find(|r| r.key == key) {
            let informer = found
                .informer
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>();
            return informer
                .expect("a factory key names one object type")
                .clone();
        }
        let name = match &key.namespace {
            Some(ns) => format!("{name} in {ns}"),
            None => name,
        };
        let informer = make(self.informer_options(name, namespaced));
        for handler in self.inner.error_handlers.lock().iter() {
            AnyInformer::on_error(&informer, handler.clone());
        }
        informers.push(Registered {
            key,
            informer: Box::new(informer.clone()),
            task: None,
        });
        informer
    }

    /// The shared informer of `K`: in the factory's namespace if `K` is namespaced and the
    /// factory has one, cluster-wide otherwise.
    pub fn informer<K>(&self) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::Scope: FactoryScope,
    {
        let ns = self.namespace_for(K::Scope::NAMESPACED);
        let key = InformerKey {
            objects: TypeId::of::<K>(),
            what: "typed".into(),
            namespace: ns.clone(),
        };
        self.get_or_make(key, short_name::<K>(), K::Scope::NAMESPACED, |options| {
            let lw = ClientListerWatcher::<K>::new(self.inner.client.clone(), ns.as_deref(), &());
            SharedIndexInformer::new(lw, options)
        })
    }

    /// The shared informer of a resource known only at run time; `scope` (from discovery)
    /// says whether the factory's namespace applies.
    pub fn dynamic_informer(
        &self,
        resource: &ApiResource,
        scope: Scope,
    ) -> SharedIndexInformer<DynamicObject> {
        let ns = self.namespace_for(matches!(scope, Scope::Namespaced));
        let what = format!("{}/{}", resource.api_version, resource.plural);
        let key = InformerKey {
            objects: TypeId::of::<DynamicObject>(),
            what: what.clone(),
            namespace: ns.clone(),
        };
        let namespaced = matches!(scope, Scope::Namespaced);
        self.get_or_make(key, what, namespaced, |options| {
            let lw = ClientListerWatcher::<DynamicObject>::new(
                self.inner.client.clone(),
                ns.as_deref(),
                resource,
            );
            SharedIndexInformer::new(lw, options)
        })
    }

    /// The shared informer of `K`'s metadata only (`PartialObjectMeta<K>`): a fraction of
    /// the memory when handlers need no more than names, labels and owners.
    pub fn metadata_informer<K>(&self) -> SharedIndexInformer<PartialObjectMeta<K>>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        K::Scope: FactoryScope,
    {
        let ns = self.namespace_for(K::Scope::NAMESPACED);
        let key = InformerKey {
            objects: TypeId::of::<PartialObjectMeta<K>>(),
            what: "metadata".into(),
            namespace: ns.clone(),
        };
        let name = format!("{} metadata", short_name::<K>());
        self.get_or_make(key, name, K::Scope::NAMESPACED, |options| {
            let lw = ClientListerWatcher::<PartialObjectMeta<K>>::new(
                self.inner.client.clone(),
                ns.as_deref(),
                &(),
            )
            .metadata_only();
            SharedIndexInformer::new(lw, options)
        })
    }

    /// Calls `handler` with every failure of every informer of this factory (those made
    /// before and after), with the informer's name. See
    /// [`SharedIndexInformer::on_error`].
    pub fn on_error(&self, handler: impl Fn(&str, &Failure) + Send + Sync + 'static) {
        let handler: ErrorHandler = Arc::new(handler);
        self.inner.error_handlers.lock().push(handler.clone());
        for registered in self.inner.informers.lock().iter() {
            registered.informer.on_error(handler.clone());
        }
    }

    /// Starts every informer not started yet (informers asked for later need another call).
    pub fn start(&self) {
        let mut informers = self.inner.informers.lock();
        for registered in informers.iter_mut().filter(|r| r.task.is_none()) {
            let run = registered.informer.run(self.inner.cancel.child_token());
            registered.task = Some(tokio::spawn(run));
        }
    }

    /// Waits until every started informer has synced, at most `timeout`; the error names
    /// each informer that did not, with its last error.
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), CacheSyncError> {
        let waits: Vec<_> = {
            let informers = self.inner.informers.lock();
            let started = informers.iter().filter(|r| r.task.is_some());
            started.map(|r| r.informer.wait_for_sync(timeout)).collect()
        };
        let unsynced: Vec<SyncError> = join_all(waits)
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        match unsynced.is_empty() {
            true => Ok(()),
            false => Err(CacheSyncError { unsynced }),
        }
    }

    /// Waits until every started informer has synced, or the factory is shut down; reports
    /// each informer by its name. Prefer [`wait_for_sync`](Self::wait_for_sync), which
    /// takes a timeout and says why an informer did not sync.
    pub async fn wait_for_cache_sync(&self) -> BTreeMap<String, bool> {
        let forever = Duration::from_secs(u64::from(u32::MAX));
        tokio::select! {
            () = self.inner.cancel.cancelled() => {}
            _ = self.wait_for_sync(forever) => {}
        }
        self.health()
            .into_iter()
            .map(|h| (h.name, h.synced))
            .collect()
    }

    /// The health of every started informer, for probes.
    pub fn health(&self) -> Vec<InformerHealth> {
        let informers = self.inner.informers.lock();
        let started = informers.iter().filter(|r| r.task.is_some());
        started.map(|r| r.informer.health()).collect()
    }

    /// Stops every informer and waits until they have stopped.
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        let tasks: Vec<JoinHandle<()>> = {
            let mut informers = self.inner.informers.lock();
            informers.iter_mut().filter_map(|r| r.task.take()).collect()
        };
        for task in tasks {
            let _ = task.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::short_name;

    #[test]
    fn short_names_read_well() {
        use k8s_openapi::api::core::v1::Pod;
        assert_eq!(short_name::<Pod>(), "Pod");
        assert_eq!(short_name::<crate::compact::Compact<Pod>>(), "Compact<Pod>");
    }
}
