//! How a server is started.

use std::time::Duration;

use crate::registry::ResourceType;

/// Settings for [`FakeApiServer::start`](crate::FakeApiServer::start). Every setter consumes
/// and returns the config.
///
/// ```
/// use std::time::Duration;
/// use fake_apiserver::{Gvr, ResourceType, ServerConfig};
///
/// let config = ServerConfig::default()
///     .seed(42)                                   // reproducible uids and fault draws
///     .history_window(100)                        // compaction: older versions get 410
///     .bookmark_interval(Duration::from_secs(1))
///     .streaming_lists(false)                     // answer like a server without them
///     .resource(ResourceType::namespaced(Gvr::new("example.com", "v1", "widgets"), "Widget"));
/// # let _ = config;
/// ```
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub(crate) port: u16,
    pub(crate) seed: u64,
    pub(crate) history_window: u64,
    pub(crate) bookmark_interval: Duration,
    pub(crate) watch_timeout: Duration,
    pub(crate) watch_buffer: usize,
    pub(crate) streaming_lists: bool,
    pub(crate) shard_selectors: bool,
    pub(crate) resources: Vec<ResourceType>,
    pub(crate) namespaces: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            port: 0,
            seed: 0,
            history_window: 10_000,
            bookmark_interval: Duration::from_secs(60),
            watch_timeout: Duration::from_secs(1800),
            watch_buffer: 1000,
            streaming_lists: true,
            shard_selectors: true,
            resources: Vec::new(),
            // What a new real cluster has (kube-apiserver makes them at start).
            namespaces: ["default", "kube-node-lease", "kube-public", "kube-system"]
                .map(str::to_owned)
                .to_vec(),
        }
    }
}

impl ServerConfig {
    /// Namespaces that exist from the start, besides a new cluster's four (`default`,
    /// `kube-node-lease`, `kube-public`, `kube-system`, which always do): a namespaced
    /// create into a missing namespace is refused with 404, as on a real server.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
    /// use serde_json::json;
    ///
    /// let server = FakeApiServer::start(ServerConfig::default().namespaces(["shop", "demo"])).await.unwrap();
    /// server.create(&Gvr::core("configmaps"), Some("shop"), json!({"metadata": {"name": "cfg"}})).unwrap();
    /// # }
    /// ```
    pub fn namespaces<S: Into<String>>(mut self, namespaces: impl IntoIterator<Item = S>) -> Self {
        self.namespaces
            .extend(namespaces.into_iter().map(Into::into));
        self.namespaces.sort();
        self.namespaces.dedup();
        self
    }

    /// The port on 127.0.0.1 (default 0: an ephemeral port).
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The seed of everything random: uids, generated names, random faults (default 0).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How many revisions of history are kept for watches and exact-version lists before
    /// older ones are compacted away (default 10 000). A watch or list from before the window
    /// gets the real server's 410 answers.
    #[must_use]
    pub fn history_window(mut self, revisions: u64) -> Self {
        self.history_window = revisions;
        self
    }

    /// Whether LISTs and WATCHes honour `shardSelector` (KEP-5866, on by default, as
    /// kube-apiserver 1.36 with `--feature-gates=ShardedListAndWatch=true`): only the
    /// objects whose FNV-1a 64 hash of `metadata.uid` (or `metadata.namespace`) falls in
    /// the selector's ranges, and lists echo it in `metadata.shardInfo`. `false` ignores
    /// the parameter, as a server without the gate (or older) does: every object, no
    /// `shardInfo`.
    ///
    /// ```
    /// use fake_apiserver::ServerConfig;
    ///
    /// let like_an_old_server = ServerConfig::default().shard_selectors(false);
    /// # let _ = like_an_old_server;
    /// ```
    #[must_use]
    pub fn shard_selectors(mut self, honour: bool) -> Self {
        self.shard_selectors = honour;
        self
    }

    /// How often watches that asked for bookmarks get one (default 60 s, the real
    /// server's watch-cache cadence: a streaming list's `initial-events-end` bookmark is
    /// not followed by another within seconds).
    #[must_use]
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// How long a watch without `timeoutSeconds` lasts (default 30 min, the real server's
    /// minimum request timeout).
    #[must_use]
    pub fn watch_timeout(mut self, timeout: Duration) -> Self {
        self.watch_timeout = timeout;
        self
    }

    /// How many events may wait for a slow watch client before the server ends that watch,
    /// as the real server does (default 1000). kube-apiserver holds 10 to 1000 events per
    /// watcher (by resource) beside what the sockets hold, waits up to about 100 ms for room,
    /// then ends the watch cleanly, dropping what it held, and counts it in
    /// `apiserver_terminated_watchers_total`; this server ends it as soon as its buffer is
    /// full (its larger default stands in for that wait: writes made in-process outpace
    /// any client), the same way, and counts it in the same metric (`GET /metrics`,
    /// [`FakeApiServer::terminated_watchers`](crate::FakeApiServer::terminated_watchers)).
    /// Bookmarks never end a watch: one that does not fit is dropped.
    #[must_use]
    pub fn watch_buffer(mut self, events: usize) -> Self {
        self.watch_buffer = events.max(1);
        self
    }

    /// Whether streaming lists (`sendInitialEvents=true`) are supported (default true). When
    /// off, the server answers them as a real server without the feature does: HTTP 200 and
    /// an `ERROR` event with code 500.
    #[must_use]
    pub fn streaming_lists(mut self, enabled: bool) -> Self {
        self.streaming_lists = enabled;
        self
    }

    /// Registers a resource type beyond the built-in ones (a custom resource).
    #[must_use]
    pub fn resource(mut self, ty: ResourceType) -> Self {
        self.resources.push(ty);
        self
    }
}
