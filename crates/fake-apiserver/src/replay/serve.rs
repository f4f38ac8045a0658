//! Answering requests from the traffic: LIST pages, watches from a resourceVersion, and the
//! error Statuses of requests it does not serve.

use std::{sync::Arc, time::Duration};

use bytes::{Bytes, BytesMut};
use futures_util::{StreamExt, stream};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::{Request, Response, body::Frame, header};
use tokio_util::sync::CancellationToken;

use super::{CHUNK, ProtoTraffic, Traffic, WatchShape};
use crate::{
    http::{Body, parse_query},
    protobuf,
};

/// How long a watch stays open after its last event when the client asks for no timeout.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// The traffic, and its protobuf rendition when asked for.
pub(super) struct Served {
    pub(super) traffic: Traffic,
    pub(super) proto: Option<ProtoTraffic>,
}

pub(super) fn answer<B>(
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
