//! A watch response's lines decoded on the decoding threads, in parallel, in order.
//!
//! kube decodes each watch line in the task that polls the stream (the reflector's), so one
//! core decodes while the informer applies on another. Decoding a typed object costs far
//! more than applying it; here the reflector's task only cuts the body into lines, and the
//! lines that arrived together are decoded on the [decoding threads](super::decode_pool),
//! up to one batch per thread at once, their order kept; the body is read ahead while
//! batches decode (`decode_stream`). A lone line (the steady state of a quiet watch) goes
//! there too: every object a cache holds is allocated by the same few threads, which is
//! what keeps the memory of a churning cache from growing (see `decode_pool`).
//!
//! Lines are read as kube reads them: an error line (`Status`) becomes
//! `kube::Error::Api`, an incomplete last line is skipped, a connection cut mid-body ends the
//! stream (to be resumed) rather than failing it.

use std::io;

use futures_util::{AsyncBufRead, StreamExt};
use kube::{api::WatchEvent, core::Status};
use serde::de::DeserializeOwned;

use super::{
    WatchStream,
    batch::Batch,
    decode_stream::DecodeStream,
    skip_managed_fields::{Shape, SkipManagedFields},
};
use crate::protobuf::{self, ProtoKind};

/// How a watch body is laid out.
#[derive(Clone, Copy, Debug)]
pub(super) enum Format {
    /// JSON, one event per line; with `true`, `metadata.managedFields` passed over unbuilt.
    Json(bool),
    /// Protobuf frames (a 4-byte big-endian length, then a `WatchEvent`) of this kind.
    Protobuf(ProtoKind),
}

/// Decodes the watch `body` into events (see the module docs).
pub(super) fn decode_in_parallel<K>(
    body: impl AsyncBufRead + Send + Unpin + 'static,
    format: Format,
) -> WatchStream<K>
where
    K: DeserializeOwned + Send + 'static,
{
    DecodeStream::new(body, format).boxed()
}

pub(super) fn decode_frames<K: DeserializeOwned + 'static>(
    frames: &Batch,
    kind: ProtoKind,
) -> Vec<Result<WatchEvent<K>, kube::Error>> {
    frames
        .iter()
        .map(|frame| {
            protobuf::decode_watch_event(frame, kind).map_err(|e| kube::Error::Service(Box::new(e)))
        })
        .collect()
}

pub(super) fn decode_all<K: DeserializeOwned>(
    lines: &Batch,
    skip_managed_fields: bool,
) -> Vec<Result<WatchEvent<K>, kube::Error>> {
    lines
        .iter()
        .filter_map(|line| decode_line(line, skip_managed_fields))
        .collect()
}

