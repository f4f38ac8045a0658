//! Prometheus metrics for reflectors (feature `metrics`).
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `reflector_lists_total` | counter | name | LIST syncs attempted |
//! | `reflector_list_duration_seconds` | histogram | name | how long a successful LIST sync took |
//! | `reflector_list_items` | histogram | name | objects per successful LIST sync |
//! | `reflector_watches_total` | counter | name | watches opened (streaming lists included) |
//! | `reflector_watch_restarts_total` | counter | name, reason | why watches ended: `closed`, `gone`, `too_large`, `error`, `idle` |
//! | `reflector_last_resource_version` | gauge | name | the last synced resourceVersion (when numeric) |
//! | `reflector_last_sync_timestamp_seconds` | gauge | name | when the cache was last known in step with the server (a LIST, a watch event or bookmark), in Unix seconds: its age is `time() - reflector_last_sync_timestamp_seconds` |
//! | `reflector_held_back_seconds_total` | counter | name | time spent not reading the watch because the informer's queue was full (backpressure) |
//! | `reflector_shard_unconfirmed_total` | counter | name | LIST pages that did not echo the shard selector (`shardInfo`), and streaming lists (which never do): a server without the `ShardedListAndWatch` gate, or kube-apiserver 1.36 answering for a custom resource or metadata only, which it filters without saying so; the reflector filters either way |
//! | `reflector_shard_filtered_objects_total` | counter | name | objects the server sent outside the shard selector, dropped by the reflector: above zero, the server ignores `shardSelector` and each replica receives the whole collection |
//! | `reflector_shard_changes_total` | counter | name, listed | changes of a live share, by what was listed for them: `moved` (only the ranges gained, at the version the cache was at; `moved` also when nothing was gained and nothing listed), `all` (the whole new share: a cache that holds no known share, as before its first sync or after such a relist was cut short; a share over another field; a sink that cannot replace a part; a LIST of the part that failed or got 410). A share that was empty is listed whole and not counted |
//! | `reflector_failures_total` | counter | name, cause | every failure reported to the error handler: the server's status code (`429`, `503`, ...) or `connection`, `timeout`, `idle`, `early_end`, ... |

use std::sync::atomic::AtomicU64;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
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
struct NameReason {
    name: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameListed {
    name: String,
    listed: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameCause {
    name: String,
    cause: String,
}

type Histograms = Family<Name, Histogram, fn() -> Histogram>;

/// The metrics of any number of reflectors, registered once; give it to each reflector
/// with [`ReflectorOptions::metrics`](super::ReflectorOptions::metrics).
#[derive(Clone)]
pub struct ReflectorMetrics {
    lists: Family<Name, Counter>,
    list_duration: Histograms,
    list_items: Histograms,
    watches: Family<Name, Counter>,
    watch_restarts: Family<NameReason, Counter>,
    last_resource_version: Family<Name, Gauge>,
    last_sync: Family<Name, Gauge<f64, AtomicU64>>,
    failures: Family<NameCause, Counter>,
    held_back: Family<Name, Counter<f64, AtomicU64>>,
    shard_unconfirmed: Family<Name, Counter>,
    shard_filtered: Family<Name, Counter>,
    shard_changes: Family<NameListed, Counter>,
}

impl std::fmt::Debug for ReflectorMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReflectorMetrics").finish_non_exhaustive()
    }
}

