//! [`InformerSpec`]: one informer's own options in a factory (client-go's `InformerFor`
//! with a custom constructor and `WithTweakListOptions`, controller-runtime's `ByObject`).

use std::{sync::Arc, time::Duration};

use crate::{
    Indexers,
    informer::{InformerOptions, SharedIndexInformer},
    list_watch::{ListerWatcher, Selectors},
    snapshot::{CacheDir, Persistence},
};

/// A custom source: makes the informer from the resolved options.
pub(super) type Make<K> = Box<dyn FnOnce(InformerOptions<K>) -> SharedIndexInformer<K> + Send>;

/// How the factory's informer of `K` is made, where it differs from the factory's
/// defaults: its selectors (namespaces, labels, fields), transform, indexes, resync,
/// protobuf or JSON, or its whole source. Which setting applies is in the
/// [`factory`](crate::factory#which-setting-applies) table.
///
/// Informers are shared by what they watch: the same type, namespaces and selectors give
/// the same informer, whoever asks. The first request that creates an informer sets its
/// transform and source; later ones share it (their indexes are added if missing).
///
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use kube_informer::{Indexers, factory::{FactoryOptions, InformerSpec, SharedInformerFactory}, list_watch::Selectors};
///
/// # fn demo(client: kube::Client) {
/// let factory = SharedInformerFactory::new(client, FactoryOptions::default());
/// // Pods of two namespaces (one watch each, one cache), only the app's, without their
/// // annotations (managedFields are left out by default).
/// let pods = factory.informer_with::<Pod>(
///     InformerSpec::new()
///         .selectors(Selectors::default().in_namespaces(["shop", "checkout"]).labels("app=web"))
///         .transform(|mut pod: Pod| {
///             pod.metadata.annotations = None;
///             pod
///         })
///         .indexers(Indexers::new().index("by-node", |p: &Pod| {
///             p.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()
///         })),
/// );
/// # let _ = pods;
/// # }
/// ```
pub struct InformerSpec<K> {
    pub(super) selectors: Selectors,
    pub(super) transform: Option<Arc<dyn Fn(K) -> K + Send + Sync>>,
    pub(super) indexers: Indexers<K>,
    pub(super) resync: Option<Duration>,
    pub(super) source: Option<Make<K>>,
    /// Protobuf or JSON, if not the factory's choice.
    pub(super) protobuf: Option<bool>,
    pub(super) persistence: Option<Persistence<K>>,
}

impl<K> Default for InformerSpec<K> {
    fn default() -> Self {
        Self {
            selectors: Selectors::default(),
            transform: None,
            indexers: Indexers::new(),
            resync: None,
            source: None,
            protobuf: None,
            persistence: None,
        }
    }
}

impl<K> std::fmt::Debug for InformerSpec<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerSpec")
            .field("selectors", &self.selectors)
            .field("transform", &self.transform.is_some())
            .field("resync", &self.resync)
            .field("indexers", &self.indexers)
            .field("custom_source", &self.source.is_some())
            .field("protobuf", &self.protobuf)
            .field("persistence", &self.persistence)
            .finish()
    }
}

impl<K: kube::Resource + Clone + Send + Sync + 'static> InformerSpec<K> {
    /// The factory's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Which objects this informer lists and watches (namespaces, labels, fields); each
    /// part it leaves unset is the factory's.
    #[must_use]
    pub fn selectors(mut self, selectors: Selectors) -> Self {
        self.selectors = selectors;
        self
    }

    /// The selectors set so far (each part left unset is the factory's).
    pub fn current_selectors(&self) -> &Selectors {
        &self.selectors
    }

    /// Also require `selector` of the labels (see [`Selectors::and_labels`]).
    #[must_use]
    pub fn and_labels(mut self, selector: impl Into<String>) -> Self {
        self.selectors = self.selectors.and_labels(selector);
        self
    }

    /// Transform every object once before it is cached (after the factory's strip of
    /// managedFields, unless it keeps them).
    #[must_use]
    pub fn transform(mut self, transform: impl Fn(K) -> K + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(transform));
        self
    }

    /// Index functions for the cache (besides the namespace index factory informers have).
    #[must_use]
    pub fn indexers(mut self, indexers: Indexers<K>) -> Self {
        self.indexers = indexers;
        self
    }

    /// The resync period of this informer's handlers (instead of the factory's).
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }

    /// Ask for protobuf (`true`) or JSON only (`false`) for this informer, whatever the
    /// factory's [`FactoryOptions::protobuf`](super::FactoryOptions::protobuf) says. Two
    /// specs that differ only in this get two informers.
    #[must_use]
    pub fn protobuf(mut self, on: bool) -> Self {
        self.protobuf = Some(on);
        self
    }

    /// List and watch with `source` instead of the factory's client (e.g. a
    /// `MemorySource` (feature `testing`) in tests, or any other
    /// [`ListerWatcher`]); the spec's namespaces and selectors then only identify the
    /// informer, the source decides what it lists.
    #[must_use]
    pub fn list_watcher(mut self, source: impl ListerWatcher<K>) -> Self {
        self.source = Some(Box::new(move |options| {
            SharedIndexInformer::new(source, options)
        }));
        self
    }
}

impl<K> InformerSpec<K>
where
    K: kube::Resource
        + Clone
        + Send
        + Sync
        + serde::Serialize
        + serde::de::DeserializeOwned
        + 'static,
{
    /// Keep this informer's cache in `cache` between runs: a restarted process resumes the
    /// watch from the last snapshot instead of listing everything again (see
    /// [`snapshot`](crate::snapshot) for what is written, when a snapshot is used or
    /// refused, and when the informer then reports synced). The snapshot is identified by
    /// the cluster and schema `cache` names, the type, the namespaces and the selectors.
    ///
    /// Objects are written after the transform and go through it again when read back:
    /// the transform must give the same object when applied twice (client-go asks the same
    /// of its transforms). An informer over several namespaces keeps one snapshot per
    /// namespace (one watch, one version each), each used or refused on its own.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube_informer::{factory::{FactoryOptions, InformerSpec, SharedInformerFactory}, snapshot::CacheDir};
    ///
    /// # fn demo(client: kube::Client) {
    /// let factory = SharedInformerFactory::new(client, FactoryOptions::default());
    /// let configs = factory.informer_with::<ConfigMap>(
    ///     InformerSpec::new().cache_dir(CacheDir::new("/var/cache/operator", "prod-eu-1")),
    /// );
    /// # let _ = configs;
    /// # }
    /// ```
    #[must_use]
    pub fn cache_dir(mut self, cache: CacheDir) -> Self {
        self.persistence = Some(Persistence::new(cache));
        self
    }
}