/// `T` (of `shape`: an object, or an event or list of them) from JSON text, with the
/// objects' own `metadata.managedFields` passed over unbuilt when asked.
pub(super) fn from_json<T: DeserializeOwned>(
    text: &str,
    skip_managed_fields: bool,
    shape: Shape,
) -> serde_json::Result<T> {
    if !skip_managed_fields {
        return serde_json::from_str(text);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = T::deserialize(SkipManagedFields::new(&mut de, shape))?;
    de.end()?;
    Ok(value)
}

/// One line, as kube decodes it.
fn decode_line<K: DeserializeOwned>(
    line: &[u8],
    skip_managed_fields: bool,
) -> Option<Result<WatchEvent<K>, kube::Error>> {
    // Validating the line's UTF-8 once is cheaper than serde_json validating each string.
    let decoded = match std::str::from_utf8(line) {
        Ok(text) => from_json::<WatchEvent<K>>(text, skip_managed_fields, Shape::Envelope),
        // Not UTF-8: serde_json's own error says where.
        Err(_) => serde_json::from_slice::<WatchEvent<K>>(line),
    };
    match decoded {
        Ok(event) => Some(Ok(event)),
        // An incomplete line (the connection was cut): the watch is resumed from the last
        // version anyway.
        Err(error) if error.is_eof() => None,
        Err(error) => Some(Err(match status_line(line) {
            Some(status) => kube::Error::Api(status.boxed()),
            None => kube::Error::Service(Box::new(UndecodableLine::new(&error, line))),
        })),
    }
}

/// A line that is a `Status` (the server ended the stream with an error), not an event.
fn status_line(line: &[u8]) -> Option<Status> {
    #[derive(serde::Deserialize)]
    struct Kind {
        kind: Option<String>,
    }
    let kind = serde_json::from_slice::<Kind>(line).ok()?.kind?;
    (kind == "Status")
        .then(|| serde_json::from_slice::<Status>(line).ok())
        .flatten()
}

/// A watch line that could not be decoded into an event: what was wrong with it, and how it
/// began. The reflector reports it (wrapped in [`kube::Error::Service`]) and resumes the
/// watch from the last version it had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("undecodable watch event ({reason}); the line began: {prefix}")]
pub struct UndecodableLine {
    /// What was wrong: the decoder's message (unknown event type, missing field, bad JSON).
    pub reason: String,
    /// The first [`UndecodableLine::PREFIX`] characters of the line.
    pub prefix: String,
}

impl UndecodableLine {
    /// How much of the line is kept.
    pub const PREFIX: usize = 200;

    fn new(error: &serde_json::Error, line: &[u8]) -> Self {
        let text = String::from_utf8_lossy(line);
        let mut prefix: String = text.chars().take(Self::PREFIX).collect();
        if text.chars().count() > Self::PREFIX {
            prefix.push('…');
        }
        Self {
            reason: error.to_string(),
            prefix,
        }
    }
}

/// A read error: a connection cut mid-body or a client timeout ends the stream quietly
/// (the reflector resumes the watch), anything else is reported.
pub(super) fn read_error<K>(error: io::Error) -> Option<Result<WatchEvent<K>, kube::Error>> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    for _ in 0..16 {
        let Some(current) = source else { break };
        if let Some(io) = current.downcast_ref::<io::Error>()
            && matches!(
                io.kind(),
                io::ErrorKind::UnexpectedEof | io::ErrorKind::TimedOut
            )
        {
            tracing::debug!(%error, "watch connection ended");
            return None;
        }
        if current.to_string().contains("unexpected EOF during chunk") {
            tracing::debug!(%error, "watch connection ended");
            return None;
        }
        source = current.source();
    }
    Some(Err(kube::Error::ReadEvents(error)))
}

#[cfg(test)]
mod tests {
    use futures_util::io::Cursor;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn cm(kind: &str, name: &str) -> String {
        format!(
            r#"{{"type":"{kind}","object":{{"metadata":{{"name":"{name}","resourceVersion":"1"}}}}}}"#
        )
    }

