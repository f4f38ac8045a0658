//! The reflector: keeps a [`DeltaSink`] (the informer's FIFO) in step with the API server
//! through one LIST (or streaming list) and a chain of WATCHes, through every failure.
//!
//! # What it does, as client-go 1.36 does
//!
//! - **Sync** (`streaming.rs`, `list.rs`): a streaming list (`sendInitialEvents=true`, the
//!   state collected aside until the bookmark annotated `k8s.io/initial-events-end`, then
//!   one `replace`) by default. A server that refuses it the way a server without the
//!   feature does (400/422, 405, a 500 about `RequestWatchProgress`, a stream ending before
//!   the bookmark) gets a paged LIST for that sync, and a streaming list again after
//!   [`ReflectorOptions::streaming_retry`]. Any other failure — a 403 while RBAC propagates,
//!   a 5xx, a dropped connection — is reported as what it is and retried with backoff.
//! - **The resourceVersion ladder**: the first LIST is at `"0"` (served from the API server's
//!   cache, which ignores the page size), later relists at the last synced version, and a
//!   consistent (`""`) LIST only after a list got 410 Gone or `ResourceVersionTooLarge`, so a
//!   fleet of clients cannot stampede etcd after an API server restart
//!   (kubernetes/kubernetes#86430). Consistent lists are paged (500) and fall back to one
//!   full list when a continue token expires.
//! - **Watch** (`watch.rs`) from the synced version with bookmarks and a server timeout
//!   drawn from [5 min, 10 min]; events and bookmarks advance the version; a watch that ends
//!   normally is resumed from there without a LIST; a 410 (HTTP or ERROR event) leads to a
//!   relist at the last synced version.
//! - **Never a version that loses events**: an empty, `"0"` or non-numeric resourceVersion
//!   (from a bookmark, a LIST, an event) is reported and never adopted — resuming from it
//!   would start "from now" and silently skip deletes.
//!
//! # Where we do better than client-go
//!
//! - **Deadlines on every request**: a LIST page and the opening of a WATCH time out
//!   ([`ReflectorOptions::list_timeout`], [`ReflectorOptions::watch_open_timeout`]); an open
//!   watch silent beyond the idle limit is resumed. No request can hang the reflector.
//! - **No hot loops**: every failure backs off (800 ms doubling to 30 s, jittered, reset
//!   after 2 min without failures), and so does a watch that ends early, with or without
//!   events (within 10 s, or half the timeout it asked for): a server closing each watch after one event
//!   gets a reconnect per backoff step, not a thousand a second.
//! - **Every answer reaches the reflector**, whatever client it is given: kube's default
//!   retry layer (`Config::default_retry`, which replays 429/503/504 out of sight) cannot
//!   replay its requests, so each failure reaches the error handler with its status code
//!   ([`ReflectorError::status_code`]) and is retried on the reflector's own schedule.
//! - **Retry-After as the server sends it**: a 429's `Retry-After` header (a real API
//!   server's 429 is plain text) or `details.retryAfterSeconds`, with jitter and growth on
//!   repeated throttling; without one, the backoff.
//! - **Jitter that differs per reflector**: seeded from the operating system unless
//!   `ReflectorOptions::seed` (feature `testing`) asks for a repeatable schedule.
//! - Decoding is kept off this task: LIST pages are decoded on the decoding threads while the
//!   next page is fetched, and watch lines in parallel batches, order kept (see
//!   `ListerWatcher::list_page`); the reflector itself only moves decoded objects into the
//!   FIFO.
//!
//! Every recovered failure goes to the error handler ([`Reflector::set_error_handler`]) and
//! into [`Reflector::health`]. Stop with a cancellation token.

mod backoff;
mod error;
mod health;
mod list;
#[cfg(feature = "metrics")]
mod metrics;
mod options;
mod shards;
mod staleness;
mod streaming;
mod warm;
mod watch;

use std::{sync::Arc, time::Duration};

