//! Where events are written: the API server (`events.k8s.io/v1`), or memory for tests.

use futures_util::future::BoxFuture;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// Writes events. Implemented for `kube::Client` (events.k8s.io/v1, in the event's
/// namespace) and, with the feature `testing`, `MemoryEvents`.
pub trait EventSink: Send + Sync + 'static {
    /// Creates `event`.
    fn create<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, Result<(), kube::Error>>;
    /// Sets the series of the existing event (404 if it is gone).
    fn patch_series<'a>(
        &'a self,
        event: &'a Event,
        series: &'a EventSeries,
    ) -> BoxFuture<'a, Result<(), kube::Error>>;
}

fn namespace(event: &Event) -> &str {
    event.metadata.namespace.as_deref().unwrap_or("default")
}

/// A shared sink (e.g. a `MemoryEvents` the test reads back).
impl<T: EventSink + ?Sized> EventSink for std::sync::Arc<T> {
    fn create<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, Result<(), kube::Error>> {
        (**self).create(event)
    }

    fn patch_series<'a>(
        &'a self,
        event: &'a Event,
        series: &'a EventSeries,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        (**self).patch_series(event, series)
    }
}

impl EventSink for kube::Client {
    fn create<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, Result<(), kube::Error>> {
        Box::pin(async move {
            let api: Api<Event> = Api::namespaced(self.clone(), namespace(event));
            api.create(&PostParams::default(), event).await.map(|_| ())
        })
    }

    fn patch_series<'a>(
        &'a self,
        event: &'a Event,
        series: &'a EventSeries,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        Box::pin(async move {
            let api: Api<Event> = Api::namespaced(self.clone(), namespace(event));
            let name = event.metadata.name.as_deref().unwrap_or_default();
            let patch = json!({"series": series});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
        })
    }
}