    async fn events(body: String) -> Vec<String> {
        let stream =
            decode_in_parallel::<ConfigMap>(Cursor::new(body.into_bytes()), Format::Json(false));
        stream
            .map(|event| match event {
                Ok(WatchEvent::Added(c)) => format!("added {}", c.metadata.name.unwrap()),
                Ok(WatchEvent::Modified(c)) => format!("modified {}", c.metadata.name.unwrap()),
                Ok(WatchEvent::Deleted(c)) => format!("deleted {}", c.metadata.name.unwrap()),
                Ok(WatchEvent::Bookmark(b)) => format!("bookmark {}", b.metadata.resource_version),
                Ok(WatchEvent::Error(s)) => format!("error event {}", s.code),
                Err(kube::Error::Api(s)) => format!("api error {}", s.code),
                Err(e) => format!("error {e}"),
            })
            .collect()
            .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_lines_keep_their_order_across_parallel_batches() {
        let names: Vec<String> = (0..5000).map(|i| format!("cm-{i}")).collect();
        let body: String = names.iter().map(|n| cm("ADDED", n) + "\n").collect();
        let expected: Vec<String> = names.iter().map(|n| format!("added {n}")).collect();
        assert_eq!(events(body).await, expected);
    }

    async fn events_then(error: io::ErrorKind) -> Vec<String> {
        use futures_util::TryStreamExt;
        let chunks: Vec<io::Result<Vec<u8>>> = vec![
            Ok(format!("{}\n{}", cm("ADDED", "a"), &cm("ADDED", "b")[..10]).into_bytes()),
            Err(io::Error::new(error, "connection cut")),
            Ok(b"never read".to_vec()),
        ];
        let body = futures_util::stream::iter(chunks).into_async_read();
        decode_in_parallel::<ConfigMap>(body, Format::Json(false))
            .map(|event| match event {
                Ok(WatchEvent::Added(c)) => format!("added {}", c.metadata.name.unwrap()),
                Ok(other) => format!("{other:?}"),
                Err(e) => format!("error {e}"),
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn a_cut_connection_ends_the_stream_and_other_read_errors_are_reported() {
        assert_eq!(events_then(io::ErrorKind::UnexpectedEof).await, ["added a"]);
        let seen = events_then(io::ErrorKind::ConnectionReset).await;
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0], "added a");
        assert!(seen[1].starts_with("error"), "{seen:?}");
    }

    #[tokio::test]
    async fn lines_read_as_kube_reads_them() {
        let body = [
            cm("ADDED", "a"),
            String::new(),
            cm("MODIFIED", "a"),
            r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}"#.into(),
            r#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#.into(),
            r#"{"kind":"Status","code":500,"message":"boom"}"#.into(),
            "not json".into(),
            cm("DELETED", "a"),
            r#"{"type":"ADDED","object":{"metadata":"#.into(), // cut: skipped
        ]
        .join("\n");
        let seen = events(body).await;
        assert_eq!(
            seen[..5],
            [
                "added a",
                "modified a",
                "bookmark 9",
                "error event 410",
                "api error 500"
            ]
        );
        assert!(seen[5].starts_with("error"), "{seen:?}");
        assert_eq!(seen[6..], ["deleted a"]);
    }

    /// An unknown event type or a bookmark without a version is not a `Status` with code 0:
    /// the error says what was wrong and shows the line.
    #[tokio::test]
    async fn undecodable_lines_say_what_was_wrong_and_how_they_began() {
        let body = [
            r#"{"type":"EXPLODED","object":{"metadata":{"name":"x"}}}"#,
            r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{}}}"#,
            r#"{"kind":"Status","code":500,"message":"boom"}"#,
        ]
        .join("\n");
        let seen: Vec<String> =
            decode_in_parallel::<ConfigMap>(Cursor::new(body.into_bytes()), Format::Json(false))
                .map(|event| match event {
                    Err(kube::Error::Service(e)) => match e.downcast_ref::<UndecodableLine>() {
                        Some(line) => format!("undecodable {} | {}", line.reason, line.prefix),
                        None => format!("other {e}"),
                    },
                    Err(kube::Error::Api(s)) => format!("api error {}", s.code),
                    other => format!("{other:?}"),
                })
                .collect()
                .await;
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(
            seen[0].contains("unknown variant `EXPLODED`"),
            "{}",
            seen[0]
        );
        assert!(seen[0].ends_with(r#"| {"type":"EXPLODED","object":{"metadata":{"name":"x"}}}"#));
        assert!(seen[1].contains("resourceVersion"), "{}", seen[1]);
        assert_eq!(seen[2], "api error 500");
    }

    #[tokio::test]
    async fn protobuf_frames_that_do_not_decode_or_claim_too_much_are_errors_in_order() {
        let kind = ProtoKind::of_type::<ConfigMap>().unwrap();
        // A frame of three bytes that are no WatchEvent, then a header claiming 4 GiB.
        let mut body = 3u32.to_be_bytes().to_vec();
        body.extend_from_slice(b"abc");
        body.extend_from_slice(&u32::MAX.to_be_bytes());
        let seen: Vec<String> =
            decode_in_parallel::<ConfigMap>(Cursor::new(body), Format::Protobuf(kind))
                .map(|event| match event {
                    Ok(_) => "event".to_owned(),
                    Err(kube::Error::Service(error)) => format!("undecodable: {error}"),
                    Err(kube::Error::ReadEvents(error)) => format!("read: {error}"),
                    Err(other) => format!("other: {other}"),
                })
                .collect()
                .await;
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen[0].starts_with("undecodable: at byte"), "{seen:?}");
        assert!(
            seen[1].starts_with("read: ") && seen[1].contains("over the limit"),
            "{seen:?}"
        );
        // A frame cut by the end of the body is dropped (the watch resumes), not an error.
        let mut cut = 10u32.to_be_bytes().to_vec();
        cut.extend_from_slice(b"abc");
        let events: Vec<_> =
            decode_in_parallel::<ConfigMap>(Cursor::new(cut), Format::Protobuf(kind))
                .collect()
                .await;
        assert!(events.is_empty(), "{events:?}");
    }
}
