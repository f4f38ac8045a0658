//! [`FactoryOptions`]: what every informer of a factory shares; [`FactoryScope`]: whether
//! the factory's namespace applies to a type.

use std::time::Duration;

use kube::core::{ClusterResourceScope, NamespaceResourceScope};

use crate::{list_watch::Selectors, reflector::ReflectorOptions};

/// Settings shared by every informer of a factory.
///
/// ```
/// use std::time::Duration;
/// use kube_informer::{factory::FactoryOptions, list_watch::Selectors};
///
/// // Every informer of this factory: one namespace, a selector (and, as by default, no
/// // managedFields in the cache).
/// let options = FactoryOptions::default()
///     .selectors(Selectors::default().in_namespace("shop").labels("team=payments"))
///     .default_resync(Duration::from_secs(300));
/// # let _ = options;
/// ```
#[derive(Clone, Default)]
pub struct FactoryOptions {
    pub(super) selectors: Selectors,
    pub(super) default_resync: Option<Duration>,
    pub(super) reflector: ReflectorOptions,
    pub(super) keep_managed_fields: bool,
    /// Protobuf for built-in kinds: always, never, or (`None`) the default (on).
    pub(super) protobuf: Option<bool>,
    /// Warm restarts for every informer (an informer's spec may name its own).
    pub(super) cache_dir: Option<crate::snapshot::CacheDir>,
    #[cfg(feature = "metrics")]
    pub(super) metrics: Option<crate::metrics::Metrics>,
}

impl std::fmt::Debug for FactoryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FactoryOptions")
            .field("selectors", &self.selectors)
            .field("default_resync", &self.default_resync)
            .field("keep_managed_fields", &self.keep_managed_fields)
            .field("protobuf", &self.protobuf)
            .field("cache_dir", &self.cache_dir)
            .finish_non_exhaustive()
    }
}

impl FactoryOptions {
    /// Which objects every informer lists and watches (namespaces, labels, fields), each
    /// part unless the informer's [`InformerSpec`](super::InformerSpec) sets its own.
    /// Namespaces apply to namespaced types; informers of cluster-scoped types (nodes,
    /// namespaces) are cluster-wide whatever they say, as in client-go.
    #[must_use]
    pub fn selectors(mut self, selectors: Selectors) -> Self {
        self.selectors = selectors;
        self
    }

    /// The resync period of every informer's handlers (default: none).
    #[must_use]
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.default_resync = Some(period);
        self
    }

    /// Keep `metadata.managedFields` in cached objects. By default a factory's informers
    /// leave them out: passed over unread while decoding (protobuf skips them by their
    /// length, JSON scans past them without building anything) and stripped on the way
    /// into the queue from objects that still carry them (a spec's own source), so no handler,
    /// lister or reconcile sees them. They are a quarter to a half of a typical object's
    /// bytes and the costliest part to decode (each entry's field set is JSON), and a
    /// controller reading from a cache has no use for them: controller-runtime operators
    /// configure the same (`cache.TransformStripManagedFields`), and kube-rs's docs
    /// recommend it. Keep them when a handler inspects field ownership (which manager set
    /// a field). An informer's own transform
    /// ([`InformerSpec::transform`](super::InformerSpec::transform)) runs after the strip.
    ///
    /// ```
    /// use kube_informer::factory::FactoryOptions;
    ///
    /// // Objects as the server sends them, managed fields and all.
    /// let whole = FactoryOptions::default().keep_managed_fields();
    /// # let _ = whole;
    /// ```
    #[must_use]
    pub fn keep_managed_fields(mut self) -> Self {
        self.keep_managed_fields = true;
        self
    }

    /// Whether informers of built-in types ask the API server for protobuf: yes by default,
    /// as client-go's in-cluster components do. On the benchmark's traffic (BENCHMARKS.md,
    /// "Protobuf": typed informers, managed fields kept) a typed informer over protobuf
    /// syncs 50k pods in 0.8× the time of JSON and reads 31% fewer bytes; one pod decoded in
    /// a loop ("Decoding one pod") goes 1.34× as fast as JSON with its managed fields
    /// skipped by their length (1.11× JSON that scans past them; 1.06× with
    /// [`keep_managed_fields`](Self::keep_managed_fields)); `Compact` objects keep the
    /// protobuf message (27% less memory per cached pod at 50k, both with managed fields).
    /// The objects are the same either way. Each answer is read as its
    /// `Content-Type` says, so a server or proxy that answers JSON still works; custom
    /// resources are JSON always, and dynamic informers unless their spec asks. Metadata informers ask for protobuf
    /// `PartialObjectMetadata` (for every kind, custom resources too, as client-go's
    /// metadata client does) only when this is set to `true`: measured on a real server
    /// (BENCHMARKS.md, "Protobuf"), a pod's metadata is 11% fewer bytes, decodes at the
    /// same rate, and a metadata informer's first sync of 10k pods took 1.25× as long. An informer's
    /// [`InformerSpec::protobuf`](super::InformerSpec::protobuf) overrides this.
    ///
    /// ```
    /// use kube_informer::factory::FactoryOptions;
    ///
    /// // JSON only, for every informer of this factory.
    /// let never = FactoryOptions::default().protobuf(false);
    /// # let _ = never;
    /// ```
    #[must_use]
    pub fn protobuf(mut self, on: bool) -> Self {
        self.protobuf = Some(on);
        self
    }

    /// How every reflector lists and watches (backoff, timeouts, streaming lists). The
    /// factory names each reflector after its informer, gives it the informer's
    /// selectors and records metrics as [`metrics`](Self::metrics) says: a name,
    /// selectors or metrics set on `options` are not used.
    #[must_use]
    pub fn reflector(mut self, options: ReflectorOptions) -> Self {
        self.reflector = options;
        self
    }

    /// Keep every informer's cache in `cache` between runs (warm restarts: see
    /// [`snapshot`](crate::snapshot)), unless its [`InformerSpec::cache_dir`](super::InformerSpec::cache_dir)
    /// names another. Each informer has its own file, named after its type, namespaces
    /// and selectors.
    ///
    /// ```
    /// use kube_informer::{factory::FactoryOptions, snapshot::CacheDir};
    ///
    /// let options = FactoryOptions::default().cache_dir(CacheDir::new("/var/cache/operator", "prod-eu-1"));
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn cache_dir(mut self, cache: crate::snapshot::CacheDir) -> Self {
        self.cache_dir = Some(cache);
        self
    }

    /// Record every informer's and reflector's metrics in `metrics` (see
    /// [`crate::metrics`]).
    #[cfg(feature = "metrics")]
    #[must_use]
    pub fn metrics(mut self, metrics: &crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics.clone());
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
