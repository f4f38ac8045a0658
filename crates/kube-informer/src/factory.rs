//! [`SharedInformerFactory`]: one informer per resource type (and options), shared by every
//! controller that asks for it.

use std::{
    any::Any,
    collections::{BTreeMap, HashMap},
    fmt::Debug,
    time::Duration,
};

use futures_util::future::BoxFuture;
use kube::{
    Client, Resource,
    api::{ApiResource, DynamicObject},
    core::PartialObjectMeta,
};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{
    informer::{InformerOptions, SharedIndexInformer},
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
}

impl FactoryOptions {
    /// Watch only this namespace (for namespaced types; see
    /// [`SharedInformerFactory::cluster_informer`] for cluster-scoped ones).
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
}

/// An informer whatever its type, as the factory keeps it.
trait AnyInformer: Send + Sync {
    fn run(&self, cancel: CancellationToken) -> BoxFuture<'static, ()>;
    fn has_synced(&self) -> bool;
    fn as_any(&self) -> &dyn Any;
}

impl<K: Resource + Clone + Send + Sync + 'static> AnyInformer for SharedIndexInformer<K> {
    fn run(&self, cancel: CancellationToken) -> BoxFuture<'static, ()> {
        let informer = self.clone();
        Box::pin(async move { informer.run(cancel).await })
    }

    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct Registered {
    key: String,
    informer: Box<dyn AnyInformer>,
    task: Option<JoinHandle<()>>,
}

/// Hands out one shared informer per resource type and options, starts them, waits for
/// their caches, and stops them (client-go's `SharedInformerFactory`).
///
/// ```no_run
/// use k8s_openapi::api::core::v1::{ConfigMap, Pod};
/// use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
///
/// # async fn demo(client: kube::Client) {
/// let factory = SharedInformerFactory::new(client, FactoryOptions::default().namespace("shop"));
/// let pods = factory.informer::<Pod>();       // controller A
/// let same_pods = factory.informer::<Pod>();  // controller B: the same informer
/// let configs = factory.informer::<ConfigMap>();
/// factory.start();
/// let synced = factory.wait_for_cache_sync().await;
/// assert!(synced.values().all(|s| *s));
/// // ... run the controllers ...
/// factory.shutdown().await;
/// # let _ = (pods, same_pods, configs);
/// # }
/// ```
pub struct SharedInformerFactory {
    client: Client,
    options: FactoryOptions,
    informers: Mutex<Vec<Registered>>,
    cancel: CancellationToken,
}

impl std::fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<String> = self
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

impl SharedInformerFactory {
    /// A factory of informers using `client`.
    pub fn new(client: Client, options: FactoryOptions) -> Self {
        Self {
            client,
            options,
            informers: Mutex::new(Vec::new()),
            cancel: CancellationToken::new(),
        }
    }

    fn informer_options(&self, type_name: &str) -> InformerOptions {
        let mut reflector = self.options.reflector.clone();
        if let Some(selector) = &self.options.label_selector {
            reflector = reflector.label_selector(selector.clone());
        }
        if let Some(selector) = &self.options.field_selector {
            reflector = reflector.field_selector(selector.clone());
        }
        let mut options = InformerOptions::default().reflector(reflector);
        let resync = self
            .options
            .resync_for
            .get(type_name)
            .copied()
            .or(self.options.default_resync);
        if let Some(period) = resync {
            options = options.default_resync(period);
        }
        options
    }

    /// The informer registered under `key`, or a new one made by `make`.
    fn get_or_make<K: Resource + Clone + Send + Sync + 'static>(
        &self,
        key: String,
        make: impl FnOnce(InformerOptions) -> SharedIndexInformer<K>,
    ) -> SharedIndexInformer<K> {
        let mut informers = self.informers.lock();
        if let Some(found) = informers.iter().find(|r| r.key == key) {
            let informer = found
                .informer
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>();
            return informer
                .expect("a factory key names one object type")
                .clone();
        }
        let informer = make(self.informer_options(std::any::type_name::<K>()));
        informers.push(Registered {
            key,
            informer: Box::new(informer.clone()),
            task: None,
        });
        informer
    }

    /// The shared informer of `K`, in the factory's namespace if it has one.
    pub fn informer<K>(&self) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let ns = self.options.namespace.clone();
        let key = format!("typed {} in {ns:?}", std::any::type_name::<K>());
        self.get_or_make(key, |options| {
            let lw = ClientListerWatcher::<K>::new(self.client.clone(), ns.as_deref(), &());
            SharedIndexInformer::new(lw, options)
        })
    }

    /// The shared informer of a cluster-scoped `K` (ignores the factory's namespace).
    pub fn cluster_informer<K>(&self) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let key = format!("typed {} cluster-wide", std::any::type_name::<K>());
        self.get_or_make(key, |options| {
            let lw = ClientListerWatcher::<K>::new(self.client.clone(), None, &());
            SharedIndexInformer::new(lw, options)
        })
    }

    /// The shared informer of a resource known only at run time.
    pub fn dynamic_informer(&self, resource: &ApiResource) -> SharedIndexInformer<DynamicObject> {
        let ns = self.options.namespace.clone();
        let key = format!(
            "dynamic {} {} in {ns:?}",
            resource.api_version, resource.plural
        );
        self.get_or_make(key, |options| {
            let lw = ClientListerWatcher::<DynamicObject>::new(
                self.client.clone(),
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
    {
        let ns = self.options.namespace.clone();
        let key = format!("metadata {} in {ns:?}", std::any::type_name::<K>());
        self.get_or_make(key, |options| {
            let lw = ClientListerWatcher::<PartialObjectMeta<K>>::new(
                self.client.clone(),
                ns.as_deref(),
                &(),
            )
            .metadata_only();
            SharedIndexInformer::new(lw, options)
        })
    }

    /// Starts every informer not started yet (informers asked for later need another call).
    pub fn start(&self) {
        let mut informers = self.informers.lock();
        for registered in informers.iter_mut().filter(|r| r.task.is_none()) {
            let run = registered.informer.run(self.cancel.child_token());
            registered.task = Some(tokio::spawn(run));
        }
    }

    /// Waits until every started informer has synced, or the factory is shut down; reports
    /// each informer by its key.
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_cache_sync(&self) -> BTreeMap<String, bool> {
        loop {
            let status: BTreeMap<String, bool> = {
                let informers = self.informers.lock();
                let started = informers.iter().filter(|r| r.task.is_some());
                started
                    .map(|r| (r.key.clone(), r.informer.has_synced()))
                    .collect()
            };
            if status.values().all(|synced| *synced) || self.cancel.is_cancelled() {
                return status;
            }
            tokio::select! {
                () = self.cancel.cancelled() => {}
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
    }

    /// Stops every informer and waits until they have stopped.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        let tasks: Vec<JoinHandle<()>> = {
            let mut informers = self.informers.lock();
            informers.iter_mut().filter_map(|r| r.task.take()).collect()
        };
        for task in tasks {
            let _ = task.await;
        }
    }
}
