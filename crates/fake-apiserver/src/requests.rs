//! The request log: what clients asked for, so tests can assert it (how many LISTs, at which
//! resourceVersion, ...).

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use parking_lot::Mutex;

use crate::faults::Verb;

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, e.g. `/api/v1/namespaces/default/pods`.
    pub path: String,
    /// The query parameters, decoded.
    pub query: BTreeMap<String, String>,
    /// The verb, for resource requests (`None` for discovery and other paths).
    pub verb: Option<Verb>,
    /// The resource (plural) a resource request was for.
    pub resource: Option<String>,
    /// The HTTP status answered.
    pub status: u16,
    /// Body bytes sent so far (final once a streamed response has ended).
    pub bytes: u64,
}

impl RequestRecord {
    /// A query parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }
}

struct Entry {
    record: RequestRecord,
    bytes: Arc<AtomicU64>,
}

#[derive(Default)]
pub(crate) struct RequestLog {
    entries: Mutex<Vec<Entry>>,
}

impl RequestLog {
    /// Records a request; returns the counter its body bytes are added to.
    pub(crate) fn push(&self, record: RequestRecord) -> Arc<AtomicU64> {
        let bytes = Arc::new(AtomicU64::new(record.bytes));
        self.entries.lock().push(Entry {
            record,
            bytes: bytes.clone(),
        });
        bytes
    }

    pub(crate) fn snapshot(&self) -> Vec<RequestRecord> {
        let entries = self.entries.lock();
        entries
            .iter()
            .map(|e| RequestRecord {
                bytes: e.bytes.load(Ordering::Relaxed),
                ..e.record.clone()
            })
            .collect()
    }

    pub(crate) fn clear(&self) {
        self.entries.lock().clear();
    }
}
