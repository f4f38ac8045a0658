//! A replay server: pre-rendered LIST pages and watch events, the same bytes for every client.
//!
//! Benchmarks comparing clients need every client to receive identical traffic, and the server
//! must not be the bottleneck. [`ReplayServer`] serves a [`Traffic`] rendered once: the objects
//! present at one resourceVersion (answered to LISTs, paged by `limit`/`continue` as the real
//! server pages them) and the watch events after it (answered to watches from that version or
//! any later one). It keeps no other state: writes are not served.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use bytes::Bytes;
//! use fake_apiserver::replay::{ReplayEvent, ReplayServer, Traffic};
//!
//! let traffic = Traffic {
//!     list_kind: "ConfigMapList".into(),
//!     api_version: "v1".into(),
//!     list_resource_version: 1,
//!     objects: vec![Bytes::from_static(
//!         br#"{"metadata":{"name":"a","namespace":"default","resourceVersion":"1"}}"#,
//!     )],
//!     events: vec![ReplayEvent::new(
//!         2,
//!         "DELETED",
//!         br#"{"metadata":{"name":"a","namespace":"default","resourceVersion":"2"}}"#,
//!     )],
//! };
//! let server = ReplayServer::start(traffic).await?;
//! println!("serving at {}", server.url());
//! # Ok(()) }
//! ```

mod serve;
mod traffic;

use std::{convert::Infallible, io, net::SocketAddr, sync::Arc};

use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;

pub use self::traffic::{ReplayEvent, Traffic};
use self::{
    serve::{Served, answer},
    traffic::ProtoTraffic,
};

/// Coalesced watch bodies are written in chunks of about this size.
const CHUNK: usize = 64 * 1024;

/// How watch events are written to the connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WatchShape {
    /// One write per event, as a real kube-apiserver sends them while its client keeps up
    /// (it flushes after each event when no other is queued): the shape clients meet.
    #[default]
    PerEvent,
    /// Events joined into writes of about 64 KiB: the cheapest for the server and the
    /// kindest to clients (fewer, larger reads); a best case, not what a cluster sends.
    Coalesced,
}

/// How a [`ReplayServer`] serves its traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// How watch events are written.
    pub watch_shape: WatchShape,
    /// Also serve the traffic in protobuf, to clients that ask for it first
    /// (`Accept: application/vnd.kubernetes.protobuf, ...`), as kube-apiserver does for
    /// built-in kinds. Rendered once at start (seconds for tens of thousands of pods); the
    /// traffic must be of a built-in kind.
    pub protobuf: bool,
}

/// A running replay server on a loopback port; stops when dropped.
#[derive(Debug)]
pub struct ReplayServer {
    url: String,
    addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl ReplayServer {
    /// Starts serving `traffic` on an ephemeral loopback port.
    ///
    /// Every GET answers from the traffic whatever its path: `?watch=true` streams the events
    /// after the requested resourceVersion (all of them from `""`/`"0"`), then a BOOKMARK when
    /// bookmarks were allowed, then holds the watch open until its `timeoutSeconds`; other
    /// requests get a LIST page. Streaming lists (`sendInitialEvents=true`) are refused with
    /// an error Status, as a server without them refuses them.
    pub async fn start(traffic: Traffic) -> io::Result<Self> {
        Self::start_with(traffic, WatchShape::default()).await
    }

    /// [`start`](Self::start), writing watch events in the given [`WatchShape`].
    pub async fn start_with(traffic: Traffic, shape: WatchShape) -> io::Result<Self> {
        let options = ReplayOptions {
            watch_shape: shape,
            ..ReplayOptions::default()
        };
        Self::start_with_options(traffic, options).await
    }

    /// [`start`](Self::start) with [`ReplayOptions`].
    ///
    /// # Errors
    /// No free port, or (with `protobuf`) traffic that protobuf cannot carry: a kind that is
    /// not built in, or an object that does not fit its kind's schema.
    pub async fn start_with_options(traffic: Traffic, options: ReplayOptions) -> io::Result<Self> {
        let shape = options.watch_shape;
        let proto = match options.protobuf {
            true => Some(ProtoTraffic::render(&traffic)?),
            false => None,
        };
        let served = Arc::new(Served { traffic, proto });
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let answering = stop.clone();
        let task = tokio::spawn(crate::serve_http1(
            listener,
            stop.clone(),
            CancellationToken::new(),
            false,
            move |req| {
                let reply = answer(&served, &req, &answering, shape);
                async move { Ok::<_, Infallible>(reply) }
            },
        ));
        Ok(Self {
            url: format!("http://{addr}"),
            addr,
            stop,
            task,
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
}

impl Drop for ReplayServer {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
    }
}
