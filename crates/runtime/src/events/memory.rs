//! [`MemoryEvents`]: events kept in memory, for tests (feature `testing`).

use futures_util::future::BoxFuture;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use parking_lot::Mutex;

use super::EventSink;

/// Events kept in memory, for tests: every create and series patch, in order.
#[derive(Debug, Default)]
pub struct MemoryEvents {
    writes: Mutex<Vec<Written>>,
}

/// One write a [`MemoryEvents`] received.
#[derive(Debug, Clone)]
pub enum Written {
    /// An event was created.
    Created(Box<Event>),
    /// An event's series was set.
    Series {
        /// The event's name.
        name: String,
        /// Its series.
        series: EventSeries,
    },
}

impl MemoryEvents {
    /// Every write so far.
    pub fn writes(&self) -> Vec<Written> {
        self.writes.lock().clone()
    }
}

impl EventSink for MemoryEvents {
    fn create<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, Result<(), kube::Error>> {
        self.writes
            .lock()
            .push(Written::Created(Box::new(event.clone())));
        Box::pin(async { Ok(()) })
    }

    fn patch_series<'a>(
        &'a self,
        event: &'a Event,
        series: &'a EventSeries,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        self.writes.lock().push(Written::Series {
            name: event.metadata.name.clone().unwrap_or_default(),
            series: series.clone(),
        });
        Box::pin(async { Ok(()) })
    }
}
