//! Settings of an informer and of its handlers, and the errors of configuring them.

use std::time::Duration;

use crate::{IndexError, Indexers, reflector::ReflectorOptions};

/// Which queue sits between the reflector and the informer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueKind {
    /// Every event in arrival order (client-go ≥ 1.36's default).
    #[default]
    RealFifo,
    /// One entry per key with its pending deltas (the classic design).
    DeltaFifo,
}

/// Settings of a [`SharedIndexInformer`](super::SharedIndexInformer). A resync period is
/// set per handler ([`HandlerOptions::resync`]); under a factory, its default is
/// [`FactoryOptions::default_resync`](crate::FactoryOptions::default_resync).
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kube_informer::{Indexers, informer::{InformerOptions, QueueKind}};
///
/// let options: InformerOptions<Pod> = InformerOptions::default()
///     .name("pods")
///     .queue(QueueKind::DeltaFifo)
///     .indexers(Indexers::new().namespace());
/// # let _ = options;
/// ```
#[derive(Clone)]
pub struct InformerOptions<K> {
    pub(crate) queue: QueueKind,
    pub(crate) default_resync: Option<Duration>,
    pub(crate) reflector: ReflectorOptions,
    pub(crate) name: Option<String>,
    pub(crate) indexers: Indexers<K>,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<super::InformerMetrics>,
}

impl<K> Default for InformerOptions<K> {
    fn default() -> Self {
        Self {
            queue: QueueKind::default(),
            default_resync: None,
            reflector: ReflectorOptions::default(),
            name: None,
            indexers: Indexers::new(),
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }
}

impl<K> std::fmt::Debug for InformerOptions<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerOptions")
            .field("queue", &self.queue)
            .field("default_resync", &self.default_resync)
            .field("reflector", &self.reflector)
            .field("name", &self.name)
            .field("indexers", &self.indexers)
            .finish()
    }
}

impl<K> InformerOptions<K> {
    /// The queue between reflector and informer (default [`QueueKind::RealFifo`]).
    #[must_use]
    pub fn queue(mut self, kind: QueueKind) -> Self {
        self.queue = kind;
        self
    }

    /// How the reflector lists and watches. Metrics set with [`metrics`](Self::metrics)
    /// are kept, whichever is called first.
    #[must_use]
    pub fn reflector(mut self, options: ReflectorOptions) -> Self {
        #[cfg(feature = "metrics")]
        let metrics = options.metrics.clone().or(self.reflector.metrics.take());
        self.reflector = options;
        #[cfg(feature = "metrics")]
        {
            self.reflector.metrics = metrics;
        }
        self
    }

    /// The informer's name in logs, errors and metrics (default: the object type, e.g.
    /// `Pod`).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Index functions the cache starts with (more can be added at any time with
    /// [`add_indexers`](super::SharedIndexInformer::add_indexers)).
    #[must_use]
    pub fn indexers(mut self, indexers: Indexers<K>) -> Self {
        self.indexers = indexers;
        self
    }

    /// Records the informer's metrics (FIFO depth, processing time, the cache's
    /// resourceVersion, each handler's backlog) and its reflectors' into the bundle
    /// `metrics` (see [`crate::metrics`]).
    #[cfg(feature = "metrics")]
    #[must_use]
    pub fn metrics(mut self, metrics: &crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics.informers().clone());
        self.reflector.metrics = Some(metrics.reflectors().clone());
        self
    }
}

/// Options of one handler.
#[derive(Debug, Clone, Default)]
pub struct HandlerOptions {
    pub(crate) resync: Option<Duration>,
    pub(crate) name: Option<String>,
    pub(crate) coalesce: bool,
}

impl HandlerOptions {
    /// Replay the cache to this handler every `period` (at least 1 s: shorter periods are
    /// raised to it, with a warning). The informer checks for due resyncs as often as its
    /// most demanding handler needs, also when that handler is added after start (client-go
    /// instead raises a late handler's period to the informer's).
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }

    /// The handler's name in logs and errors.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Bound the handler's buffer to one pending notification per object: changes it has
    /// not taken yet are merged (it sees the latest state, an add for an object it has not
    /// seen yet, an update from what it last saw, a delete). Memory stays O(objects) however
    /// slow the handler; the price is that intermediate states are skipped, which suits
    /// level-triggered controllers. The default delivers every notification, unbounded, as
    /// client-go does.
    #[must_use]
    pub fn coalescing(mut self) -> Self {
        self.coalesce = true;
        self
    }
}

/// Errors of informer configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InformerError {
    /// The informer is already running; this can only be set before.
    #[error("the informer has already started: {what} must be set before run()")]
    AlreadyStarted {
        /// What was being set.
        what: &'static str,
    },
    /// Adding index functions failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A handler registration of another informer was given.
    #[error("this handler registration belongs to another informer")]
    ForeignRegistration,
}
