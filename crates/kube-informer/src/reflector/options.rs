//! How a reflector lists, watches and retries.

use std::time::Duration;

/// The shortest period [`ReflectorOptions::staleness_probe`] uses: a shorter one asked
/// for is raised to it (no probe loop in a tight circle).
pub(crate) const MIN_STALENESS_PROBE: Duration = Duration::from_secs(1);

/// Settings of a [`Reflector`](super::Reflector). The defaults are client-go 1.36's.
///
/// ```
/// use std::time::Duration;
/// use kube_informer::{list_watch::Selectors, reflector::ReflectorOptions};
///
/// // A reflector for a slow, large collection behind a flaky network.
/// let options = ReflectorOptions::default()
///     .page_size(250)
///     .list_timeout(Duration::from_secs(300))
///     .watch_open_timeout(Duration::from_secs(15))
///     .selectors(Selectors::default().labels("app=web"));
/// # let _ = options;
/// ```
#[derive(Debug, Clone)]
pub struct ReflectorOptions {
    pub(crate) page_size: u32,
    pub(crate) streaming_lists: bool,
    pub(crate) consistent_first_list: bool,
    pub(crate) watch_timeout: (Duration, Duration),
    pub(crate) idle_timeout: Duration,
    pub(crate) list_timeout: Duration,
    pub(crate) watch_open_timeout: Duration,
    /// A watch that ends sooner than this (or than half of the timeout it asked the server
    /// for, if that is shorter), with or without events, counts as a failure: the next one
    /// waits for the backoff. Watches that last reset the backoff after its quiet period,
    /// so a healthy reflector resumes at once.
    pub(crate) short_watch: Duration,
    pub(crate) streaming_retry: Duration,
    pub(crate) opaque_resource_versions: bool,
    pub(crate) backoff_initial: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) backoff_reset: Duration,
    pub(crate) resync_period: Option<Duration>,
    pub(crate) selectors: crate::list_watch::Selectors,
    pub(crate) seed: Option<u64>,
    pub(crate) name: Option<String>,
    pub(crate) staleness_probe: Option<Duration>,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<super::ReflectorMetrics>,
}

impl Default for ReflectorOptions {
    fn default() -> Self {
        Self {
            page_size: 500,
            streaming_lists: true,
            consistent_first_list: false,
            watch_timeout: (Duration::from_secs(300), Duration::from_secs(600)),
            idle_timeout: Duration::from_secs(180),
            list_timeout: Duration::from_secs(120),
            watch_open_timeout: Duration::from_secs(30),
            short_watch: Duration::from_secs(10),
            streaming_retry: Duration::from_secs(600),
            opaque_resource_versions: false,
            backoff_initial: Duration::from_millis(800),
            backoff_max: Duration::from_secs(30),
            backoff_reset: Duration::from_secs(120),
            resync_period: None,
            selectors: Default::default(),
            seed: None,
            name: None,
            staleness_probe: None,
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }
}

impl ReflectorOptions {
    /// Items per LIST page (default 500). Pages are used for consistent (`""`) lists; a
    /// list at `"0"` is served whole from the API server's cache anyway.
    #[must_use]
    pub fn page_size(mut self, items: u32) -> Self {
        self.page_size = items.max(1);
        self
    }

    /// Whether to sync with a streaming list (`sendInitialEvents`) before falling back to
    /// LIST (default: on, as in client-go ≥ 1.35). When a server refuses one the way a
    /// server without the feature does, that sync uses a LIST and streaming is tried again
    /// after [`streaming_retry`](Self::streaming_retry); any other failure (a 403 while RBAC
    /// propagates, a 5xx, a broken connection) is reported as what it is and retried.
    #[must_use]
    pub fn streaming_lists(mut self, enabled: bool) -> Self {
        self.streaming_lists = enabled;
        self
    }

    /// Whether the first LIST is a consistent read (`""`, paged by [`page_size`]) instead of
    /// the default read at `"0"` from the API server's cache (default: off, as client-go).
    ///
    /// A cache read is cheaper for the API server and etcd, but the cache ignores the page
    /// size: the whole collection comes in one response, which the client holds in memory
    /// while decoding it. Paging keeps this client's peak memory down on large collections
    /// at the price of a read from etcd; kube-rs's watcher lists this way by default.
    ///
    /// [`page_size`]: Self::page_size
    #[must_use]
    pub fn consistent_first_list(mut self, enabled: bool) -> Self {
        self.consistent_first_list = enabled;
        self
    }

