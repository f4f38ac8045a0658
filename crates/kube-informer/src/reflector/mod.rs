//! The reflector: keeps a [`DeltaSink`] (the informer's FIFO) in step with the API server
//! through one LIST (or streaming list) and a chain of WATCHes, through every failure.
//!
//! # What it does, as client-go 1.36 does
//!
//! - **Sync**: a streaming list (`sendInitialEvents=true`, the state collected aside until
//!   the bookmark annotated `k8s.io/initial-events-end`, then one `replace`) by default; a
//!   server without them is detected and paged LISTs are used from then on.
//! - **The resourceVersion ladder**: the first LIST is at `"0"` (served from the API server's
//!   cache, which ignores the page size), later relists at the last synced version, and a
//!   consistent (`""`) LIST only after a list got 410 Gone or `ResourceVersionTooLarge`, so a
//!   fleet of clients cannot stampede etcd after an API server restart
//!   (kubernetes/kubernetes#86430). Consistent lists are paged (500) and fall back to one
//!   full list when a continue token expires.
//! - **Watch** from the synced version with bookmarks and a server timeout drawn from
//!   [5 min, 10 min]; events and bookmarks advance the version; a watch that ends normally
//!   is resumed from there without a LIST; a 410 (HTTP or ERROR event) leads to a relist at
//!   the last synced version.
//! - **Failures**: 429 waits for the server's Retry-After; anything else backs off
//!   exponentially with jitter (800 ms to 30 s, reset after 2 min without failures), never a
//!   hot loop. A watch silent for longer than the idle limit is taken for a dead connection
//!   and resumed. A watch closing within a second without events is reported as suspicious.
//!   A line that does not decode ends that watch; it is resumed from the last version. The
//!   sink (the cache) is only ever written with whole, decoded objects.
//! - **Decoding off this task**: LIST pages are decoded on the blocking pool while the next
//!   page is fetched, and watch lines in parallel batches, order kept (see
//!   `ListerWatcher::list_page`); the reflector itself only moves decoded objects into the
//!   FIFO.
//! - **Stop** with a cancellation token.

mod backoff;
mod error;
#[cfg(feature = "metrics")]
mod metrics;
mod options;

use std::{
    collections::{HashMap, VecDeque},
    sync::Arc,
    time::Duration,
};

use futures_util::StreamExt;
use kube::{
    Resource,
    api::{ListParams, WatchEvent, WatchParams},
};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[cfg(feature = "metrics")]
pub use self::metrics::ReflectorMetrics;
use self::{
    backoff::{Backoff, Jitter},
    error::{Reaction, react, react_to_status},
};
pub use self::{error::ReflectorError, options::ReflectorOptions};
use crate::{
    ObjectKey,
    fifo::DeltaSink,
    list_watch::{ListerWatcher, WatchStream},
    meta_namespace_key,
};

/// The annotation on the bookmark that ends a streaming list's initial state.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

type ErrorHandler = Arc<dyn Fn(&ReflectorError) + Send + Sync>;
type ResyncCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// Lists and watches one collection into a [`DeltaSink`].
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::Api;
/// use kube_informer::{RealFifo, Store, reflector::{Reflector, ReflectorOptions}};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run(client: kube::Client) {
/// let store: Store<Pod> = Store::default();
/// let fifo = Arc::new(RealFifo::new(Arc::new(store.clone())));
/// let reflector = Reflector::new(Api::<Pod>::all(client), fifo.clone(), ReflectorOptions::default());
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
}

#[derive(Default)]
struct Shared {
    last_sync_resource_version: Mutex<String>,
    error_handler: Mutex<Option<ErrorHandler>>,
    should_resync: Mutex<Option<ResyncCheck>>,
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
    streaming: bool,
    backoff: Backoff,
    jitter: Jitter,
}

