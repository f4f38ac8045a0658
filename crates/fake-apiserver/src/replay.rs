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

use crate::{
    http::{Body, parse_query},
    protobuf,
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

/// The traffic in protobuf: each listed object's message, each event's whole frame.
#[derive(Debug)]
struct ProtoTraffic {
    objects: Vec<Bytes>,
    events: Vec<Bytes>,
    message: &'static kube_protobuf_schema::Message,
    kind: String,
}

impl ProtoTraffic {
    fn render(traffic: &Traffic) -> io::Result<Self> {
        let fail = |why: String| {
            io::Error::other(format!("the traffic cannot be served as protobuf: {why}"))
        };
        let kind = traffic
            .list_kind
            .strip_suffix("List")
            .unwrap_or(&traffic.list_kind)
            .to_owned();
        let message = kube_protobuf_schema::kind(&traffic.api_version, &kind).ok_or_else(|| {
            fail(format!(
                "{kind} ({}) has no protobuf encoding",
                traffic.api_version
            ))
        })?;
        let encode = |value: &serde_json::Value| -> io::Result<Vec<u8>> {
            protobuf::message_bytes(message, value).map_err(|e| fail(e.body["message"].to_string()))
        };
        let parse = |json: &[u8]| -> io::Result<serde_json::Value> {
            serde_json::from_slice(json).map_err(|e| fail(e.to_string()))
        };
        let objects = traffic
            .objects
            .iter()
            .map(|o| encode(&parse(o)?).map(Bytes::from))
            .collect::<io::Result<_>>()?;
        let events = traffic
            .events
            .iter()
            .map(|event| {
                let line = parse(&event.line)?;
                let raw = encode(&line["object"])?;
                let body = protobuf::envelope(&traffic.api_version, &kind, &raw);
                Ok(protobuf::frame(
                    line["type"].as_str().unwrap_or_default(),
                    &body,
                ))
            })
            .collect::<io::Result<_>>()?;
        Ok(Self {
            objects,
            events,
            message,
            kind,
        })
    }
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
        let (offset, end) = self.bounds(offset, limit);
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

    /// [`page`](Self::page) in protobuf.
    fn protobuf_page(&self, proto: &ProtoTraffic, offset: usize, limit: Option<usize>) -> Bytes {
        let (offset, end) = self.bounds(offset, limit);
        let mut metadata =
            serde_json::json!({"resourceVersion": self.list_resource_version.to_string()});
        if end < self.objects.len() {
            metadata["continue"] = format!("replay-{end}").into();
            metadata["remainingItemCount"] = (self.objects.len() - end).into();
        }
        let items = proto.objects[offset..end].iter().map(|b| &b[..]);
        let body = protobuf::list(&self.api_version, &self.list_kind, &metadata, items)
            .expect("a ListMeta always encodes");
        Bytes::from(body)
    }

    /// The first and one-past-last item of the page at `offset` with at most `limit` items.
    fn bounds(&self, offset: usize, limit: Option<usize>) -> (usize, usize) {
        let offset = offset.min(self.objects.len());
        let end = limit.map_or(self.objects.len(), |l| {
            offset.saturating_add(l.max(1)).min(self.objects.len())
        });
        (offset, end)
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

/// The traffic, and its protobuf rendition when asked for.
struct Served {
    traffic: Traffic,
    proto: Option<ProtoTraffic>,
}

fn answer<B>(
    served: &Arc<Served>,
    req: &Request<B>,
    stop: &CancellationToken,
    shape: WatchShape,
) -> Response<Body> {
    let traffic = &served.traffic;
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let proto = served
        .proto
        .as_ref()
        .filter(|_| protobuf::prefers_protobuf(accept));
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
            served.clone(),
            Watch {
                from,
                bookmarks,
                timeout,
                shape,
                protobuf: proto.is_some(),
            },
            stop.clone(),
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
    let (body, content_type) = match proto {
        Some(proto) => (
            traffic.protobuf_page(proto, offset, limit),
            protobuf::CONTENT_TYPE,
        ),
        None => (traffic.page(offset, limit), "application/json"),
    };
    respond(
        200,
        content_type,
        Full::new(body)
            .map_err(|never| match never {})
            .boxed_unsync(),
    )
}

/// What a watch asked for.
struct Watch {
    from: u64,
    bookmarks: bool,
    timeout: Duration,
    shape: WatchShape,
    protobuf: bool,
}

fn watch(served: Arc<Served>, asked: Watch, stop: CancellationToken) -> Response<Body> {
    let Watch {
        from,
        bookmarks,
        timeout,
        shape,
        protobuf: in_protobuf,
    } = asked;
    let traffic = &served.traffic;
    let start = traffic.events_after(from);
    let last = traffic
        .events
        .last()
        .map_or(traffic.list_resource_version, |e| e.resource_version)
        .max(from);
    let bookmark = match (bookmarks, served.proto.as_ref().filter(|_| in_protobuf)) {
        (false, _) => None,
        (true, Some(proto)) => Some(protobuf::bookmark(
            proto.message,
            &traffic.api_version,
            &proto.kind,
            &serde_json::json!({"resourceVersion": last.to_string()}),
        )),
        (true, None) => Some(Bytes::from(format!(
            "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{last}\"}}}}}}\n"
        ))),
    };
    // The event at `i`: its JSON line, or its protobuf frame.
    let event = move |served: &Served, i: usize| -> Bytes {
        match (&served.proto, in_protobuf) {
            (Some(proto), true) => proto.events[i].clone(),
            _ => served.traffic.events[i].line.clone(),
        }
    };
    let events = stream::unfold((served.clone(), start), move |(served, next)| async move {
        if next >= served.traffic.events.len() {
            return None;
        }
        if shape == WatchShape::PerEvent {
            // Pending once between events, so the connection writes each one out on its
            // own (hyper flushes when the body is not ready), as the real server does.
            if next > start {
                tokio::task::yield_now().await;
            }
            let line = event(&served, next);
            return Some((line, (served, next + 1)));
        }
        let mut chunk = BytesMut::with_capacity(CHUNK + 8 * 1024);
        let mut i = next;
        while i < served.traffic.events.len() && chunk.len() < CHUNK {
            chunk.extend_from_slice(&event(&served, i));
            i += 1;
        }
        Some((chunk.freeze(), (served, i)))
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
    let content_type = match in_protobuf {
        true => protobuf::WATCH_CONTENT_TYPE,
        false => "application/json",
    };
    respond(
        200,
        content_type,
        BodyExt::boxed_unsync(StreamBody::new(frames)),
    )
}

fn status(code: u16, reason: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    respond(
        code,
        "application/json",
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed_unsync(),
    )
}

fn respond(code: u16, content_type: &'static str, body: Body) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(body)
        .expect("static headers are valid")
}