use kube::{
    Resource,
    api::{ListParams, WatchParams},
};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[cfg(feature = "metrics")]
pub use self::metrics::ReflectorMetrics;
use self::{
    backoff::{Backoff, Jitter, WATCH_STREAM, random_seed},
    error::Reaction,
    warm::CatchingUp,
};
pub use self::{error::ReflectorError, health::ReflectorHealth, options::ReflectorOptions};
pub(crate) use self::{
    staleness::{AppliedVersion, Heard},
    warm::{CaughtUp, WarmStart},
};
use crate::{fifo::DeltaSink, list_watch::ListerWatcher, meta_namespace_key};

type ErrorHandler = Arc<dyn Fn(ReflectorError) + Send + Sync>;
type ResyncCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// Lists and watches one collection into a [`DeltaSink`].
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::Api;
/// use kube_informer::{Store, reflector::{Reflector, ReflectorOptions}, fifo::{RealFifo}};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run(client: kube::Client) {
/// let store: Store<Pod> = Store::default();
/// let fifo = Arc::new(RealFifo::new(Arc::new(store.clone())));
/// let reflector = Reflector::new(Api::<Pod>::all(client), fifo.clone(), ReflectorOptions::default());
/// reflector.set_error_handler(|err| eprintln!("pods: {err}"));
/// let cancel = CancellationToken::new();
/// tokio::spawn({ let cancel = cancel.clone(); async move { reflector.run(cancel).await } });
/// // ... pop `fifo` into `store` (the informer's job), then:
/// cancel.cancel();
/// # }
/// ```
pub struct Reflector<K, L> {
    lw: L,
    sink: Arc<dyn DeltaSink<K>>,
    options: ReflectorOptions,
    name: String,
    shared: Arc<Shared>,
    /// A snapshot to start from, taken by `run`.
    warm: Mutex<Option<WarmStart<K>>>,
    /// The server's versions as heard, for the informer's staleness.
    heard: Arc<Heard>,
    /// The share of the objects this reflector keeps, when sharded by hash range.
    share: Option<shards::Share>,
    #[cfg(feature = "metrics")]
    sync_gauges: Option<metrics::SyncGauges>,
}

struct Shared {
    last_sync_resource_version: Mutex<String>,
    error_handler: Mutex<Option<ErrorHandler>>,
    should_resync: Mutex<Option<ResyncCheck>>,
    resync_period: tokio::sync::watch::Sender<Option<Duration>>,
    health: Mutex<ReflectorHealth>,
}

/// Where the next LIST reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListFrom {
    /// `"0"`: any version, from the API server's cache (the first list).
    Cache,
    /// The last synced version (later relists).
    LastSynced,
    /// `""`: a consistent read (after the last synced version was unavailable).
    Consistent,
}

/// The state of one `run`.
struct Run {
    resource_version: String,
    list_from: ListFrom,
    /// When the server last refused a streaming list.
    streaming_refused: Option<Instant>,
    backoff: Backoff,
    jitter: Jitter,
    /// A warm start's watch, until it has caught up with the server.
    catching_up: Option<CatchingUp>,
    /// The share the sink holds at `resource_version` (`None`: none, or not known), which
    /// a change of the share starts from.
    cached_share: Option<crate::list_watch::ShardSelector>,
}

/// Why a phase stopped.
enum Stop {
    Cancelled,
    /// Sync again (after waiting as needed).
    Resync,
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// A reflector listing and watching with `lw` into `sink`.
    pub fn new(lw: L, sink: Arc<dyn DeltaSink<K>>, options: ReflectorOptions) -> Self {
        let full = std::any::type_name::<K>();
        let short = full.rsplit("::").next().unwrap_or(full);
        let name = options.name.clone().unwrap_or_else(|| short.to_owned());
        let (resync_period, _) = tokio::sync::watch::channel(options.resync_period);
        let shared = Arc::new(Shared {
            last_sync_resource_version: Mutex::default(),
            error_handler: Mutex::default(),
            should_resync: Mutex::default(),
            resync_period,
            health: Mutex::default(),
        });
        Self {
            lw,
            sink,
            #[cfg(feature = "metrics")]
            sync_gauges: options.metrics.as_ref().map(|m| m.sync_gauges(&name)),
            share: shards::Share::new(options.selectors.share()),
            options,
            name,
            shared,
            warm: Mutex::default(),
            heard: Arc::default(),
        }
    }

    /// The server's versions as this reflector heard them (see `staleness.rs`).
    pub(crate) fn heard(&self) -> &Arc<Heard> {
        &self.heard
    }

