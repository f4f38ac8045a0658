//! [`SharedInformerFactory`]: one informer per resource type (and what it watches), shared
//! by every controller that asks for it.
//!
//! - `options.rs`: [`FactoryOptions`], the defaults of every informer (namespace,
//!   label and field selectors, resync, reflector options, stripping managedFields,
//!   protobuf, metrics), and [`FactoryScope`].
//! - `spec.rs`: [`InformerSpec`], one informer's own options (selectors, transform,
//!   indexes, resync, protobuf, source).
//! - `resolve.rs`: the one path from both to a watch: which setting applies (the table,
//!   one test per row), the sharing key derived from the result, and the one client source
//!   every constructor uses.
//! - `registry.rs`: what the factory keeps of each informer, whatever its type.
//! - `lifecycle.rs`: starting, waiting for, watching over and stopping them all.
//!
//! Informers are shared by what they watch (type, flavour, namespaces, selectors,
//! encoding): two requests that differ only in a resync, transform or indexes get the same
//! informer (the first one's settings; the indexes are added to it). See
//! [`InformerSpec`] for the knobs, and below for how each applies.
//!
#![doc = include_str!("settings.md")]

mod lifecycle;
mod options;
mod registry;
mod resolve;
mod spec;

use std::{fmt::Debug, sync::Arc};

use kube::{
    Client, Resource,
    api::{ApiResource, DynamicObject},
    core::PartialObjectMeta,
    discovery::Scope,
};
use parking_lot::Mutex;
use serde::{Serialize, de::DeserializeOwned};
use tokio_util::sync::CancellationToken;

pub use self::{
    options::{FactoryOptions, FactoryScope},
    registry::{CacheSyncError, Watched},
    spec::InformerSpec,
};
use self::{
    registry::{AnyInformer, ErrorHandler, Registered},
    resolve::{Objects, Resolved, Watch, resolve_persisted},
};
use crate::{
    Indexers,
    informer::{InformerOptions, SharedIndexInformer},
    list_watch::ListerWatcher,
};

/// Hands out one shared informer per resource type and options, starts them, waits for
/// their caches, and stops them (client-go's `SharedInformerFactory`).
///
/// ```no_run
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
/// use kube_informer::{factory::{FactoryOptions, SharedInformerFactory}, list_watch::Selectors};
///
/// # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let shop = Selectors::default().in_namespace("shop");
/// let factory = SharedInformerFactory::new(client, FactoryOptions::default().selectors(shop));
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
        let keys: Vec<Watch> = self
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

/// An informer over `namespaces` (empty: all; several: one watch each into one cache), its
/// sources made by `source`.
fn informer_in<K, L>(
    namespaces: &[String],
    options: InformerOptions<K>,
    source: impl Fn(Option<&str>) -> L,
) -> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    match namespaces {
        [] => SharedIndexInformer::new(source(None), options),
        [one] => SharedIndexInformer::new(source(Some(one)), options),
        many => {
            let sources = many.iter().map(|ns| (ns.clone(), source(Some(ns))));
            SharedIndexInformer::new_in_namespaces(sources, options)
        }
    }
}