impl ReflectorMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        fn seconds() -> Histogram {
            Histogram::new(exponential_buckets(0.005, 2.0, 14))
        }
        fn items() -> Histogram {
            Histogram::new(exponential_buckets(1.0, 4.0, 12))
        }
        let m = Self {
            lists: Family::default(),
            list_duration: Family::new_with_constructor(seconds),
            list_items: Family::new_with_constructor(items),
            watches: Family::default(),
            watch_restarts: Family::default(),
            last_resource_version: Family::default(),
            last_sync: Family::default(),
            failures: Family::default(),
            held_back: Family::default(),
            shard_unconfirmed: Family::default(),
            shard_filtered: Family::default(),
            shard_changes: Family::default(),
        };
        registry.register("reflector_lists", "LIST syncs attempted", m.lists.clone());
        registry.register(
            "reflector_list_duration_seconds",
            "How long a successful LIST sync took",
            m.list_duration.clone(),
        );
        registry.register(
            "reflector_list_items",
            "Objects per successful LIST sync",
            m.list_items.clone(),
        );
        registry.register("reflector_watches", "Watches opened", m.watches.clone());
        registry.register(
            "reflector_watch_restarts",
            "Why watches ended",
            m.watch_restarts.clone(),
        );
        registry.register(
            "reflector_last_resource_version",
            "The last synced resourceVersion",
            m.last_resource_version.clone(),
        );
        registry.register(
            "reflector_last_sync_timestamp_seconds",
            "When the cache was last known in step with the server, in Unix seconds",
            m.last_sync.clone(),
        );
        registry.register(
            "reflector_held_back_seconds",
            "Time not reading the watch because the informer's queue was full",
            m.held_back.clone(),
        );
        registry.register(
            "reflector_failures",
            "Failures reported to the error handler, by status code or cause",
            m.failures.clone(),
        );
        registry.register(
            "reflector_shard_unconfirmed",
            "LIST pages that did not echo the shard selector, and streaming lists",
            m.shard_unconfirmed.clone(),
        );
        registry.register(
            "reflector_shard_filtered_objects",
            "Objects outside the shard selector the server sent, dropped by the reflector",
            m.shard_filtered.clone(),
        );
        registry.register(
            "reflector_shard_changes",
            "Changes of a live shard share, by what was listed: only the moved ranges, or all",
            m.shard_changes.clone(),
        );
        m
    }

    fn name(name: &str) -> Name {
        Name {
            name: name.to_owned(),
        }
    }

    pub(super) fn list_started(&self, name: &str) {
        self.lists.get_or_create(&Self::name(name)).inc();
    }

    pub(super) fn list_done(&self, name: &str, seconds: f64, items: usize) {
        let label = Self::name(name);
        self.list_duration.get_or_create(&label).observe(seconds);
        self.list_items.get_or_create(&label).observe(items as f64);
    }

    pub(super) fn watch_started(&self, name: &str) {
        self.watches.get_or_create(&Self::name(name)).inc();
    }

    pub(super) fn watch_ended(&self, name: &str, reason: &'static str) {
        let label = NameReason {
            name: name.to_owned(),
            reason,
        };
        self.watch_restarts.get_or_create(&label).inc();
    }

    pub(super) fn held_back(&self, name: &str, seconds: f64) {
        self.held_back
            .get_or_create(&Self::name(name))
            .inc_by(seconds);
    }

    pub(super) fn shard_unconfirmed(&self, name: &str) {
        self.shard_unconfirmed
            .get_or_create(&Self::name(name))
            .inc();
    }

    pub(super) fn shard_filtered(&self, name: &str, objects: u64) {
        self.shard_filtered
            .get_or_create(&Self::name(name))
            .inc_by(objects);
    }

    pub(super) fn shard_changed(&self, name: &str, listed: &'static str) {
        let label = NameListed {
            name: name.to_owned(),
            listed,
        };
        self.shard_changes.get_or_create(&label).inc();
    }

    pub(super) fn failed(&self, name: &str, cause: String) {
        let label = NameCause {
            name: name.to_owned(),
            cause,
        };
        self.failures.get_or_create(&label).inc();
    }

    /// The reflector `name`'s sync gauges, looked up once: they are set on every event.
    pub(super) fn sync_gauges(&self, name: &str) -> SyncGauges {
        let label = Self::name(name);
        SyncGauges {
            resource_version: self.last_resource_version.get_or_create(&label).clone(),
            at: self.last_sync.get_or_create(&label).clone(),
        }
    }
}

/// One reflector's `reflector_last_resource_version` and
/// `reflector_last_sync_timestamp_seconds`.
#[derive(Clone)]
pub(super) struct SyncGauges {
    resource_version: Gauge,
    at: Gauge<f64, AtomicU64>,
}

impl SyncGauges {
    /// The cache is in step with the server at `resource_version`, now.
    pub(super) fn synced(&self, resource_version: &str) {
        if let Some(rv) = crate::resource_version::gauge_value(resource_version) {
            self.resource_version.set(rv);
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        self.at.set(now.map_or(0.0, |d| d.as_secs_f64()));
    }
}
