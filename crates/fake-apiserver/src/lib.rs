//! # fake-apiserver
//!
//! An in-process Kubernetes API server over loopback HTTP, for testing controllers (and
//! kube-informer itself) without a cluster: no Go binaries, no containers.
//!
//! It answers like a real kube-apiserver 1.36 for what informers and simple controllers do —
//! discovery, GET, LIST (paged, at consistent snapshots, with resourceVersion semantics and the
//! real 410 answers), WATCH (bookmarks, replay, streaming lists, timeouts), create, update
//! (409 on a stale resourceVersion), merge, strategic-merge and JSON patches (with the `scale` subresource), and delete (finalizers, grace periods) — with
//! one global revision, uids, creationTimestamp, generation and managedFields maintained as
//! the real server does. The shapes (status codes, `Status` bodies, list metadata, watch
//! framing, headers) follow responses recorded from a real server.
//!
//! Tests can read a log of every request and inject faults (error statuses, 429 with
//! Retry-After, delays, cut LIST bodies, dropped, silent or corrupted watches, compaction,
//! restarts, servers without streaming lists); every fault is counted.
//!
//! ```
//! use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let server = FakeApiServer::start(ServerConfig::default().namespaces(["demo"])).await.unwrap();
//! server
//!     .create(&Gvr::core("configmaps"), Some("demo"), json!({"metadata": {"name": "cfg"}, "data": {"k": "v"}}))
//!     .unwrap();
//!
//! // Any HTTP client works; `server.client()` is a ready kube::Client.
//! let url = format!("{}/api/v1/namespaces/demo/configmaps", server.url());
//! # let _ = url;
//! assert_eq!(server.requests().len(), 0, "programmatic writes are not HTTP requests");
//! server.shutdown().await;
//! # }
//! ```

mod config;
mod crds;
mod faults;
pub mod fixtures;
mod http;
mod managed;
mod memory;
mod meta;
mod objects;
mod ops;
mod protobuf;
mod registry;
pub mod replay;
mod requests;
mod selector;
mod shard;
mod status;
mod storage;
mod strategic;
mod util;

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;

pub use self::{
    config::ServerConfig,
    faults::{Fault, Gate, Verb},
    registry::{Gvr, PrinterColumn, ResourceType},
    requests::RequestRecord,
    strategic::strategic_patch_table,
};
use self::{
    faults::Faults, ops::Part, requests::RequestLog, status::ApiError, storage::Storage, util::Rng,
};

