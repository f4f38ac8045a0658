//! The state of one watch stream: its lines still to send, its timeout, the injected faults,
//! and how each line is written in the watch's shape.

use std::{
    collections::VecDeque,
    io,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use bytes::{Bytes, BytesMut};
use serde_json::json;
use tokio::{sync::mpsc, time::Instant};

use super::frame::{Line, ProtoWatch, TableMode, bookmark, error_event};
use crate::{
    faults::WatchFaults,
    http::table::table,
    protobuf::{self, Format},
    storage::{EventType, WatchMsg},
};

/// The most bytes joined into one body chunk.
const COALESCE: usize = 64 * 1024;

#[derive(PartialEq)]
pub(super) enum Mode {
    Active,
    /// Injected: the connection stays open, nothing is sent.
    Silent,
    /// End the stream with an error (the connection breaks).
    Abort,
    Done,
}

pub(super) struct WatchState {
    /// `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1",` per event type.
    pub(super) type_prefixes: [Bytes; 3],
    pub(super) object_prefix: Bytes,
    pub(super) pending: VecDeque<Bytes>,
    pub(super) initial: VecDeque<Line>,
    pub(super) rx: mpsc::Receiver<WatchMsg>,
    /// Set by the server when this client fell too far behind: end without the rest.
    pub(super) terminated: Arc<AtomicBool>,
    pub(super) deadline: Instant,
    pub(super) faults: WatchFaults,
    pub(super) events_sent: usize,
    pub(super) mode: Mode,
    /// Events as one-row Tables (`kubectl get -w`).
    pub(super) table: Option<TableMode>,
    /// Events' objects as `PartialObjectMetadata`.
    pub(super) metadata_only: bool,
    /// Events as protobuf frames.
    pub(super) protobuf: Option<ProtoWatch>,
    /// A watch with bookmarks gets one two seconds before its deadline, at the server's
    /// current revision, as kube-apiserver's watch cache sends it (`nextBookmarkTime`):
    /// when, and how to read the revision then.
    pub(super) closing_bookmark: Option<(Instant, ClosingRevision)>,
    /// The newest revision this watch started from or sent (an event's, a bookmark's):
    /// kube-apiserver sends a bookmark only past it.
    pub(super) sent_up_to: u64,
}

/// Reads the server's revision when the closing bookmark is due, given the watch's queue:
/// under the storage lock, so no event at or below it can still be on its way.
pub(super) type ClosingRevision = Box<dyn Fn(&mpsc::Receiver<WatchMsg>) -> Closing + Send>;

/// What to do about the closing bookmark.
pub(super) enum Closing {
    /// Send it at this revision.
    Send(u64),
    /// Events are queued: send them first.
    Later,
    /// The server is gone.
    Gone,
}

impl WatchState {
    /// The next piece of the body: whatever is ready, joined into one buffer of up to
    /// [`COALESCE`] bytes (one write instead of three per event).
    pub(super) async fn next_chunk(&mut self) -> Option<Result<Bytes, io::Error>> {
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
        self.sent_up_to = self.sent_up_to.max(match &line {
            Line::Bookmark(revision, _) => *revision,
            Line::Event(_, object) => object.resource_version,
        });
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
                    true => crate::http::metadata::message_bytes(&object.body).map(Bytes::from),
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
                    true => crate::http::metadata::tail(&object.body),
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
                    let closing_at = self.closing_bookmark.as_ref().map(|(at, _)| *at);
                    // The deadline first (the events still queued are replayed by the
                    // client's next watch), then queued events: the closing bookmark never
                    // overtakes them.
                    let msg = tokio::select! {
                        biased;
                        () = tokio::time::sleep_until(self.deadline) => {
                            self.mode = Mode::Done;
                            continue;
                        }
                        msg = self.rx.recv() => msg,
                        () = tokio::time::sleep_until(closing_at.unwrap_or(self.deadline)), if closing_at.is_some() => {
                            match self.closing_bookmark.as_ref().map(|(_, read)| read(&self.rx)) {
                                Some(Closing::Send(revision)) if revision > self.sent_up_to => {
                                    self.closing_bookmark = None;
                                    Some(WatchMsg::Bookmark(revision))
                                }
                                // Nothing past what the watch has: the real server drops it.
                                Some(Closing::Send(_)) => {
                                    self.closing_bookmark = None;
                                    continue;
                                }
                                // An event came in meanwhile: send it, then try again.
                                Some(Closing::Later) => continue,
                                Some(Closing::Gone) | None => {
                                    self.closing_bookmark = None;
                                    continue;
                                }
                            }
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
