//! Prometheus metrics for informers (feature `metrics`).
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `informer_fifo_depth` | gauge | name | entries waiting in the FIFO |
//! | `informer_processing_seconds` | histogram | name | time to apply a popped batch and hand it to the listeners |
//! | `informer_store_resource_version` | gauge | name | the resourceVersion the cache was last synced to (when numeric) |
//! | `informer_handler_backlog` | gauge | name, handler | notifications waiting for each handler |
//! | `informer_handler_set_aside` | gauge | name, handler | 1 while a handler that stayed behind past its grace period no longer holds the informer back (see [`HandlerOptions`](super::HandlerOptions)) |

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Name {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Handler {
    name: String,
    handler: String,
}

/// The metrics of any number of informers, registered once; give it to each with
/// [`InformerOptions::metrics`](super::InformerOptions::metrics).
#[derive(Clone)]
pub struct InformerMetrics {
    depth: Family<Name, Gauge>,
    processing: Family<Name, Histogram, fn() -> Histogram>,
    resource_version: Family<Name, Gauge>,
    backlog: Family<Handler, Gauge>,
    set_aside: Family<Handler, Gauge>,
}

impl std::fmt::Debug for InformerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerMetrics").finish_non_exhaustive()
    }
}

impl InformerMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        fn seconds() -> Histogram {
            Histogram::new(exponential_buckets(1e-6, 4.0, 12))
        }
        let m = Self {
            depth: Family::default(),
            processing: Family::new_with_constructor(seconds),
            resource_version: Family::default(),
            backlog: Family::default(),
            set_aside: Family::default(),
        };
        registry.register(
            "informer_fifo_depth",
            "Entries waiting in the FIFO",
            m.depth.clone(),
        );
        registry.register(
            "informer_processing_seconds",
            "Time to apply a popped batch and hand it to the listeners",
            m.processing.clone(),
        );
        registry.register(
            "informer_store_resource_version",
            "The resourceVersion the cache was last synced to",
            m.resource_version.clone(),
        );
        registry.register(
            "informer_handler_backlog",
            "Notifications waiting for each handler",
            m.backlog.clone(),
        );
        registry.register(
            "informer_handler_set_aside",
            "1 while a handler that stayed behind no longer holds the informer back",
            m.set_aside.clone(),
        );
        m
    }

    pub(super) fn batch_done(
        &self,
        name: &str,
        depth: usize,
        seconds: f64,
        resource_version: &str,
    ) {
        let label = Name {
            name: name.to_owned(),
        };
        self.depth
            .get_or_create(&label)
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
        self.processing.get_or_create(&label).observe(seconds);
        if let Some(rv) = crate::resource_version::gauge_value(resource_version) {
            self.resource_version.get_or_create(&label).set(rv);
        }
    }

    pub(super) fn backlog(&self, name: &str, handler: &str, backlog: usize) {
        let label = Handler {
            name: name.to_owned(),
            handler: handler.to_owned(),
        };
        self.backlog
            .get_or_create(&label)
            .set(i64::try_from(backlog).unwrap_or(i64::MAX));
    }

    pub(super) fn set_aside(&self, name: &str, handler: &str, set_aside: bool) {
        let label = Handler {
            name: name.to_owned(),
            handler: handler.to_owned(),
        };
        self.set_aside
            .get_or_create(&label)
            .set(i64::from(set_aside));
    }
}
