//! Settings of an informer and of its handlers, and the errors of configuring them.

use std::time::Duration;

use super::handlers::backpressure::Backpressure;
pub use super::handlers::backpressure::{DEFAULT_BACKLOG_LIMIT, DEFAULT_GRACE};
use crate::{IndexError, Indexers, reflector::ReflectorOptions};

/// Watch events that may wait between a reflector and its informer's cache by default
/// ([`InformerOptions::queue_capacity`]): about 40 MB of typed pods, under a megabyte of
/// compact ones.
pub const DEFAULT_QUEUE_CAPACITY: usize = 1000;

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
    pub(crate) queue_capacity: Option<usize>,
    pub(crate) default_resync: Option<Duration>,
    pub(crate) reflector: ReflectorOptions,
    pub(crate) name: Option<String>,
    pub(crate) indexers: Indexers<K>,
    /// Leave `metadata.managedFields` out of objects that arrive with them (a factory's
    /// default; its sources mostly skip them while decoding already).
    pub(crate) strip_managed_fields: bool,
    /// Where the cache is kept between runs (set by the factory: see
    /// [`InformerSpec::cache_dir`](crate::factory::InformerSpec::cache_dir)).
    pub(crate) persistence: Option<crate::snapshot::Persistence<K>>,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<super::InformerMetrics>,
}

impl<K> Default for InformerOptions<K> {
    fn default() -> Self {
        Self {
            queue: QueueKind::default(),
            queue_capacity: Some(DEFAULT_QUEUE_CAPACITY),
            default_resync: None,
            reflector: ReflectorOptions::default(),
            name: None,
            indexers: Indexers::new(),
            strip_managed_fields: false,
            persistence: None,
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }
}

impl<K> std::fmt::Debug for InformerOptions<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerOptions")
            .field("queue", &self.queue)
            .field("queue_capacity", &self.queue_capacity)
            .field("default_resync", &self.default_resync)
            .field("reflector", &self.reflector)
            .field("name", &self.name)
            .field("indexers", &self.indexers)
            .field("strip_managed_fields", &self.strip_managed_fields)
            .field("persistence", &self.persistence)
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

    /// How many watch events may wait between the watch and the cache (default
    /// [`DEFAULT_QUEUE_CAPACITY`]); `None`: unbounded (client-go's FIFO).
    ///
    /// With the queue full, the reflector stops reading its watch until the informer has
    /// applied a batch: decoded objects waiting for the cache stay bounded, and the API
    /// server holds the rest (TCP pushes back). A server that stays blocked for long ends
    /// the watch; the reflector resumes it from the last version it queued, or relists on a
    /// 410, so nothing is lost. A relist is queued whole whatever the capacity (it is
    /// applied atomically). The informer itself waits only for handlers that have fallen
    /// behind, within their grace period ([`HandlerOptions::backpressure`]).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kube_informer::informer::InformerOptions;
    ///
    /// let options: InformerOptions<Pod> = InformerOptions::default().queue_capacity(Some(200));
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn queue_capacity(mut self, capacity: Option<usize>) -> Self {
        self.queue_capacity = capacity;
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
}

/// Options of one handler.
///
/// # How far a handler may fall behind
///
/// Each handler has its own buffer, so a slow handler never delays the calls of the
/// others. Its backlog is bounded by default: when it reaches [`DEFAULT_BACKLOG_LIMIT`]
/// notifications the informer waits before applying more (its queue fills, the reflector
/// stops reading and the API server holds the events), so a burst costs no more memory
/// than the handlers can take. A handler that is slower than the API server but keeps
/// making room (its backlog back under the limit within the grace period,
/// [`DEFAULT_GRACE`]) paces the informer for as long as the load lasts: that is what keeps
/// memory bounded, as a pull-based watcher is paced by its consumer. A handler that makes
/// *no* room within the grace period — stuck, or slower than one batch per grace period —
/// is set aside: it stops holding the informer back, a warning names it, and its buffer
/// grows without bound (or, with [`coalescing`](Self::coalescing), keeps one notification
/// per object) until it has caught up (under half the limit), when it is held to the limit
/// again. Every handler of an informer moves at the pace of the slowest one that keeps up;
/// a handler that must never wait for another is [`without_backpressure`](Self::without_backpressure).
///
/// | | here, by default | with [`without_backpressure`](Self::without_backpressure) | client-go |
/// |---|---|---|---|
/// | a burst faster than the handler | the informer waits; memory bounded | buffered | buffered (unbounded) |
/// | a handler slower than the server, but working | paces the informer; memory bounded | buffered | buffered (unbounded) |
/// | a handler that makes no room for its grace period | set aside, buffered; the others go on | buffered | buffered |
/// | a handler's calls | in order, never dropped | the same | the same |
///
/// While the informer waits, the API server may end the watch it is not reading (a real
/// kube-apiserver does within about a second of its buffers filling); the reflector
/// resumes from its last version (or relists on a 410) and nothing is lost.
#[derive(Debug, Clone)]
pub struct HandlerOptions {
    pub(crate) resync: Option<Duration>,
    pub(crate) name: Option<String>,
    pub(crate) coalesce: bool,
    pub(crate) backpressure: Option<Backpressure>,
}

impl Default for HandlerOptions {
    fn default() -> Self {
        Self {
            resync: None,
            name: None,
            coalesce: false,
            backpressure: Some(Backpressure::default()),
        }
    }
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
    /// slow the handler, also once it is set aside; the price is that intermediate states
    /// are skipped, which suits level-triggered controllers. The default delivers every
    /// notification, as client-go does.
    #[must_use]
    pub fn coalescing(mut self) -> Self {
        self.coalesce = true;
        self
    }

    /// Hold the informer back once `limit` notifications wait for this handler, for at
    /// most `grace` at a time before the handler is set aside (see the
    /// [type docs](Self); defaults [`DEFAULT_BACKLOG_LIMIT`] and [`DEFAULT_GRACE`]). A
    /// `grace` of [`Duration::MAX`] never sets it aside: every handler then moves at the
    /// pace of this one, as a pull-based watcher does.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kube_informer::informer::HandlerOptions;
    ///
    /// let options = HandlerOptions::default().backpressure(256, Duration::from_secs(30));
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn backpressure(mut self, limit: usize, grace: Duration) -> Self {
        self.backpressure = Some(Backpressure {
            limit: limit.max(1),
            grace,
        });
        self
    }

    /// Never hold the informer back for this handler: its buffer grows without bound when
    /// it is slow (client-go's semantics).
    #[must_use]
    pub fn without_backpressure(mut self) -> Self {
        self.backpressure = None;
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
