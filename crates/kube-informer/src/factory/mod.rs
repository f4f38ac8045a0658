//! [`SharedInformerFactory`]: one informer per resource type (and what it watches), shared
//! by every controller that asks for it.
//!
//! - `options.rs`: [`FactoryOptions`], the defaults of every informer (namespace,
//!   label and field selectors, resync, reflector options, stripping managedFields,
//!   metrics), and [`FactoryScope`].
//! - `spec.rs`: [`InformerSpec`], one informer's own options (selectors, transform,
//!   indexes, resync, source).
//!
//! # Which setting applies
//!
//! Each knob is set in one place per level: a factory default, and an override on the
//! informer's [`InformerSpec`] (as controller-runtime's `cache.Options` and `ByObject`).
//!
//! | knob | factory default ([`FactoryOptions`]) | per informer ([`InformerSpec`]) | what applies |
//! |---|---|---|---|
//! | namespaces, label / field selector ([`Selectors`]) | `selectors` | `selectors` | each part: the spec's, else the factory's, else all (namespaces apply to namespaced types only) |
//! | resync period | `default_resync` | `resync` | the spec's, else the factory's, else none |
//! | transform | `strip_managed_fields` | `transform` | both: the factory's first, then the spec's |
//! | indexes | the namespace index (namespaced types) | `indexers` | both |
//! | list/watch tuning, metrics | `reflector`, `metrics` | — | the factory's (a reflector's own name, selectors and metrics are replaced) |
//! | source | the factory's client | `list_watcher` | the spec's, else the client |
//!
//! Informers are shared by type, namespaces and selectors: two specs that differ only in
//! a resync, transform or indexes get the same informer (the first one's settings; the
//! indexes are added to it).
//! - `registry.rs`: what the factory keeps of each informer, whatever its type.
//! - `lifecycle.rs`: starting, waiting for, watching over and stopping them all.

mod lifecycle;
mod options;
mod registry;
mod spec;

use std::{any::TypeId, fmt::Debug, sync::Arc};

