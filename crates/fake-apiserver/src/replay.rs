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

use std::{convert::Infallible, io, net::SocketAddr, sync::Arc, time::Duration};

use bytes::{Bytes, BytesMut};
use futures_util::{StreamExt, stream};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::{Request, Response, body::Frame, header};
use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::http::{Body, parse_query};

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

/// How long a watch stays open after its last event when the client asks for no timeout.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// One watch event, rendered once.
#[derive(Debug, Clone)]
pub struct ReplayEvent {
    /// The event's resourceVersion (strictly increasing through [`Traffic::events`]).
    pub resource_version: u64,
    /// The whole line: `{"type":...,"object":...}\n`.
    pub line: Bytes,
}

impl ReplayEvent {
    /// Renders the line of an event of type `kind` (`ADDED`, `MODIFIED`, `DELETED`) carrying
    /// the JSON `object`.
    pub fn new(resource_version: u64, kind: &str, object: &[u8]) -> Self {
        let mut line = Vec::with_capacity(object.len() + kind.len() + 24);
        line.extend_from_slice(br#"{"type":""#);
        line.extend_from_slice(kind.as_bytes());
        line.extend_from_slice(br#"","object":"#);
        line.extend_from_slice(object);
        line.extend_from_slice(b"}\n");
        Self {
            resource_version,
            line: Bytes::from(line),
        }
    }
}

/// What a [`ReplayServer`] answers.
#[derive(Debug, Clone, Default)]
pub struct Traffic {
    /// The list's `kind`, e.g. `PodList`.
    pub list_kind: String,
    /// The list's `apiVersion`, e.g. `v1`.
    pub api_version: String,
    /// The resourceVersion of the listed state.
    pub list_resource_version: u64,
    /// The listed objects, each one complete JSON object.
    pub objects: Vec<Bytes>,
    /// The changes after the listed state, in order.
    pub events: Vec<ReplayEvent>,
}

impl Traffic {
    /// The body of the LIST page starting at `offset` with at most `limit` items.
    fn page(&self, offset: usize, limit: Option<usize>) -> Bytes {
        let offset = offset.min(self.objects.len());
        let end = limit.map_or(self.objects.len(), |l| {
            offset.saturating_add(l.max(1)).min(self.objects.len())
        });
        let items = &self.objects[offset..end];
        let size = items.iter().map(|o| o.len() + 1).sum::<usize>() + 256;
        let mut body = Vec::with_capacity(size);
        body.extend_from_slice(
            format!(
                r#"{{"kind":"{}","apiVersion":"{}","metadata":{{"resourceVersion":"{}""#,
                self.list_kind, self.api_version, self.list_resource_version
            )
            .as_bytes(),
        );
        if end < self.objects.len() {
            body.extend_from_slice(
                format!(
                    r#","continue":"replay-{end}","remainingItemCount":{}"#,
                    self.objects.len() - end
                )
                .as_bytes(),
            );
        }
        body.extend_from_slice(br#"},"items":["#);
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item);
        }
        body.extend_from_slice(b"]}");
        Bytes::from(body)
    }

    /// The events after `resource_version`.
    fn events_after(&self, resource_version: u64) -> usize {
        self.events
            .partition_point(|e| e.resource_version <= resource_version)
    }
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
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let traffic = Arc::new(traffic);
        let answering = stop.clone();
        let task = tokio::spawn(crate::serve_http1(
            listener,
            stop.clone(),
            CancellationToken::new(),
            false,
            move |req| {
                let reply = answer(&traffic, &req, &answering, shape);
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

fn answer<B>(
    traffic: &Arc<Traffic>,
    req: &Request<B>,
    stop: &CancellationToken,
    shape: WatchShape,
) -> Response<Body> {
    let query = parse_query(req.uri().query());
    let get = |name: &str| {
        query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    if get("watch").is_some_and(|v| v == "true" || v == "1") {
        if get("sendInitialEvents") == Some("true") {
            return status(
                422,
                "Invalid",
                "sendInitialEvents is not served by the replay server",
            );
        }
        let from = match get("resourceVersion").map(str::parse::<u64>) {
            None => 0,
            Some(Ok(rv)) => rv,
            Some(Err(_)) => return status(400, "BadRequest", "invalid resourceVersion"),
        };
        let timeout = get("timeoutSeconds")
            .and_then(|v| v.parse().ok())
            .map_or(DEFAULT_WATCH_TIMEOUT, Duration::from_secs);
        let bookmarks = get("allowWatchBookmarks") == Some("true");
        return watch(
            traffic.clone(),
            from,
            bookmarks,
            timeout,
            stop.clone(),
            shape,
        );
    }
    let offset = match get("continue") {
        None => 0,
        Some(token) => match token.strip_prefix("replay-").and_then(|o| o.parse().ok()) {
            Some(offset) => offset,
            None => return status(400, "BadRequest", "invalid continue token"),
        },
    };
    let limit = get("limit").and_then(|l| l.parse().ok());
    respond(
        200,
        Full::new(traffic.page(offset, limit))
            .map_err(|never| match never {})
            .boxed_unsync(),
    )
}

fn watch(
    traffic: Arc<Traffic>,
    from: u64,
    bookmarks: bool,
    timeout: Duration,
    stop: CancellationToken,
    shape: WatchShape,
) -> Response<Body> {
    let start = traffic.events_after(from);
    let last = traffic
        .events
        .last()
        .map_or(traffic.list_resource_version, |e| e.resource_version)
        .max(from);
    let events = stream::unfold((traffic, start), move |(traffic, next)| async move {
        if next >= traffic.events.len() {
            return None;
        }
        if shape == WatchShape::PerEvent {
            // Pending once between events, so the connection writes each one out on its
            // own (hyper flushes when the body is not ready), as the real server does.
            if next > start {
                tokio::task::yield_now().await;
            }
            let line = traffic.events[next].line.clone();
            return Some((line, (traffic, next + 1)));
        }
        let mut chunk = BytesMut::with_capacity(CHUNK + 8 * 1024);
        let mut i = next;
        while i < traffic.events.len() && chunk.len() < CHUNK {
            chunk.extend_from_slice(&traffic.events[i].line);
            i += 1;
        }
        Some((chunk.freeze(), (traffic, i)))
    });
    let bookmark = bookmarks.then(|| {
        Bytes::from(format!(
            "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{last}\"}}}}}}\n"
        ))
    });
    let hold = stream::once(async move {
        tokio::select! {
            () = tokio::time::sleep(timeout) => {}
            () = stop.cancelled() => {}
        }
    })
    .filter_map(|()| async { None::<Bytes> });
    let frames = events
        .chain(stream::iter(bookmark))
        .chain(hold)
        .map(|bytes| Ok(Frame::data(bytes)));
    respond(200, BodyExt::boxed_unsync(StreamBody::new(frames)))
}

fn status(code: u16, reason: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    respond(
        code,
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed_unsync(),
    )
}

fn respond(code: u16, body: Body) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(body)
        .expect("static headers are valid")
}
