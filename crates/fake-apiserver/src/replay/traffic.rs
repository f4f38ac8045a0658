//! The traffic a replay server answers, rendered once: the listed objects and the events
//! after them, in JSON and, when asked for, in protobuf.

use std::io;

use bytes::Bytes;

use crate::protobuf;

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

/// What a [`ReplayServer`](super::ReplayServer) answers.
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
    pub(super) fn page(&self, offset: usize, limit: Option<usize>) -> Bytes {
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
    pub(super) fn protobuf_page(
        &self,
        proto: &ProtoTraffic,
        offset: usize,
        limit: Option<usize>,
    ) -> Bytes {
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
    pub(super) fn events_after(&self, resource_version: u64) -> usize {
        self.events
            .partition_point(|e| e.resource_version <= resource_version)
    }
}

/// The traffic in protobuf: each listed object's message, each event's whole frame.
#[derive(Debug)]
pub(super) struct ProtoTraffic {
    pub(super) objects: Vec<Bytes>,
    pub(super) events: Vec<Bytes>,
    pub(super) message: &'static kube_protobuf_schema::Message,
    pub(super) kind: String,
}

impl ProtoTraffic {
    pub(super) fn render(traffic: &Traffic) -> io::Result<Self> {
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