    /// The range each watch's server-side timeout is drawn from (default 5 to 10 minutes),
    /// so that many reflectors do not reconnect at once.
    #[must_use]
    pub fn watch_timeout(mut self, min: Duration, max: Duration) -> Self {
        self.watch_timeout = (min, max.max(min));
        self
    }

    /// How long a watch may stay completely silent (no event, no bookmark) before it is
    /// taken for a dead connection and resumed (default 3 minutes). Keep it above the
    /// server's bookmark interval.
    #[must_use]
    pub fn idle_timeout(mut self, limit: Duration) -> Self {
        self.idle_timeout = limit;
        self
    }

    /// How long a LIST page may take, from the request to the last byte of its body
    /// (default 2 minutes; the API server itself gives up on a LIST after one). A request
    /// that is accepted and never answered is reported as a timeout and retried with
    /// backoff instead of hanging the reflector.
    #[must_use]
    pub fn list_timeout(mut self, limit: Duration) -> Self {
        self.list_timeout = limit;
        self
    }

    /// How long opening a WATCH may take, until the response headers (default 30 s). The
    /// open stream is then covered by [`idle_timeout`](Self::idle_timeout).
    #[must_use]
    pub fn watch_open_timeout(mut self, limit: Duration) -> Self {
        self.watch_open_timeout = limit;
        self
    }

    /// After a server refused a streaming list, how long to use LISTs before trying a
    /// streaming list again (default 10 minutes). client-go tries again at every relist.
    #[must_use]
    pub fn streaming_retry(mut self, after: Duration) -> Self {
        self.streaming_retry = after;
        self
    }

    /// Accept resourceVersions that are not numbers (default: off). The Kubernetes API
    /// server's are etcd revisions, comparable by [KEP-5504](crate::resource_version)'s
    /// rules (digits, no leading zero, up to 128 bits); a reflector refuses to resume from
    /// an empty, `"0"` or otherwise not comparable version, since that would silently start
    /// a watch "from now" and lose what happened in between. Turn this on for an aggregated API server with opaque
    /// versions (empty and `"0"` are still refused).
    #[must_use]
    pub fn opaque_resource_versions(mut self, accept: bool) -> Self {
        self.opaque_resource_versions = accept;
        self
    }

    /// Exponential backoff with jitter between failures: from `initial` doubling to `max`,
    /// forgotten after `reset` without failures (default 800 ms, 30 s, 2 min).
    #[must_use]
    pub fn backoff(mut self, initial: Duration, max: Duration, reset: Duration) -> Self {
        self.backoff_initial = initial;
        self.backoff_max = max.max(initial);
        self.backoff_reset = reset;
        self
    }

    /// How often to check whether a resync is due (none by default). An informer sets it
    /// from its handlers' resync periods (see [`HandlerOptions::resync`]); set it here
    /// only for a reflector used on its own.
    ///
    /// [`HandlerOptions::resync`]: crate::HandlerOptions::resync
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// Which objects are listed and watched: the label and field selectors are sent with
    /// every LIST and WATCH. The namespace is the source's (a `kube::Api` of one
    /// namespace); namespaces named here are not used (the factory makes one reflector
    /// per namespace).
    #[must_use]
    pub fn selectors(mut self, selectors: crate::list_watch::Selectors) -> Self {
        self.selectors = selectors;
        self
    }

    /// The reflector's name in logs and metrics (default: the object type, e.g. `Pod`).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Seeds the jitter of watch timeouts and backoff, for repeatable schedules in tests.
    /// By default each reflector draws its own seed from the operating system, so that a
    /// fleet restarted together does not reconnect together.
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Reads the server's version every `every` while a watch is open (one `limit=1`
    /// consistent read of the collection, as cheap as a LIST gets), so the informer's
    /// [staleness](crate::informer::SharedIndexInformer::staleness) also sees a watch that
    /// is behind or stuck, not only events waiting to be applied. Off by default: no
    /// request beyond the LIST and WATCH. A minute is a good period; the staleness then
    /// reads up to about a minute high for a quiet collection, until the server's next
    /// bookmark confirms the watch is there (see [`crate::informer::Staleness`]). Periods
    /// under a second are raised to a second.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kube_informer::reflector::ReflectorOptions;
    ///
    /// let options = ReflectorOptions::default().staleness_probe(Duration::from_secs(60));
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn staleness_probe(mut self, every: Duration) -> Self {
        self.staleness_probe = Some(every);
        self
    }
}
