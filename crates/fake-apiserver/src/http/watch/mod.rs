//! WATCH: newline-delimited JSON events, replay from a resourceVersion, bookmarks, streaming
//! lists, timeouts, and the injected watch faults.
//!
//! - `frame`: the lines of a stream, the shapes of its events, ERROR and BOOKMARK events;
//! - `state`: one stream's state, which turns its lines into body chunks.

mod frame;
mod state;

use std::{
    collections::VecDeque,
    sync::{Arc, atomic::AtomicBool},
    time::Duration,
};

use bytes::Bytes;
use tokio::{sync::mpsc, time::Instant};

pub(crate) use self::frame::Shape;
use self::{
    frame::{Line, ProtoWatch, TableMode, error_event},
    state::{Mode, WatchState},
};
use crate::{
    Inner,
    faults::WatchFaults,
    http::{Params, response::Reply},
    protobuf::{self, Format},
    registry::Gvr,
    selector::Filter,
    status::ApiError,
    storage::{EventType, StoredObject, Watcher, transition},
};

/// A stream that sends only an ERROR event (how a watch reports 410 and friends).
pub(crate) fn error_stream(err: &ApiError, format: Format) -> Reply {
    let event = error_event(&err.body, format);
    let mut reply = Reply::stream(200, futures_util::stream::iter([Ok(event)]));
    if format.is_protobuf() {
        reply.content_type = protobuf::WATCH_CONTENT_TYPE;
    }
    reply
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
        Shape::Metadata => Bytes::from_static(crate::http::metadata::PREFIX.as_bytes()),
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
                    crate::http::metadata::API_VERSION,
                    "PartialObjectMetadata",
                )
                .expect("PartialObjectMetadata in the schema"),
                api_version: crate::http::metadata::API_VERSION.to_owned(),
                kind: "PartialObjectMetadata".to_owned(),
                metadata_only: true,
            }),
            _ => None,
        },
        sent_up_to: match (send_initial == Some(true), requested) {
            (false, Some(rv)) => rv,
            _ => current,
        },
        closing_bookmark: {
            let closing = timeout
                .checked_sub(Duration::from_secs(2))
                .filter(|_| bookmarks);
            let server = Arc::downgrade(inner);
            closing.map(|before| {
                let read: state::ClosingRevision = Box::new(move |queued| {
                    let Some(server) = server.upgrade() else {
                        return state::Closing::Gone;
                    };
                    // Events are queued under this lock: none can be on its way meanwhile.
                    let storage = server.storage.lock();
                    match queued.is_empty() {
                        true => state::Closing::Send(storage.revision()),
                        false => state::Closing::Later,
                    }
                });
                (Instant::now() + before, read)
            })
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