    /// Starts the next `run` from `warm` (a snapshot) instead of a LIST, if the server
    /// can resume from it.
    pub(crate) fn start_from(&self, warm: WarmStart<K>) {
        *self.warm.lock() = Some(warm);
    }

    /// The reflector's name in logs, metrics and errors.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The resourceVersion the sink was last brought to (empty before the first sync).
    #[doc(alias = "LastSyncResourceVersion")]
    pub fn last_sync_resource_version(&self) -> String {
        self.shared.last_sync_resource_version.lock().clone()
    }

    /// Called with every failure the reflector recovers from (it also logs them). The
    /// handler runs on the reflector's task: keep it short.
    #[doc(alias = "SetWatchErrorHandler")]
    pub fn set_error_handler(&self, handler: impl Fn(&ReflectorError) + Send + Sync + 'static) {
        self.set_error_sink(move |err| handler(&err));
    }

    /// Like [`set_error_handler`](Self::set_error_handler), taking the errors by value.
    pub(crate) fn set_error_sink(&self, sink: impl Fn(ReflectorError) + Send + Sync + 'static) {
        *self.shared.error_handler.lock() = Some(Arc::new(sink));
    }

    /// Asked on each resync tick whether a resync is due (default: always, when a resync
    /// period is set).
    pub fn set_should_resync(&self, check: impl Fn() -> bool + Send + Sync + 'static) {
        *self.shared.should_resync.lock() = Some(Arc::new(check));
    }

    /// Changes how often a resync is checked for (`None`: never), also while running; the
    /// next check is one new period after the change.
    pub(crate) fn set_resync_period(&self, period: Option<Duration>) {
        self.shared.resync_period.send_replace(period);
    }

    /// The reflector's recent successes and failures, for health probes.
    pub fn health(&self) -> ReflectorHealth {
        self.shared.health.lock().clone()
    }

    /// Runs until `cancel` is cancelled.
    pub async fn run(&self, cancel: CancellationToken) {
        // The probe never ends on its own; the syncs end only when cancelled.
        tokio::select! {
            () = self.sync_and_watch(&cancel) => {}
            () = self.probe_staleness(&cancel) => {}
        }
    }