use kube::{
    Client, Resource,
    api::{ApiResource, DynamicObject},
    core::PartialObjectMeta,
    discovery::Scope,
};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use self::registry::{AnyInformer, ErrorHandler, InformerKey, Registered};
pub use self::{
    options::{FactoryOptions, FactoryScope},
    registry::CacheSyncError,
    spec::InformerSpec,
};
use crate::{
    Indexers,
    informer::{InformerOptions, SharedIndexInformer},
    list_watch::{ClientListerWatcher, ListerWatcher, Selectors},
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

/// An informer over `namespaces` (empty: all; several: one watch each into one cache), its
/// sources made by `source`.
fn informer_in<K, L>(
    namespaces: Vec<String>,
    options: InformerOptions<K>,
    source: impl Fn(Option<&str>) -> L,
) -> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    match namespaces.as_slice() {
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

    /// The options of a new informer of `K`: the factory's, overridden by `spec`.
    fn informer_options<K: Resource + Clone + Send + Sync + 'static>(
        &self,
        name: String,
        namespaced: bool,
        spec: &InformerSpec<K>,
    ) -> InformerOptions<K> {
        let defaults = &self.inner.options;
        let selectors = self.selectors(spec).without_namespaces();
        let mut reflector = defaults.reflector.clone().selectors(selectors);
        // Named after each informer (one name for all would merge their metrics), and
        // recorded as the factory says.
        reflector.name = None;
        #[cfg(feature = "metrics")]
        {
            reflector.metrics = None;
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
        if let Some(metrics) = &defaults.metrics {
            options = options.metrics(metrics);
        }
        if let Some(period) = spec.resync.or(defaults.default_resync) {
            options.default_resync = Some(period);
        }
        options
    }

    /// The transforms that apply to `K`: the factory's, then the spec's, as one.
    fn transform<K: Resource + 'static>(
        &self,
        spec: &InformerSpec<K>,
    ) -> Option<Arc<dyn Fn(K) -> K + Send + Sync>> {
        let defaults = &self.inner.options;
        let mut steps: Vec<Arc<dyn Fn(K) -> K + Send + Sync>> = Vec::new();
        if defaults.strip_managed_fields {
            steps.push(Arc::new(crate::informer::strip_managed_fields::<K>));
        }
        steps.extend(spec.transform.clone());
        match steps.len() {
            0 => None,
            1 => steps.pop(),
            _ => Some(Arc::new(move |obj| {
                steps.iter().fold(obj, |obj, step| step(obj))
            })),
        }
    }

    /// The namespaces the factory watches for `spec`'s informer of a type of this scope
    /// (empty: all).
    fn namespaces_for<K>(&self, namespaced: bool, spec: &InformerSpec<K>) -> Vec<String> {
        match namespaced {
            true => self
                .selectors(spec)
                .namespaces()
                .unwrap_or_default()
                .to_vec(),
            false => Vec::new(),
        }
    }

    /// The label and field selectors of `spec`'s informer, each its own or else the
    /// factory's (the namespaces are [`namespaces_for`](Self::namespaces_for)).
    fn selectors<K>(&self, spec: &InformerSpec<K>) -> Selectors {
        spec.selectors.or(&self.inner.options.selectors)
    }

    fn key<K: 'static>(
        &self,
        what: &str,
        namespaces: Vec<String>,
        spec: &InformerSpec<K>,
    ) -> InformerKey {
        InformerKey {
            objects: TypeId::of::<K>(),
            what: what.to_owned(),
            namespaces,
            selectors: self.selectors(spec).without_namespaces(),
        }
    }

    /// The informer registered under `key`, or a new one made by `make` from `spec`.
    fn get_or_make<K: Resource + Clone + Send + Sync + 'static>(
        &self,
        key: InformerKey,
        name: String,
        namespaced: bool,
        mut spec: InformerSpec<K>,
        make: impl FnOnce(InformerOptions<K>) -> SharedIndexInformer<K>,
    ) -> SharedIndexInformer<K> {
        let mut informers = self.inner.informers.lock();
        if let Some(found) = informers.iter().find(|r| r.key == key) {
            let informer = found
                .informer
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>()
                .expect("a factory key names one object type")
                .clone();
            add_missing_indexers(&informer, &spec.indexers);
            return informer;
        }
        let name = match key.namespaces.as_slice() {
            [] => name,
            [one] => format!("{name} in {one}"),
            many => format!("{name} in {}", many.join(",")),
        };
        let options = self.informer_options(name, namespaced, &spec);
        let transform = self.transform(&spec);
        let informer = match spec.source.take() {
            Some(custom) => custom(options),
            None => make(options),
        };
        if let Some(transform) = transform {
            let _ = informer.set_transform(move |obj| transform(obj));
        }
        add_missing_indexers(&informer, &spec.indexers);
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
        self.informer_with(InformerSpec::new())
    }

    /// The shared informer of `K` as `spec` says (its own namespaces, selectors,
    /// transform, indexes, resync or source); shared by every request for the same type,
    /// namespaces and selectors. See [`InformerSpec`].
    #[doc(alias = "InformerFor")]
    pub fn informer_with<K>(&self, spec: InformerSpec<K>) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::Scope: FactoryScope,
    {
        let namespaced = K::Scope::NAMESPACED;
        let namespaces = self.namespaces_for(namespaced, &spec);
        let protobuf = spec.protobuf.unwrap_or(self.inner.options.wants_protobuf());
        let what = if protobuf {
            "typed"
        } else {
            "typed, JSON only"
        };
        let key = self.key(what, namespaces.clone(), &spec);
        let client = self.inner.client.clone();
        let strip = self.inner.options.strip_managed_fields;
        self.get_or_make(key, short_name::<K>(), namespaced, spec, move |options| {
            informer_in(namespaces, options, |ns| {
                let source = ClientListerWatcher::<K>::new(client.clone(), ns, &());
                // Stripped after decoding anyway: over protobuf, never decoded.
                let source = if strip {
                    source.without_managed_fields()
                } else {
                    source
                };
                source.protobuf(protobuf)
            })
        })
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
    /// transform, indexes, resync), shared as [`informer_with`](Self::informer_with)'s are.
    pub fn dynamic_informer_with(
        &self,
        resource: &ApiResource,
        scope: Scope,
        spec: InformerSpec<DynamicObject>,
    ) -> SharedIndexInformer<DynamicObject> {
        let namespaced = matches!(scope, Scope::Namespaced);
        let namespaces = self.namespaces_for(namespaced, &spec);
        let what = format!("{}/{}", resource.api_version, resource.plural);
        let key = self.key(&what, namespaces.clone(), &spec);
        let client = self.inner.client.clone();
        self.get_or_make(key, what, namespaced, spec, move |options| {
            informer_in(namespaces, options, |ns| {
                ClientListerWatcher::<DynamicObject>::new(client.clone(), ns, resource)
            })
        })
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
    /// selectors, transform, indexes, resync), shared as
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
        let namespaced = K::Scope::NAMESPACED;
        let namespaces = self.namespaces_for(namespaced, &spec);
        let protobuf = spec
            .protobuf
            .unwrap_or(self.inner.options.wants_metadata_protobuf());
        let what = match protobuf {
            true => "metadata",
            false => "metadata, JSON only",
        };
        let key = self.key(what, namespaces.clone(), &spec);
        let name = format!("{} metadata", short_name::<K>());
        let client = self.inner.client.clone();
        let strip = self.inner.options.strip_managed_fields;
        self.get_or_make(key, name, namespaced, spec, move |options| {
            informer_in(namespaces, options, |ns| {
                let source =
                    ClientListerWatcher::<PartialObjectMeta<K>>::new(client.clone(), ns, &())
                        .metadata_only();
                let source = match strip {
                    true => source.without_managed_fields(),
                    false => source,
                };
                source.protobuf(protobuf)
            })
        })
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