/// Adds the index functions of `indexers` the informer does not have yet.
fn add_missing_indexers<K: Resource + Clone + Send + Sync + 'static>(
    informer: &SharedIndexInformer<K>,
    indexers: &Indexers<K>,
) {
    let present = informer.store().indexer_names();
    if indexers.names().all(|n| present.iter().any(|p| p == n)) {
        return;
    }
    if let Err(err) = informer.add_indexers(indexers.without(&present)) {
        tracing::warn!(informer = %informer.name(), "adding index functions failed: {err}");
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

    /// The namespaces its informers of namespaced kinds watch, if the factory is limited to
    /// some ([`Selectors::in_namespaces`](crate::Selectors::in_namespaces)); `None`: all.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use kube_informer::{FactoryOptions, Selectors, SharedInformerFactory};
    ///
    /// let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// let options = FactoryOptions::default().selectors(Selectors::default().in_namespace("shop"));
    /// let factory = SharedInformerFactory::new(client, options);
    /// assert_eq!(factory.namespaces(), Some(&["shop".to_owned()][..]));
    /// # }
    /// ```
    pub fn namespaces(&self) -> Option<&[String]> {
        self.inner
            .options
            .selectors
            .namespaces()
            .filter(|namespaces| !namespaces.is_empty())
    }

    /// The selectors an informer made with `selectors` (an [`InformerSpec`]'s) lists and
    /// watches: each part left unset is the factory's.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use kube_informer::{FactoryOptions, Selectors, SharedInformerFactory};
    ///
    /// let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// let options = FactoryOptions::default().selectors(Selectors::default().labels("team=a"));
    /// let factory = SharedInformerFactory::new(client, options);
    /// let own = factory.resolve_selectors(&Selectors::default().fields("type=Opaque"));
    /// assert_eq!((own.label_selector(), own.field_selector()), (Some("team=a"), Some("type=Opaque")));
    /// # }
    /// ```
    pub fn resolve_selectors(&self, selectors: &crate::Selectors) -> crate::Selectors {
        selectors.or(&self.inner.options.selectors)
    }

    /// What its informers made so far list and watch, one entry per resource and set of
    /// namespaces (informers with a custom source are not counted): the `list` and `watch`
    /// permissions an operator's RBAC needs.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube_informer::{FactoryOptions, Selectors, SharedInformerFactory};
    ///
    /// let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// let options = FactoryOptions::default().selectors(Selectors::default().in_namespace("shop"));
    /// let factory = SharedInformerFactory::new(client, options);
    /// let _ = factory.informer::<ConfigMap>();
    /// let watched = factory.watched();
    /// assert_eq!(watched.len(), 1);
    /// assert_eq!((watched[0].group.as_str(), watched[0].resource.as_str()), ("", "configmaps"));
    /// assert_eq!(watched[0].namespaces, ["shop"]);
    /// # }
    /// ```
    pub fn watched(&self) -> Vec<Watched> {
        let informers = self.inner.informers.lock();
        let mut watched: Vec<Watched> = informers.iter().filter_map(|r| r.reads.clone()).collect();
        watched.sort();
        watched.dedup();
        watched
    }

    /// The informer that `spec` resolves to for `objects`: the registered one with the
    /// same [`Watch`](resolve::Watch), or a new one.
    fn get_or_make<K>(
        &self,
        objects: Objects,
        spec: InformerSpec<K>,
        dyntype: &K::DynamicType,
    ) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let resolved = resolve_persisted(&self.inner.options, objects, spec);
        let mut informers = self.inner.informers.lock();
        if let Some(found) = informers.iter().find(|r| r.key == resolved.watch) {
            let informer = found
                .informer
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>()
                .expect("a factory key names one object type")
                .clone();
            add_missing_indexers(&informer, &resolved.indexers);
            return informer;
        }
        let Resolved {
            watch,
            options,
            transform,
            indexers,
            source,
        } = resolved;
        let reads = source.is_none().then(|| Watched {
            group: K::group(dyntype).into_owned(),
            resource: K::plural(dyntype).into_owned(),
            namespaces: watch.namespaces.clone(),
        });
        let informer = match source {
            Some(custom) => custom(options),
            None => informer_in(&watch.namespaces, options, |namespace| {
                watch.client_source::<K>(&self.inner.client, namespace, dyntype)
            }),
        };
        if let Some(transform) = transform {
            let _ = informer.set_transform(move |obj| transform(obj));
        }
        add_missing_indexers(&informer, &indexers);
        for handler in self.inner.error_handlers.lock().iter() {
            AnyInformer::on_error(&informer, handler.clone());
        }
        informers.push(Registered {
            key: watch,
            reads,
            informer: Box::new(informer.clone()),
            task: None,
        });
        informer
    }

    /// The shared informer of `K`: in the factory's namespace if `K` is namespaced and the
    /// factory has one, cluster-wide otherwise.
    pub fn informer<K>(&self) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + Serialize
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
        K::Scope: FactoryScope,
    {
        self.informer_with(InformerSpec::new())
    }

    /// The shared informer of `K` as `spec` says (its own namespaces, selectors,
    /// transform, indexes, resync, protobuf or source); shared by every request for the
    /// same type, namespaces, selectors and encoding. See [`InformerSpec`] and the
    /// [table](crate::factory#which-setting-applies) of which setting applies.
    #[doc(alias = "InformerFor")]
    pub fn informer_with<K>(&self, spec: InformerSpec<K>) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + Serialize
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
        K::Scope: FactoryScope,
    {
        self.get_or_make(Objects::typed::<K>(), spec, &())
    }

    /// The shared informer of a resource known only at run time; `scope` (from discovery)
    /// says whether the factory's namespace applies.
    pub fn dynamic_informer(
        &self,
        resource: &ApiResource,
        scope: Scope,
    ) -> SharedIndexInformer<DynamicObject> {
        self.dynamic_informer_with(resource, scope, InformerSpec::new())
    }

    /// [`dynamic_informer`](Self::dynamic_informer) as `spec` says (namespaces, selectors,
    /// transform, indexes, resync, protobuf: off unless the spec asks), shared as [`informer_with`](Self::informer_with)'s are.
    pub fn dynamic_informer_with(
        &self,
        resource: &ApiResource,
        scope: Scope,
        spec: InformerSpec<DynamicObject>,
    ) -> SharedIndexInformer<DynamicObject> {
        self.get_or_make(Objects::dynamic(resource, &scope), spec, resource)
    }

    /// The shared informer of `K`'s metadata only (`PartialObjectMeta<K>`): a fraction of
    /// the memory when handlers need no more than names, labels and owners.
    pub fn metadata_informer<K>(&self) -> SharedIndexInformer<PartialObjectMeta<K>>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        K::Scope: FactoryScope,
    {
        self.metadata_informer_with(InformerSpec::new())
    }

    /// [`metadata_informer`](Self::metadata_informer) as `spec` says (namespaces,
    /// selectors, transform, indexes, resync, protobuf), shared as
    /// [`informer_with`](Self::informer_with)'s are.
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) {
    /// use k8s_openapi::api::core::v1::Secret;
    /// use kube_informer::{FactoryOptions, InformerSpec, SharedInformerFactory, list_watch::Selectors};
    ///
    /// let factory = SharedInformerFactory::new(client, FactoryOptions::default());
    /// // Names and labels of the team's Secrets only: no Secret data in memory.
    /// let secrets = factory.metadata_informer_with::<Secret>(
    ///     InformerSpec::new()
    ///         .selectors(Selectors::default().in_namespace("shop").labels("team=payments")),
    /// );
    /// # let _ = secrets;
    /// # }
    /// ```
    pub fn metadata_informer_with<K>(
        &self,
        spec: InformerSpec<PartialObjectMeta<K>>,
    ) -> SharedIndexInformer<PartialObjectMeta<K>>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        K::Scope: FactoryScope,
    {
        self.get_or_make(Objects::metadata::<K>(), spec, &())
    }
}
