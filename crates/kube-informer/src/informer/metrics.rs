//! Prometheus metrics for informers (feature `metrics`).
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `informer_fifo_depth` | gauge | name | entries waiting in the FIFO |
//! | `informer_processing_seconds` | histogram | name | time to apply a popped batch and hand it to the listeners |
//! | `informer_store_resource_version` | gauge | name | the resourceVersion the cache was last synced to (when numeric) |
//! | `informer_handler_backlog` | gauge | name, handler | notifications waiting for each handler |
//! | `informer_handler_set_aside` | gauge | name, handler | 1 while a handler that stayed behind past its grace period no longer holds the informer back (see [`HandlerOptions`](super::HandlerOptions)) |
//! | `informer_staleness_seconds` | gauge | name | how long the cache has been missing something the server had, read when scraped (see [`Staleness`](super::Staleness)) |
//! | `informer_staleness_resource_versions` | gauge | name | resourceVersions between the newest the informer heard of and the cache's (when comparable) |

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        MetricType,
        family::Family,
        gauge::{ConstGauge, Gauge},
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

use super::Staleness;

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
    stale: Arc<Mutex<Vec<Tracked>>>,
}

/// What can say how stale its cache is: an informer.
pub(super) trait StaleCache: Send + Sync {
    fn staleness(&self) -> Staleness;
}

/// An informer whose staleness is read at scrape time, while it lives.
struct Tracked {
    name: String,
    cache: Weak<dyn StaleCache>,
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
            stale: Arc::default(),
        };
        registry.register_collector(Box::new(StalenessCollector(m.stale.clone())));
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

    /// Reports `cache`'s staleness under `name` for as long as it lives.
    pub(super) fn track_staleness(&self, name: &str, cache: Weak<dyn StaleCache>) {
        let mut tracked = self.stale.lock();
        tracked.retain(|t| t.cache.strong_count() > 0);
        tracked.push(Tracked {
            name: name.to_owned(),
            cache,
        });
    }
}

/// `informer_staleness_seconds` and `informer_staleness_resource_versions`, read from the
/// living informers when scraped: staleness grows while nothing happens, so no event could
/// set it. Informers sharing a name report the most stale one.
#[derive(Debug)]
struct StalenessCollector(Arc<Mutex<Vec<Tracked>>>);

impl std::fmt::Debug for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracked").field("name", &self.name).finish()
    }
}

impl Collector for StalenessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut worst: std::collections::BTreeMap<String, Staleness> = Default::default();
        for tracked in self.0.lock().iter() {
            let Some(cache) = tracked.cache.upgrade() else {
                continue;
            };
            let now = cache.staleness();
            let entry = worst
                .entry(tracked.name.clone())
                .or_insert(Staleness::LEVEL);
            *entry = entry.worse(now);
        }
        let mut seconds = encoder.encode_descriptor(
            "informer_staleness_seconds",
            "How long the cache has been missing something the server had",
            None,
            MetricType::Gauge,
        )?;
        for (name, staleness) in &worst {
            let gauge = ConstGauge::new(staleness.behind.as_secs_f64());
            gauge.encode(seconds.encode_family(&Name { name: name.clone() })?)?;
        }
        let mut versions = encoder.encode_descriptor(
            "informer_staleness_resource_versions",
            "ResourceVersions between the newest heard of and the cache's",
            None,
            MetricType::Gauge,
        )?;
        for (name, staleness) in &worst {
            let Some(behind) = staleness.versions_behind else {
                continue;
            };
            let gauge = ConstGauge::new(i64::try_from(behind).unwrap_or(i64::MAX));
            gauge.encode(versions.encode_family(&Name { name: name.clone() })?)?;
        }
        Ok(())
    }
}
