//! WATCH: newline-delimited JSON events, replay from a resourceVersion, bookmarks, streaming
//! lists, timeouts, and the injected watch faults.

use std::{
    collections::VecDeque,
    io,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::{sync::mpsc, time::Instant};

use super::{
    Params,
    response::Reply,
    table::{Include, table},
};
use kube_protobuf_schema::Message;

use crate::{
    Inner,
    faults::WatchFaults,
    protobuf::{self, Format},
    registry::{Gvr, ResourceType},
    selector::Filter,
    status::ApiError,
    storage::{EventType, StoredObject, WatchMsg, Watcher, transition},
};

/// The most bytes joined into one body chunk.
const COALESCE: usize = 64 * 1024;

/// One line of the stream.
enum Line {
    Event(EventType, Arc<StoredObject>),
    /// A bookmark at a revision; `true` for the end of a streaming list's initial events.
    Bookmark(u64, bool),
}

/// A stream that sends only an ERROR event (how a watch reports 410 and friends).
pub(crate) fn error_stream(err: &ApiError, format: Format) -> Reply {
    let event = error_event(&err.body, format);
    let mut reply = Reply::stream(200, futures_util::stream::iter([Ok(event)]));
    if format.is_protobuf() {
        reply.content_type = protobuf::WATCH_CONTENT_TYPE;
    }
    reply
}

/// An ERROR event carrying `status`.
fn error_event(status: &Value, format: Format) -> Bytes {
    match format {
        Format::Protobuf(_) => protobuf::frame("ERROR", &protobuf::status(status)),
        Format::Json => Bytes::from(format!("{{\"type\":\"ERROR\",\"object\":{status}}}\n")),
    }
}

fn bookmark(object_prefix: &Bytes, revision: u64, initial_events_end: bool) -> Bytes {
    let annotations = if initial_events_end {
        ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
    } else {
        ""
    };
    let prefix = String::from_utf8_lossy(object_prefix);
    Bytes::from(format!(
        "{{\"type\":\"BOOKMARK\",\"object\":{prefix}\"metadata\":{{\"resourceVersion\":\"{revision}\"{annotations}}}}}}}\n"
    ))
}

pub(crate) fn watch(
    inner: &Arc<Inner>,
    gvr: &Gvr,
    filter: Filter,
    params: &Params,
    faults: WatchFaults,
    shape: Shape,
) -> Result<Reply, ApiError> {
    let send_initial = params.send_initial_events;
    match (send_initial, params.resource_version_match.as_deref()) {
        (Some(true), Some("NotOlderThan")) => {}
        (Some(true), _) => {
            return Err(ApiError::invalid_list_options(
                "sendInitialEvents",
                "Forbidden: sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
            ));
        }
        (_, Some(_)) => {
            return Err(ApiError::invalid_list_options(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        _ => {}
    }
    let format = match &shape {
        Shape::Protobuf(_, message) => Format::Protobuf(message),
        // Errors of a metadata watch stay JSON, as the real server sends them.
        _ => Format::Json,
    };
    let protobuf_metadata = matches!(shape, Shape::MetadataProtobuf);
    if send_initial == Some(true) && !inner.streaming_lists() {
        inner.faults.lock().record("streaming_list_refused");
        return Ok(error_stream(&ApiError::watch_list_unsupported(), format));
    }
    let requested = match params.resource_version.as_deref() {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?,
        ),
    };
    let timeout = params
        .timeout_seconds
        .map_or(inner.config.watch_timeout, Duration::from_secs);
    let bookmarks = params.allow_watch_bookmarks;

    let mut storage = inner.storage.lock();
    let (current, compacted) = (storage.revision(), storage.compacted());
    let store = storage
        .resource_mut(gvr)
        .ok_or_else(ApiError::not_found_path)?;
    let object_prefix = match shape {
        Shape::Metadata => Bytes::from_static(super::metadata::PREFIX.as_bytes()),
        _ => store.object_prefix.clone(),
    };
    let mut initial: VecDeque<Line> = VecDeque::new();
    match (send_initial == Some(true), requested) {
        // Current state as ADDED events: a streaming list, or a watch from "" / "0".
        (true, _) | (false, None) => {
            let keep = |o: &StoredObject| filter.matches(&o.meta);
            for (_, obj) in store.scan(current, filter.namespace.as_deref(), None, keep) {
                initial.push_back(Line::Event(EventType::Added, obj.clone()));
            }
            if send_initial == Some(true) && bookmarks {
                initial.push_back(Line::Bookmark(current, true));
            }
        }
        (false, Some(rv)) => {
            if rv < compacted {
                drop(storage);
                return Ok(error_stream(
                    &ApiError::watch_too_old(rv, compacted + 1),
                    format,
                ));
            }
            for event in store.events_after(rv) {
                if let Some(kind) = transition(&filter, event) {
                    initial.push_back(Line::Event(kind, event.object.clone()));
                }
            }
        }
    }
    let (tx, rx) = mpsc::channel(inner.config.watch_buffer);
    let terminated = Arc::new(AtomicBool::new(false));
    store.add_watcher(Watcher {
        filter,
        bookmarks,
        tx,
        terminated: terminated.clone(),
    });
    drop(storage);

    let state = WatchState {
        type_prefixes: [EventType::Added, EventType::Modified, EventType::Deleted].map(|t| {
            let mut p = format!("{{\"type\":\"{}\",\"object\":", t.as_str()).into_bytes();
            p.extend_from_slice(&object_prefix);
            Bytes::from(p)
        }),
        object_prefix,
        pending: VecDeque::new(),
        initial,
        rx,
        terminated,
        deadline: Instant::now() + timeout,
        faults,
        events_sent: 0,
        mode: Mode::Active,
        metadata_only: matches!(shape, Shape::Metadata),
        protobuf: match &shape {
            Shape::Protobuf(ty, message) => Some(ProtoWatch {
                message,
                api_version: ty.gvr.api_version(),
                kind: ty.kind.clone(),
                metadata_only: false,
            }),
            Shape::MetadataProtobuf => Some(ProtoWatch {
                message: kube_protobuf_schema::kind(
                    super::metadata::API_VERSION,
                    "PartialObjectMetadata",
                )
                .expect("PartialObjectMetadata in the schema"),
                api_version: super::metadata::API_VERSION.to_owned(),
                kind: "PartialObjectMetadata".to_owned(),
                metadata_only: true,
            }),
            _ => None,
        },
        table: match shape {
            Shape::Table(ty, include) => Some(TableMode {
                ty,
                include,
                columns_sent: false,
            }),
            _ => None,
        },
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        let chunk = s.next_chunk().await?;
        Some((chunk, s))
    });
    let mut reply = Reply::stream(200, Box::pin(stream));
    if format.is_protobuf() || protobuf_metadata {
        reply.content_type = protobuf::WATCH_CONTENT_TYPE;
    }
    Ok(reply)
}

#[derive(PartialEq)]
enum Mode {
    Active,
    /// Injected: the connection stays open, nothing is sent.
    Silent,
    /// End the stream with an error (the connection breaks).
    Abort,
    Done,
}

struct WatchState {
    /// `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1",` per event type.
    type_prefixes: [Bytes; 3],
    object_prefix: Bytes,
    pending: VecDeque<Bytes>,
    initial: VecDeque<Line>,
    rx: mpsc::Receiver<WatchMsg>,
    /// Set by the server when this client fell too far behind: end without the rest.
    terminated: Arc<AtomicBool>,
    deadline: Instant,
    faults: WatchFaults,
    events_sent: usize,
    mode: Mode,
    /// Events as one-row Tables (`kubectl get -w`).
    table: Option<TableMode>,
    /// Events' objects as `PartialObjectMetadata`.
    metadata_only: bool,
    /// Events as protobuf frames.
    protobuf: Option<ProtoWatch>,
}

/// A protobuf watch's kind.
struct ProtoWatch {
    message: &'static Message,
    api_version: String,
    kind: String,
    /// `PartialObjectMetadata` messages of the objects (not the objects' own, cached).
    metadata_only: bool,
}

/// What a watch's events carry.
pub(crate) enum Shape {
    /// The objects.
    Object,
    /// One-row Tables (`kubectl get -w`).
    Table(Arc<ResourceType>, Include),
    /// `PartialObjectMetadata` (metadata informers).
    Metadata,
    /// The objects, as protobuf frames (the kind's message).
    Protobuf(Arc<ResourceType>, &'static Message),
    /// `PartialObjectMetadata`, as protobuf frames.
    MetadataProtobuf,
}

struct TableMode {
    ty: Arc<ResourceType>,
    include: Include,
    columns_sent: bool,
}

impl WatchState {
    /// The next piece of the body: whatever is ready, joined into one buffer of up to
    /// [`COALESCE`] bytes (one write instead of three per event).
    async fn next_chunk(&mut self) -> Option<Result<Bytes, io::Error>> {
        let first = match self.next_piece().await? {
            Ok(bytes) => bytes,
            Err(e) => return Some(Err(e)),
        };
        if self.pending.is_empty() && !self.has_ready_lines() {
            return Some(Ok(first));
        }
        let mut buf = BytesMut::with_capacity(COALESCE);
        buf.extend_from_slice(&first);
        while buf.len() < COALESCE {
            if self.pending.is_empty() && !self.fill_ready() {
                break;
            }
            match self.pending.pop_front() {
                Some(piece) => buf.extend_from_slice(&piece),
                None => break,
            }
        }
        Some(Ok(buf.freeze()))
    }

    /// Whether a line can be produced without waiting.
    fn has_ready_lines(&self) -> bool {
        // A slow watch holds each live line back on its own (in `next_piece`).
        let live_ready = self.faults.lag.is_none() && !self.rx.is_empty();
        self.mode == Mode::Active && (!self.initial.is_empty() || live_ready)
    }

    /// Turns one ready line (initial or already received) into pending pieces, without
    /// waiting; false if none was ready.
    fn fill_ready(&mut self) -> bool {
        self.check_terminated();
        if self.mode != Mode::Active {
            return false;
        }
        let line = match self.initial.pop_front() {
            Some(line) => line,
            None if self.faults.lag.is_some() => return false,
            None => match self.rx.try_recv() {
                Ok(WatchMsg::Event(kind, object)) => Line::Event(kind, object),
                Ok(WatchMsg::Bookmark(revision)) => Line::Bookmark(revision, false),
                Ok(WatchMsg::Close { abort }) => {
                    self.mode = if abort { Mode::Abort } else { Mode::Done };
                    return false;
                }
                Err(_) => return false,
            },
        };
        self.push_line(line);
        true
    }

    fn push_line(&mut self, line: Line) {
        match line {
            Line::Bookmark(revision, end) => {
                let line = match &self.protobuf {
                    Some(p) => {
                        let mut metadata = json!({"resourceVersion": revision.to_string()});
                        if end {
                            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
                        }
                        protobuf::bookmark(p.message, &p.api_version, &p.kind, &metadata)
                    }
                    None => bookmark(&self.object_prefix, revision, end),
                };
                self.pending.push_back(line);
            }
            Line::Event(kind, object) if self.protobuf.is_some() => {
                let p = self.protobuf.as_ref().expect("checked");
                let raw = match p.metadata_only {
                    true => super::metadata::message_bytes(&object.body).map(Bytes::from),
                    false => object.protobuf(p.message),
                };
                let frame = match raw {
                    Ok(raw) => {
                        let body = protobuf::envelope(&p.api_version, &p.kind, &raw);
                        protobuf::frame(kind.as_str(), &body)
                    }
                    Err(e) => {
                        // As the real server does: the ERROR event ends the watch.
                        self.mode = Mode::Done;
                        self.initial.clear();
                        error_event(&e.body, Format::Protobuf(p.message))
                    }
                };
                self.pending.push_back(frame);
                self.events_sent += 1;
                self.after_events();
            }
            Line::Event(kind, object) if self.table.is_some() => {
                let mode = self.table.as_mut().expect("checked");
                let value = object.value(&mode.ty.kind, &mode.ty.gvr.api_version());
                let meta = json!({"resourceVersion": object.resource_version.to_string()});
                let table = table(&mode.ty, &[value], meta, mode.include, !mode.columns_sent);
                mode.columns_sent = true;
                let mut line = serde_json::to_vec(&json!({"type": kind.as_str(), "object": table}))
                    .expect("JSON values serialize");
                line.push(b'\n');
                self.pending.push_back(Bytes::from(line));
                self.events_sent += 1;
                self.after_events();
            }
            Line::Event(kind, object) => {
                let i = match kind {
                    EventType::Added => 0,
                    EventType::Modified => 1,
                    EventType::Deleted => 2,
                };
                self.pending.push_back(self.type_prefixes[i].clone());
                self.pending.push_back(match self.metadata_only {
                    true => super::metadata::tail(&object.body),
                    false => object.body_tail(),
                });
                self.pending.push_back(Bytes::from_static(b"}\n"));
                self.events_sent += 1;
                self.after_events();
            }
        }
    }

    async fn next_piece(&mut self) -> Option<Result<Bytes, io::Error>> {
        if self.events_sent == 0 && self.faults.any() {
            self.after_events(); // faults set to fire after 0 events
        }
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                return Some(Ok(chunk));
            }
            self.check_terminated();
            match self.mode {
                Mode::Done => return None,
                Mode::Abort => {
                    // Let hyper flush what it already has before the connection breaks:
                    // it writes out its buffer when the body has nothing ready.
                    for _ in 0..4 {
                        tokio::task::yield_now().await;
                    }
                    self.mode = Mode::Done;
                    return Some(Err(io::Error::other(
                        "fake-apiserver: watch connection dropped (injected fault or restart)",
                    )));
                }
                Mode::Silent => {
                    // Swallow everything until the server ends the watch for good.
                    match self.rx.recv().await {
                        Some(WatchMsg::Close { abort: true }) => self.mode = Mode::Abort,
                        Some(WatchMsg::Close { abort: false }) | None => self.mode = Mode::Done,
                        Some(_) => {}
                    }
                    continue;
                }
                Mode::Active => {}
            }
            let line = match self.initial.pop_front() {
                Some(line) => line,
                None => {
                    let msg = tokio::select! {
                        msg = self.rx.recv() => msg,
                        () = tokio::time::sleep_until(self.deadline) => {
                            self.mode = Mode::Done;
                            continue;
                        }
                    };
                    if let (Some(lag), Some(WatchMsg::Event(..) | WatchMsg::Bookmark(_))) =
                        (self.faults.lag, &msg)
                    {
                        tokio::time::sleep(lag).await;
                    }
                    match msg {
                        None => {
                            self.mode = Mode::Done;
                            continue;
                        }
                        Some(WatchMsg::Close { abort }) => {
                            self.mode = if abort { Mode::Abort } else { Mode::Done };
                            continue;
                        }
                        Some(WatchMsg::Bookmark(revision)) => Line::Bookmark(revision, false),
                        Some(WatchMsg::Event(kind, object)) => Line::Event(kind, object),
                    }
                }
            };
            self.push_line(line);
        }
    }

    /// A watch the server ended for falling behind ends cleanly, without the events still
    /// buffered for it (as kube-apiserver drops a terminated watcher's buffer): the client
    /// resumes from the last version it saw.
    fn check_terminated(&mut self) {
        if self.mode == Mode::Active && self.terminated.load(Ordering::Acquire) {
            self.mode = Mode::Done;
            self.initial.clear();
        }
    }

    /// Applies the faults due after `events_sent` events.
    fn after_events(&mut self) {
        let n = Some(self.events_sent);
        if self.faults.malformed_after == n {
            self.faults.malformed_after = None;
            self.pending.push_back(match self.protobuf {
                // A frame whose event is not a message: a field of wire type 7.
                Some(_) => Bytes::from_static(b"\0\0\0\x04\x0f\xff\xff\xff"),
                None => Bytes::from_static(b"{\"type\":\"MODIFIED\",\"object\":{\"kind\" oops}}\n"),
            });
        }
        if self.faults.unknown_after == n {
            self.faults.unknown_after = None;
            let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "injected unknown event type", "code": 500});
            self.pending.push_back(match &self.protobuf {
                Some(_) => protobuf::frame("EXPLODED", &protobuf::status(&status)),
                None => Bytes::from(format!("{{\"type\":\"EXPLODED\",\"object\":{status}}}\n")),
            });
        }
        if self.faults.drop_after == n {
            self.faults.drop_after = None;
            self.mode = Mode::Abort;
        }
        if self.faults.silent_after == n {
            self.faults.silent_after = None;
            self.mode = Mode::Silent;
        }
    }
}