    async fn sync_and_watch(&self, cancel: &CancellationToken) {
        // The decoding threads stay up while the reflector runs (see `decode_pool`), not
        // only while a request is being decoded.
        let _decoders = crate::list_watch::decode_pool::DecodePool::shared();
        let _resync = AbortOnDrop(
            ResyncTicker::spawn(self.sink.clone(), self.shared.clone(), cancel.clone())
                .abort_handle(),
        );
        let o = &self.options;
        let seed = o.seed.unwrap_or_else(random_seed);
        let mut run = Run {
            resource_version: String::new(),
            list_from: if o.consistent_first_list {
                ListFrom::Consistent
            } else {
                ListFrom::Cache
            },
            streaming_refused: None,
            backoff: Backoff::new(o.backoff_initial, o.backoff_max, o.backoff_reset, seed),
            jitter: Jitter::new(seed, WATCH_STREAM),
            catching_up: None,
            cached_share: None,
        };
        let warm = self.warm.lock().take();
        // Whether the next round watches on from `run.resource_version` without a sync: the
        // cache is there already (a warm start, a share change taken in by `reshard`).
        let mut resume_watch = match warm {
            Some(warm) => match self.warm_start(cancel, &mut run, warm).await {
                Ok(started) => started,
                Err(_) => return,
            },
            None => false,
        };
        // Whether the share changed under the last sync or watch.
        let mut share_changed = false;
        loop {
            let (empty, mut changes) = match &self.share {
                Some(share) => {
                    let begun = share.begin();
                    if let (true, Some(now)) = (std::mem::take(&mut share_changed), &begun.now) {
                        match self.reshard(cancel, &mut run, now).await {
                            shards::Resharded::Moved => resume_watch = true,
                            shards::Resharded::Relist => {}
                            shards::Resharded::Cancelled => return,
                        }
                    }
                    (begun.now.is_none(), begun.changes)
                }
                None => (false, None),
            };
            if empty {
                // A live share with nothing in it: nothing is this reflector's.
                self.replace(Vec::new(), &run.resource_version);
                run.cached_share = None;
                {
                    let mut health = self.shared.health.lock();
                    health.synced();
                    health.watching = false;
                }
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = shards::changed(changes.as_mut()) => {
                        run.list_from = ListFrom::Consistent;
                        continue;
                    }
                }
            }
            // A live share that changes ends the sync or watch under way. The cache drops
            // what left the share and lists only what joined it, at the version it is at,
            // then watches on from there (`reshard`); failing that, the whole new share is
            // listed from etcd (a slot gained from another replica must show that
            // replica's last writes).
            let done = tokio::select! {
                done = self.sync_once(cancel, &mut run, &mut resume_watch) => Some(done),
                () = shards::changed(changes.as_mut()) => None,
            };
            match done {
                Some(true) => return,
                Some(false) => {}
                None => {
                    share_changed = true;
                    run.list_from = ListFrom::Consistent;
                    self.shared.health.lock().watching = false;
                }
            }
        }
    }

    /// One sync (none when `resume_watch` was set) and the watches after it, until a watch
    /// ends in a relist; `true` once cancelled.
    async fn sync_once(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
        resume_watch: &mut bool,
    ) -> bool {
        let o = &self.options;
        if std::mem::take(resume_watch) {
            return matches!(self.watch_loop(cancel, run, None).await, Stop::Cancelled);
        }
        let streaming = o.streaming_lists
            && run
                .streaming_refused
                .is_none_or(|at| at.elapsed() >= o.streaming_retry);
        let synced = if streaming {
            self.streaming_sync(cancel, run).await
        } else {
            self.list_sync(cancel, run).await.map(|()| None)
        };
        let first_watch = match synced {
            Ok(stream) => stream,
            Err(Stop::Cancelled) => return true,
            Err(Stop::Resync) => return false,
        };
        matches!(
            self.watch_loop(cancel, run, first_watch).await,
            Stop::Cancelled
        )
    }

    fn report(&self, err: ReflectorError) {
        tracing::warn!(reflector = %self.name, "{err}");
        #[cfg(feature = "metrics")]
        self.metric(|m, name| m.failed(name, err.cause()));
        let counts = !matches!(
            err,
            ReflectorError::InvalidObject { .. } | ReflectorError::StreamingListUnsupported { .. }
        );
        if counts {
            self.shared.health.lock().failed(err.to_string());
            self.heard.lost_track();
        }
        let handler = self.shared.error_handler.lock().clone();
        if let Some(handler) = handler {
            handler(err);
        }
    }

    /// Records into the metrics, when configured.
    #[cfg(feature = "metrics")]
    fn metric(&self, record: impl FnOnce(&ReflectorMetrics, &str)) {
        if let Some(metrics) = &self.options.metrics {
            record(metrics, &self.name);
        }
    }

    /// Whether the server's `resource_version` can be resumed from; reports it if not.
    fn usable(&self, resource_version: &str, context: &'static str) -> bool {
        let usable = !resource_version.is_empty()
            && resource_version != "0"
            && (self.options.opaque_resource_versions
                || resource_version.parse::<crate::ResourceVersion>().is_ok());
        if !usable {
            self.report(ReflectorError::InvalidResourceVersion {
                resource: self.name.clone(),
                context,
                value: resource_version.to_owned(),
            });
        }
        usable
    }

    fn set_synced(&self, run: &mut Run, resource_version: String) {
        #[cfg(feature = "metrics")]
        if let Some(gauges) = &self.sync_gauges {
            gauges.synced(&resource_version);
        }
        *self.shared.last_sync_resource_version.lock() = resource_version.clone();
        if let Some(caught_up) = run.catching_up.take_if(|c| c.reaches(&resource_version)) {
            // Moves the cache's version in order behind what is queued, whatever the queue
            // (a DeltaFifo's events do not move it), before the informer is told: it is
            // synced once the cache is there.
            self.sink.bookmark(&resource_version);
            caught_up.signal(&resource_version);
        }
        run.resource_version = resource_version;
    }

    /// The cache was brought in step with the server at `resource_version`.
    fn synced(&self, run: &mut Run, resource_version: String) {
        // A sync lists the share taken when it began, which is the share now.
        run.cached_share = self.share.as_ref().and_then(shards::Share::selector);
        self.heard.heard(&resource_version, true);
        self.set_synced(run, resource_version);
        run.list_from = ListFrom::LastSynced;
        self.shared.health.lock().synced();
        // A relist: caught up, whatever the target.
        if let Some(catching_up) = run.catching_up.take() {
            catching_up.signal(&run.resource_version);
        }
    }

    /// Waits `delay` unless cancelled first.
    async fn wait(cancel: &CancellationToken, delay: Duration) -> Result<(), Stop> {
        tokio::select! {
            () = cancel.cancelled() => Err(Stop::Cancelled),
            () = tokio::time::sleep(delay) => Ok(()),
        }
    }

    /// Waits as `reaction` says: at least the server's Retry-After (jittered by up to a
    /// fifth, growing with the backoff when throttling goes on), or the backoff.
    async fn wait_for(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
        reaction: Reaction,
    ) -> Stop {
        let backoff = run.backoff.next_delay();
        let delay = match reaction {
            Reaction::Throttled(Some(asked)) if asked >= backoff => {
                asked + run.jitter.between(Duration::ZERO, asked / 5)
            }
            _ => backoff,
        };
        match Self::wait(cancel, delay).await {
            Ok(()) => Stop::Resync,
            Err(stop) => stop,
        }
    }

    fn selectors_list(&self) -> ListParams {
        ListParams {
            label_selector: self.options.selectors.label_selector().map(str::to_owned),
            field_selector: self.options.selectors.field_selector().map(str::to_owned),
            ..ListParams::default()
        }
    }

    fn watch_params(&self, run: &mut Run, send_initial_events: bool) -> WatchParams {
        let (min, max) = self.options.watch_timeout;
        // While a warm start catches up, short watches: kube-apiserver sends a bookmark at
        // its current version two seconds before a watch's deadline, the soonest way to
        // learn that the watch has delivered everything up to it (see `warm.rs`).
        let timeout = match run.catching_up {
            // Not a streaming list (a relist while catching up): that takes its time.
            Some(_) if !send_initial_events => warm::CATCH_UP_WATCH,
            _ => run.jitter.between(min, max),
        };
        WatchParams {
            label_selector: self.options.selectors.label_selector().map(str::to_owned),
            field_selector: self.options.selectors.field_selector().map(str::to_owned),
            timeout: Some(timeout.as_secs().max(1) as u32),
            bookmarks: true,
            send_initial_events,
        }
    }

    /// Keys the objects, reporting and skipping those without a key.
    fn keyed(&self, objects: impl IntoIterator<Item = K>) -> Vec<Arc<K>> {
        objects
            .into_iter()
            .filter_map(|obj| match meta_namespace_key(&obj) {
                Ok(_) => Some(Arc::new(obj)),
                Err(source) => {
                    self.report(ReflectorError::InvalidObject {
                        resource: self.name.clone(),
                        source,
                    });
                    None
                }
            })
            .collect()
    }

    /// Hands a relist to the sink.
    fn replace(&self, objects: Vec<Arc<K>>, resource_version: &str) {
        if let Err(source) = self.sink.replace(objects, resource_version) {
            // Unreachable after `keyed`, but never lose the cache over it.
            self.report(ReflectorError::InvalidObject {
                resource: self.name.clone(),
                source,
            });
        }
    }
}

/// Aborts a task when dropped (the resync ticker ends with `run`).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Asks the sink to resync every resync period (which may change while it runs).
struct ResyncTicker;

impl ResyncTicker {
    fn spawn<K: 'static>(
        sink: Arc<dyn DeltaSink<K>>,
        shared: Arc<Shared>,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let mut period = shared.resync_period.subscribe();
        tokio::spawn(async move {
            loop {
                let current = *period.borrow_and_update();
                let tick = async {
                    match current {
                        Some(p) => tokio::time::sleep(p).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = cancel.cancelled() => return,
                    changed = period.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        continue;
                    }
                    () = tick => {}
                }
                let check = shared.should_resync.lock().clone();
                if check.is_none_or(|due| due()) {
                    sink.resync();
                }
            }
        })
    }
}