/// A LIST page's items, decoded or being decoded.
enum Decoding<K> {
    Ready(Result<Vec<K>, kube::Error>),
    Blocking(tokio::task::JoinHandle<Result<Vec<K>, kube::Error>>),
}

impl<K> Decoding<K> {
    async fn finish(self) -> Result<Vec<K>, kube::Error> {
        match self {
            Self::Ready(items) => items,
            Self::Blocking(task) => task.await.map_err(|e| {
                kube::Error::Service(format!("decoding a LIST page failed: {e}").into())
            })?,
        }
    }
}

/// Why a phase stopped.
enum Stop {
    Cancelled,
    /// Sync again (after waiting as needed).
    Resync,
}

/// What waiting on a watch stream gave.
enum Next<K> {
    Cancelled,
    /// Nothing for longer than the idle limit (already reported).
    Idle,
    /// The stream ended.
    Ended,
    /// The stream broke (already reported).
    Broke,
    Event(WatchEvent<K>),
}

/// How one watch ended.
enum WatchEnd {
    Cancelled,
    Closed { events: usize },
    Gone,
    TooLarge,
    Failed,
    Idle,
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
        Self {
            lw,
            sink,
            options,
            name,
            shared: Arc::default(),
        }
    }

    /// The resourceVersion the sink was last brought to (empty before the first sync).
    #[doc(alias = "LastSyncResourceVersion")]
    pub fn last_sync_resource_version(&self) -> String {
        self.shared.last_sync_resource_version.lock().clone()
    }

    /// Called with every failure the reflector recovers from (it also logs them).
    #[doc(alias = "SetWatchErrorHandler")]
    pub fn set_error_handler(&self, handler: impl Fn(&ReflectorError) + Send + Sync + 'static) {
        *self.shared.error_handler.lock() = Some(Arc::new(handler));
    }

    /// Asked on each resync tick whether a resync is due (default: always, when a resync
    /// period is set).
    pub fn set_should_resync(&self, check: impl Fn() -> bool + Send + Sync + 'static) {
        *self.shared.should_resync.lock() = Some(Arc::new(check));
    }

    /// Runs until `cancel` is cancelled.
    pub async fn run(&self, cancel: CancellationToken) {
        let _resync = self
            .options
            .resync_period
            .map(|period| {
                let ticker = ResyncTicker::spawn(
                    self.sink.clone(),
                    self.shared.clone(),
                    period,
                    cancel.clone(),
                );
                ticker.abort_handle()
            })
            .map(AbortOnDrop);
        let o = &self.options;
        let mut run = Run {
            resource_version: String::new(),
            list_from: if self.options.consistent_first_list {
                ListFrom::Consistent
            } else {
                ListFrom::Cache
            },
            streaming: o.streaming_lists,
            backoff: Backoff::new(o.backoff_initial, o.backoff_max, o.backoff_reset, o.seed),
            jitter: Jitter::new(o.seed.wrapping_add(1)),
        };
        loop {
            let synced = if run.streaming {
                self.streaming_sync(&cancel, &mut run).await
            } else {
                self.list_sync(&cancel, &mut run).await.map(|()| None)
            };
            let first_watch = match synced {
                Ok(stream) => stream,
                Err(Stop::Cancelled) => return,
                Err(Stop::Resync) => continue,
            };
            match self.watch_loop(&cancel, &mut run, first_watch).await {
                Stop::Cancelled => return,
                Stop::Resync => {}
            }
        }
    }

    fn report(&self, err: ReflectorError) {
        tracing::warn!(reflector = %self.name, "{err}");
        let handler = self.shared.error_handler.lock().clone();
        if let Some(handler) = handler {
            handler(&err);
        }
    }

    /// Records into the metrics, when configured.
    #[cfg(feature = "metrics")]
    fn metric(&self, record: impl FnOnce(&ReflectorMetrics, &str)) {
        if let Some(metrics) = &self.options.metrics {
            record(metrics, &self.name);
        }
    }

    fn set_synced(&self, run: &mut Run, resource_version: String) {
        #[cfg(feature = "metrics")]
        self.metric(|m, name| m.synced(name, &resource_version));
        *self.shared.last_sync_resource_version.lock() = resource_version.clone();
        run.resource_version = resource_version;
    }

    /// Waits `delay` unless cancelled first.
    async fn wait(cancel: &CancellationToken, delay: Duration) -> Result<(), Stop> {
        tokio::select! {
            () = cancel.cancelled() => Err(Stop::Cancelled),
            () = tokio::time::sleep(delay) => Ok(()),
        }
    }

    /// Waits as `reaction` says (Retry-After, or backoff).
    async fn wait_for(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
        reaction: Reaction,
    ) -> Stop {
        let delay = match reaction {
            Reaction::Throttled(delay) => delay,
            _ => run.backoff.next_delay(),
        };
        match Self::wait(cancel, delay).await {
            Ok(()) => Stop::Resync,
            Err(stop) => stop,
        }
    }

    fn selectors_list(&self) -> ListParams {
        ListParams {
            label_selector: self.options.label_selector.clone(),
            field_selector: self.options.field_selector.clone(),
            ..ListParams::default()
        }
    }

    fn watch_params(&self, run: &mut Run, send_initial_events: bool) -> WatchParams {
        let (min, max) = self.options.watch_timeout;
        WatchParams {
            label_selector: self.options.label_selector.clone(),
            field_selector: self.options.field_selector.clone(),
            timeout: Some(run.jitter.between(min, max).as_secs().max(1) as u32),
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

    /// Paged LIST + replace, at the version the ladder says.
    async fn list_sync(&self, cancel: &CancellationToken, run: &mut Run) -> Result<(), Stop> {
        let resource_version = match run.list_from {
            ListFrom::Cache => "0".to_owned(),
            ListFrom::LastSynced if !run.resource_version.is_empty() => {
                run.resource_version.clone()
            }
            ListFrom::LastSynced => "0".to_owned(),
            ListFrom::Consistent => String::new(),
        };
        #[cfg(feature = "metrics")]
        self.metric(|m, name| m.list_started(name));
        let started = Instant::now();
        let listed = tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Cancelled),
            listed = self.list_all(&resource_version) => listed,
        };
        match listed {
            Ok((objects, list_rv)) => {
                let _ = started;
                #[cfg(feature = "metrics")]
                self.metric(|m, name| {
                    m.list_done(name, started.elapsed().as_secs_f64(), objects.len())
                });
                if let Err(source) = self.sink.replace(objects) {
                    // Unreachable after `keyed`, but never lose the cache over it.
                    self.report(ReflectorError::InvalidObject {
                        resource: self.name.clone(),
                        source,
                    });
                }
                self.set_synced(run, list_rv);
                run.list_from = ListFrom::LastSynced;
                Ok(())
            }
            Err(source) => {
                let reaction = react(&source);
                if matches!(reaction, Reaction::Gone | Reaction::TooLarge) {
                    run.list_from = ListFrom::Consistent;
                }
                self.report(ReflectorError::List {
                    resource: self.name.clone(),
                    source,
                });
                Err(self.wait_for(cancel, run, reaction).await)
            }
        }
    }

    /// Every page of a LIST at `resource_version` (keyed), and the list's version.
    ///
    /// Pages are fetched one after the other (each needs the previous one's continue
    /// token) but decoded on the blocking pool, up to one page per core at a time, so
    /// fetching and decoding overlap and pages decode in parallel.
    async fn list_all(&self, resource_version: &str) -> Result<(Vec<Arc<K>>, String), kube::Error> {
        // Only a consistent ("") list is paged. A list at "0" or at a version is served
        // whole from the API server's cache (which ignores a limit), and kube drops
        // `resourceVersion=0` when a limit is set, which would turn the cheap cache read
        // into a consistent etcd read.
        let paged = resource_version.is_empty();
        let first = ListParams {
            limit: paged.then_some(self.options.page_size),
            resource_version: (!resource_version.is_empty()).then(|| resource_version.to_owned()),
            ..self.selectors_list()
        };
        let parallel = crate::list_watch::decoders();
        let mut params = first.clone();
        let mut objects = Vec::new();
        let mut decoding = VecDeque::new();
        let mut list_rv = None;
        loop {
            match self.lw.list_page(&params).await {
                Ok(page) => {
                    list_rv
                        .get_or_insert(page.metadata.resource_version.clone().unwrap_or_default());
                    let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
                    decoding.push_back(if page.is_decoded() {
                        Decoding::Ready(page.into_items())
                    } else {
                        Decoding::Blocking(tokio::task::spawn_blocking(move || page.into_items()))
                    });
                    while decoding.len() >= parallel || (next.is_none() && !decoding.is_empty()) {
                        let items = decoding.pop_front().expect("not empty").finish().await?;
                        objects.extend(self.keyed(items));
                    }
                    match next {
                        Some(token) => {
                            params.continue_token = Some(token);
                            params.resource_version = None;
                        }
                        None => return Ok((objects, list_rv.unwrap_or_default())),
                    }
                }
                Err(err) if params.continue_token.is_some() && react(&err) == Reaction::Gone => {
                    // The continue token expired: one full, unpaged list instead.
                    params = ListParams {
                        limit: None,
                        ..first.clone()
                    };
                    objects.clear();
                    decoding.clear();
                    list_rv = None;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// A streaming list: the initial state collected aside, replaced at once at the end
    /// bookmark; returns the still-open watch to continue with.
    async fn streaming_sync(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
    ) -> Result<Option<WatchStream<K>>, Stop> {
        let from = match run.list_from {
            ListFrom::LastSynced => run.resource_version.clone(),
            _ => String::new(),
        };
        let params = self.watch_params(run, true);
        #[cfg(feature = "metrics")]
        self.metric(|m, name| m.watch_started(name));
        let opened = tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Cancelled),
            opened = self.lw.watch(&params, &from) => opened,
        };
        let mut stream = match opened {
            Ok(stream) => stream,
            Err(source) => {
                let reaction = react(&source);
                let client_error = matches!(&source, kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 429 && s.code != 410);
                if client_error {
                    return Err(self.fall_back_to_list(run, source.to_string()));
                }
                if reaction == Reaction::Gone {
                    run.list_from = ListFrom::Consistent;
                }
                self.report(ReflectorError::Watch {
                    resource: self.name.clone(),
                    source,
                });
                return Err(self.wait_for(cancel, run, reaction).await);
            }
        };
        let mut initial: HashMap<ObjectKey, Arc<K>> = HashMap::new();
        loop {
            let event = match self.next_event(cancel, &mut stream).await {
                Next::Cancelled => return Err(Stop::Cancelled),
                Next::Idle => return Err(Stop::Resync),
                Next::Ended => {
                    return Err(self.fall_back_to_list(
                        run,
                        "the stream ended before the initial-events-end bookmark".into(),
                    ));
                }
                Next::Broke => return Err(self.wait_for(cancel, run, Reaction::Retry).await),
                Next::Event(event) => event,
            };
            let skipped = match event {
                WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                    match meta_namespace_key(&obj) {
                        Ok(key) => {
                            initial.insert(key, Arc::new(obj));
                            None
                        }
                        Err(source) => Some(source),
                    }
                }
                WatchEvent::Deleted(obj) => {
                    if let Ok(key) = meta_namespace_key(&obj) {
                        initial.remove(&key);
                    }
                    None
                }
                WatchEvent::Bookmark(bookmark) => {
                    let ended = bookmark
                        .metadata
                        .annotations
                        .get(INITIAL_EVENTS_END)
                        .is_some_and(|v| v == "true");
                    if ended {
                        if let Err(source) = self.sink.replace(initial.into_values().collect()) {
                            self.report(ReflectorError::InvalidObject {
                                resource: self.name.clone(),
                                source,
                            });
                        }
                        self.set_synced(run, bookmark.metadata.resource_version);
                        run.list_from = ListFrom::LastSynced;
                        return Ok(Some(stream));
                    }
                    None
                }
                WatchEvent::Error(status) => {
                    if status.code == 410 {
                        run.list_from = ListFrom::Consistent;
                        self.report(self.status_error(&status));
                        return Err(self.wait_for(cancel, run, Reaction::Gone).await);
                    }
                    return Err(self.fall_back_to_list(
                        run,
                        format!("{} {}: {}", status.code, status.reason, status.message),
                    ));
                }
            };
            if let Some(source) = skipped {
                self.report(ReflectorError::InvalidObject {
                    resource: self.name.clone(),
                    source,
                });
            }
        }
    }

    fn fall_back_to_list(&self, run: &mut Run, reason: String) -> Stop {
        run.streaming = false;
        self.report(ReflectorError::StreamingListUnsupported {
            resource: self.name.clone(),
            reason,
        });
        Stop::Resync
    }

    fn status_error(&self, status: &kube::core::Status) -> ReflectorError {
        ReflectorError::WatchStatus {
            resource: self.name.clone(),
            code: status.code,
            reason: status.reason.clone(),
            message: status.message.clone(),
        }
    }

    /// The next event of `stream`, unless cancelled, idle for too long, ended or broken
    /// (the last two reported).
    async fn next_event(&self, cancel: &CancellationToken, stream: &mut WatchStream<K>) -> Next<K> {
        let next = tokio::select! {
            () = cancel.cancelled() => return Next::Cancelled,
            next = tokio::time::timeout(self.options.idle_timeout, stream.next()) => next,
        };
        match next {
            Err(_) => {
                let idle = self.options.idle_timeout;
                self.report(ReflectorError::Idle {
                    resource: self.name.clone(),
                    idle,
                });
                Next::Idle
            }
            Ok(None) => Next::Ended,
            Ok(Some(Err(source))) => {
                self.report(ReflectorError::Watch {
                    resource: self.name.clone(),
                    source,
                });
                Next::Broke
            }
            Ok(Some(Ok(event))) => Next::Event(event),
        }
    }

    /// Watches from the synced version until a relist is needed.
    async fn watch_loop(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
        mut next: Option<WatchStream<K>>,
    ) -> Stop {
        loop {
            let started = Instant::now();
            let stream = match next.take() {
                Some(stream) => stream,
                None => {
                    let params = self.watch_params(run, false);
                    #[cfg(feature = "metrics")]
                    self.metric(|m, name| m.watch_started(name));
                    let opened = tokio::select! {
                        () = cancel.cancelled() => return Stop::Cancelled,
                        opened = self.lw.watch(&params, &run.resource_version) => opened,
                    };
                    match opened {
                        Ok(stream) => stream,
                        Err(source) => {
                            let reaction = react(&source);
                            self.report(ReflectorError::Watch {
                                resource: self.name.clone(),
                                source,
                            });
                            match reaction {
                                Reaction::Gone => return Stop::Resync,
                                Reaction::TooLarge => {
                                    run.list_from = ListFrom::Consistent;
                                    return Stop::Resync;
                                }
                                other => match self.wait_for(cancel, run, other).await {
                                    Stop::Cancelled => return Stop::Cancelled,
                                    Stop::Resync => continue,
                                },
                            }
                        }
                    }
                }
            };
            let end = self.consume(cancel, stream, run).await;
            #[cfg(feature = "metrics")]
            self.metric(|m, name| {
                let reason = match &end {
                    WatchEnd::Cancelled => return,
                    WatchEnd::Closed { .. } => "closed",
                    WatchEnd::Gone => "gone",
                    WatchEnd::TooLarge => "too_large",
                    WatchEnd::Failed => "error",
                    WatchEnd::Idle => "idle",
                };
                m.watch_ended(name, reason);
            });
            match end {
                WatchEnd::Cancelled => return Stop::Cancelled,
                WatchEnd::Gone => return Stop::Resync, // relist at the last synced version
                WatchEnd::TooLarge => {
                    run.list_from = ListFrom::Consistent;
                    return Stop::Resync;
                }
                WatchEnd::Idle => {}
                WatchEnd::Closed { events } => {
                    let elapsed = started.elapsed();
                    if events == 0 && elapsed < Duration::from_secs(1) {
                        self.report(ReflectorError::VeryShortWatch {
                            resource: self.name.clone(),
                            elapsed,
                        });
                        if let Stop::Cancelled = self.wait_for(cancel, run, Reaction::Retry).await {
                            return Stop::Cancelled;
                        }
                    }
                }
                WatchEnd::Failed => {
                    if let Stop::Cancelled = self.wait_for(cancel, run, Reaction::Retry).await {
                        return Stop::Cancelled;
                    }
                }
            }
        }
    }

    /// Feeds one watch into the sink until it ends.
    async fn consume(
        &self,
        cancel: &CancellationToken,
        mut stream: WatchStream<K>,
        run: &mut Run,
    ) -> WatchEnd {
        let mut events = 0;
        loop {
            let event = match self.next_event(cancel, &mut stream).await {
                Next::Cancelled => return WatchEnd::Cancelled,
                Next::Idle => return WatchEnd::Idle,
                Next::Ended => return WatchEnd::Closed { events },
                Next::Broke => return WatchEnd::Failed,
                Next::Event(event) => event,
            };
            let (object, apply): (Option<&K>, _) = match &event {
                WatchEvent::Added(obj) => (Some(obj), 0),
                WatchEvent::Modified(obj) => (Some(obj), 1),
                WatchEvent::Deleted(obj) => (Some(obj), 2),
                WatchEvent::Bookmark(bookmark) => {
                    self.set_synced(run, bookmark.metadata.resource_version.clone());
                    continue;
                }
                WatchEvent::Error(status) => {
                    self.report(self.status_error(status));
                    let too_large = status.message.contains("Too large resource version");
                    let retry_after = status.details.as_ref().map_or(0, |d| d.retry_after_seconds);
                    return match react_to_status(
                        status.code,
                        &status.reason,
                        too_large,
                        retry_after,
                    ) {
                        Reaction::Gone => WatchEnd::Gone,
                        Reaction::TooLarge => WatchEnd::TooLarge,
                        _ => WatchEnd::Failed,
                    };
                }
            };
            let resource_version = object.and_then(|o| o.meta().resource_version.clone());
            let obj = match event {
                WatchEvent::Added(obj) | WatchEvent::Modified(obj) | WatchEvent::Deleted(obj) => {
                    Arc::new(obj)
                }
                _ => unreachable!("handled above"),
            };
            let applied = match apply {
                0 => self.sink.add(obj),
                1 => self.sink.update(obj),
                _ => self.sink.delete(obj),
            };
            if let Err(source) = applied {
                self.report(ReflectorError::InvalidObject {
                    resource: self.name.clone(),
                    source,
                });
            }
            events += 1;
            if let Some(rv) = resource_version {
                self.set_synced(run, rv);
            }
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

struct ResyncTicker;

impl ResyncTicker {
    fn spawn<K: 'static>(
        sink: Arc<dyn DeltaSink<K>>,
        shared: Arc<Shared>,
        period: Duration,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            ticker.tick().await;
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                let check = shared.should_resync.lock().clone();
                if check.is_none_or(|due| due()) {
                    sink.resync();
                }
            }
        })
    }
}