/// An error of the programmatic API or of starting the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server could not bind or start.
    #[error("fake-apiserver could not start: {0}")]
    Start(#[source] std::io::Error),
    /// The server could not listen on its address (a port in use, most often: pick
    /// another with [`ServerConfig::port`], or 0 for a free one).
    #[error("fake-apiserver could not listen on {addr}: {source}")]
    Bind {
        /// The address it tried.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The kube client could not be built.
    #[error("fake-apiserver could not build a kube client: {0}")]
    Client(String),
    /// The request was refused, as the HTTP API would refuse it.
    #[error("{code} {reason}: {message}")]
    Api {
        /// The HTTP status code it would have.
        code: u16,
        /// The `Status` reason (`NotFound`, `Conflict`, ...).
        reason: String,
        /// The `Status` message.
        message: String,
    },
}

impl From<ApiError> for Error {
    fn from(e: ApiError) -> Self {
        Self::Api {
            code: e.code,
            reason: e.body["reason"].as_str().unwrap_or("").to_owned(),
            message: e.body["message"].as_str().unwrap_or("").to_owned(),
        }
    }
}

/// The state shared by the HTTP handlers and the handle.
pub(crate) struct Inner {
    pub(crate) storage: Mutex<Storage>,
    pub(crate) faults: Mutex<Faults>,
    pub(crate) log: RequestLog,
    pub(crate) config: ServerConfig,
    pub(crate) rng: Mutex<Rng>,
    streaming_lists: AtomicBool,
}

impl Inner {
    pub(crate) fn streaming_lists(&self) -> bool {
        self.streaming_lists.load(Ordering::Relaxed)
    }
}

/// A running fake API server. Dropping it (or [`shutdown`](Self::shutdown)) stops it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use serde_json::json;
///
/// let server = FakeApiServer::start(ServerConfig::default()).await?;
/// server.seed(&Gvr::core("configmaps"), [json!({"metadata": {"name": "a", "namespace": "shop"}})])?;
/// let api: kube::Api<ConfigMap> = kube::Api::namespaced(server.client()?, "shop");
/// assert_eq!(api.list(&Default::default()).await?.items.len(), 1);
/// server.shutdown().await;
/// # Ok(()) }
/// ```
pub struct FakeApiServer {
    inner: Arc<Inner>,
    addr: SocketAddr,
    url: String,
    stop: CancellationToken,
    /// Cancelled by [`FakeApiServer::terminate`]: the listener closes, connections stay.
    accepting: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    memory: Arc<memory::Connections>,
}

impl std::fmt::Debug for FakeApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeApiServer")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl FakeApiServer {
    /// Starts a server on 127.0.0.1 (an ephemeral port unless the config names one).
    pub async fn start(config: ServerConfig) -> Result<Self, Error> {
        let mut types = registry::builtins();
        types.extend(config.resources.iter().cloned());
        let mut storage = Storage::new(types, config.history_window);
        crds::install(&mut storage);
        let inner = Arc::new(Inner {
            storage: Mutex::new(storage),
            faults: Mutex::new(Faults::new(config.seed)),
            log: RequestLog::default(),
            rng: Mutex::new(Rng::new(config.seed)),
            streaming_lists: AtomicBool::new(config.streaming_lists),
            config,
        });
        for namespace in inner.config.namespaces.clone() {
            inner
                .create(
                    &Gvr::core("namespaces"),
                    None,
                    serde_json::json!({"metadata": {"name": namespace}}),
                    "fake-apiserver",
                    Part::Object,
                )
                .map_err(|e| Error::Start(std::io::Error::other(format!("{e:?}"))))?;
        }
        let wanted = std::net::SocketAddr::from(([127, 0, 0, 1], inner.config.port));
        let listener = TcpListener::bind(wanted)
            .await
            .map_err(|source| Error::Bind {
                addr: wanted,
                source,
            })?;
        let addr = listener.local_addr().map_err(Error::Start)?;
        let (stop, accepting) = (CancellationToken::new(), CancellationToken::new());
        let handler = inner.clone();
        let accept = tokio::spawn(serve_http1(
            listener,
            stop.clone(),
            accepting.clone(),
            true,
            move |req| http::handle(handler.clone(), req),
        ));
        let bookmarks = tokio::spawn(bookmark_loop(
            Arc::downgrade(&inner),
            inner.config.bookmark_interval,
            stop.clone(),
        ));
        let memory = Arc::new(memory::Connections::new(
            inner.clone(),
            stop.clone(),
            accepting.clone(),
        ));
        Ok(Self {
            memory,
            inner,
            addr,
            url: format!("http://{addr}"),
            stop,
            accepting,
            tasks: vec![accept, bookmarks],
        })
    }

    /// The base URL, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A `kube::Client` for this server (no auth, plain HTTP, default namespace `default`).
    pub fn client(&self) -> Result<kube::Client, Error> {
        let uri = self
            .url
            .parse()
            .map_err(|e| Error::Client(format!("{e}")))?;
        let config = kube::Config::new(uri);
        kube::Client::try_from(config).map_err(|e| Error::Client(e.to_string()))
    }

    /// A `kube::Client` that reaches this server without a socket (default namespace
    /// `default`): each request gets an in-memory connection carrying the same HTTP/1.1
    /// bytes as [`client`](Self::client)'s TCP. For tests on a paused tokio clock
    /// (`#[tokio::test(start_paused = true)]`), where the clock moves whenever the runtime
    /// waits on the operating system: in memory, the runtime is idle only when the server
    /// is too, and a schedule is a function of its seed. (Decode in place as well, with
    /// `kube_informer::list_watch::set_decoding_threads(0)`.)
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use fake_apiserver::{FakeApiServer, ServerConfig};
    /// use k8s_openapi::api::core::v1::Namespace;
    ///
    /// let server = FakeApiServer::start(ServerConfig::default().namespaces(["shop"])).await.unwrap();
    /// let namespaces: kube::Api<Namespace> = kube::Api::all(server.memory_client());
    /// let before = tokio::time::Instant::now();
    /// assert!(namespaces.get("shop").await.is_ok());
    /// assert_eq!(before, tokio::time::Instant::now(), "the paused clock did not move");
    /// server.shutdown().await;
    /// # }
    /// ```
    pub fn memory_client(&self) -> kube::Client {
        kube::Client::new(memory::MemoryService(self.memory.clone()), "default")
    }

    /// The latest resourceVersion (the global revision).
    pub fn resource_version(&self) -> u64 {
        self.inner.storage.lock().revision()
    }

    /// Injects a fault for the next matching requests.
    pub fn inject(&self, fault: Fault) {
        self.inner.faults.lock().inject(fault);
    }

    /// Drops every fault not yet used up: a test that injects a fault for as long as it
    /// takes to observe it (`times` far above what it needs) ends it here, so its verdict
    /// does not depend on how fast the client burns through a count. What fired stays in
    /// [`fault_counts`](Self::fault_counts).
    pub fn clear_faults(&self) {
        self.inner.faults.lock().clear();
    }

    /// Compacts all history now, as etcd compaction followed by a watch-cache purge would:
    /// watches and exact lists from any earlier resourceVersion get 410.
    pub fn compact(&self) {
        let mut storage = self.inner.storage.lock();
        let to = storage.revision();
        storage.compact(to);
        drop(storage);
        self.inner.faults.lock().record("compaction");
    }

    /// Turns streaming lists (`sendInitialEvents`) on or off; off answers like a real server
    /// without them.
    pub fn set_streaming_lists(&self, enabled: bool) {
        self.inner.streaming_lists.store(enabled, Ordering::Relaxed);
    }

    /// Simulates an API server restart: every watch connection is cut and the watch history
    /// is lost, while the stored objects stay. As on a real server, whose own startup writes
    /// (its identity Lease, the `kubernetes` Service's endpoints) move etcd's revision on
    /// before its watch cache fills, a watch resumed at the last version seen before the
    /// restart gets `410 Gone` even when none of its objects changed.
    pub fn restart(&self) {
        let mut storage = self.inner.storage.lock();
        storage.close_all_watchers(true);
        storage.advance();
        let to = storage.revision();
        storage.compact(to);
        drop(storage);
        self.inner.faults.lock().record("restart");
    }

    /// Simulates a SIGTERM'd kube-apiserver: it stops listening at once (new connections
    /// are refused), while the connections already open — watches included — go on being
    /// served, events and all, as a real server's do for about a minute while it shuts
    /// down. Clients that only reconnect find nothing; [`shutdown`](Self::shutdown) or drop
    /// closes what is left. One-way: a terminated server does not listen again.
    pub fn terminate(&self) {
        self.accepting.cancel();
        self.inner.faults.lock().record("terminate");
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.inner.log.snapshot()
    }

    /// Forgets the request log.
    pub fn clear_requests(&self) {
        self.inner.log.clear();
    }

    /// How often each fault fired, by name (`status:429`, `delay`, `cut_list`, `restart`,
    /// `compaction`, `streaming_list_refused`, ...). Watch faults are counted by the
    /// [`Fault`] that armed them.
    pub fn fault_counts(&self) -> BTreeMap<String, u64> {
        self.inner.faults.lock().counts()
    }

    /// How many watches of `gvr` are open.
    pub fn watch_count(&self, gvr: &Gvr) -> usize {
        self.inner
            .storage
            .lock()
            .resource(gvr)
            .map_or(0, |r| r.watcher_count())
    }

    /// How many watches of `gvr` the server ended because their client did not keep up
    /// (see [`ServerConfig::watch_buffer`]); also served at `GET /metrics` as the real
    /// server's `apiserver_terminated_watchers_total`.
    pub fn terminated_watchers(&self, gvr: &Gvr) -> u64 {
        self.inner
            .storage
            .lock()
            .resource(gvr)
            .map_or(0, |r| r.terminated_watchers())
    }

    /// Stops the server: watches end, connections close.
    pub async fn shutdown(mut self) {
        self.stop_now();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        self.memory.close().await;
    }

    fn stop_now(&self) {
        self.inner.storage.lock().close_all_watchers(false);
        self.stop.cancel();
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.stop_now();
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Accepts connections on `listener` until `stop` (or, listener closed and connections
/// kept, until `accepting` is cancelled and then `stop`), serving each over HTTP/1.1 with
/// `handle` (header names in `title_case` or as written).
pub(crate) async fn serve_http1<H, F>(
    listener: TcpListener,
    stop: CancellationToken,
    accepting: CancellationToken,
    title_case: bool,
    handle: H,
) where
    H: Fn(hyper::Request<hyper::body::Incoming>) -> F + Clone + Send + 'static,
    F: std::future::Future<Output = Result<hyper::Response<http::Body>, std::convert::Infallible>>
        + Send
        + 'static,
{
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
            () = accepting.cancelled() => {
                // Not listening any more; the open connections go on until `stop`.
                drop(listener);
                stop.cancelled().await;
                break;
            }
        };
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let handle = handle.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(handle);
            let conn = hyper::server::conn::http1::Builder::new()
                .title_case_headers(title_case)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(err) = conn.await {
                tracing::debug!(%err, "fake-apiserver: connection ended with an error");
            }
        });
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
}

async fn bookmark_loop(
    inner: std::sync::Weak<Inner>,
    interval: std::time::Duration,
    stop: CancellationToken,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = stop.cancelled() => return,
        }
        let Some(inner) = inner.upgrade() else { return };
        inner.storage.lock().bookmark_all();
    }
}

// The README's example is compiled as a doctest, so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
