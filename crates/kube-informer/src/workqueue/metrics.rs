//! Prometheus metrics for work queues, named as client-go names them.
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `workqueue_depth` | gauge | items waiting in the queue |
//! | `workqueue_lane_depth` | gauge | items waiting, by `lane`: `live` (changes) and `backlog` (initial lists, resyncs: [`add_low_priority`](super::Queue::add_low_priority)) |
//! | `workqueue_adds_total` | counter | items added |
//! | `workqueue_queue_duration_seconds` | histogram | time an item waited before a worker took it |
//! | `workqueue_work_duration_seconds` | histogram | time a worker held an item |
//! | `workqueue_unfinished_work_seconds` | gauge | summed age of the items being processed now |
//! | `workqueue_longest_running_processor_seconds` | gauge | age of the oldest item being processed now |
//! | `workqueue_retries_total` | counter | delayed and rate-limited re-adds |
//! | `workqueue_workers` | gauge | workers taking items, when [scaled](super::WorkerScaling) |
//! | `workqueue_worker_changes_total` | counter | scalings, by `direction` (`up`, `down`) |
//! | `workqueue_group_depth` | gauge | items queued, per fairness `group` |
//! | `workqueue_group_in_flight` | gauge | items held by workers, per fairness `group` |
//! | `workqueue_group_longest_wait_seconds` | gauge | wait of a group's oldest queued item |
//!
//! Each carries a `name` label (the queue's name). The in-flight and per-group gauges are
//! computed when the registry is scraped, so they are exact and need no background ticker.
//! The per-group gauges exist for queues [fair by a group](super::QueueConfig::fair_by):
//! the [`TOP_GROUPS`] groups with the most items queued and held are named, the rest are
//! summed into one group named `other` (its wait is their longest), so a queue fair by
//! namespace in a cluster of thousands of namespaces exports at most 11 series per gauge.

use std::{
    collections::HashMap,
    sync::{Arc, Weak},
};

use parking_lot::Mutex;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        MetricType,
        counter::Counter,
        family::Family,
        gauge::{ConstGauge, Gauge},
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};
use tokio::time::Instant;

use super::{QueueItem, fair::GroupStats, queue::Shared};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueName {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Scaled {
    name: String,
    direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LaneLabel {
    name: String,
    lane: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabel {
    name: String,
    group: String,
}

/// How many fairness groups per queue the per-group gauges name (the rest are `other`).
pub const TOP_GROUPS: usize = 10;

type HistogramFamily = Family<QueueName, Histogram, fn() -> Histogram>;

/// The workqueue metrics of any number of named queues: part of the one bundle,
/// [`Metrics`](crate::metrics::Metrics), registered once in a [`Registry`]. Give the bundle
/// to each queue with [`QueueConfig::metrics`](super::QueueConfig::metrics).
///
/// ```
/// use prometheus_client::{encoding::text::encode, registry::Registry};
/// use kube_informer::{metrics::Metrics, workqueue::{Queue, QueueConfig}};
///
/// let mut registry = Registry::default();
/// let metrics = Metrics::register(&mut registry);
/// let queue = Queue::new(QueueConfig::default().name("pods").metrics(&metrics));
/// queue.add("default/web".to_owned());
///
/// let mut text = String::new();
/// encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"workqueue_depth{name="pods"} 1"#));
/// ```
#[derive(Clone)]
pub struct WorkqueueMetrics {
    depth: Family<QueueName, Gauge>,
    adds: Family<QueueName, Counter>,
    queue_duration: HistogramFamily,
    work_duration: HistogramFamily,
    retries: Family<QueueName, Counter>,
    workers: Family<QueueName, Gauge>,
    worker_changes: Family<Scaled, Counter>,
    in_flight: Arc<InFlight>,
}

impl std::fmt::Debug for WorkqueueMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkqueueMetrics").finish_non_exhaustive()
    }
}

fn latency_histogram() -> Histogram {
    // client-go's buckets: 10 ns to 1000 s, ×10 each.
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

impl WorkqueueMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(latency_histogram),
            work_duration: Family::new_with_constructor(latency_histogram),
            retries: Family::default(),
            workers: Family::default(),
            worker_changes: Family::default(),
            in_flight: Arc::default(),
        };
        registry.register(
            "workqueue_depth",
            "Current depth of the workqueue",
            metrics.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by the workqueue",
            metrics.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in the workqueue before being requested",
            metrics.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from the workqueue takes",
            metrics.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by the workqueue",
            metrics.retries.clone(),
        );
        registry.register(
            "workqueue_workers",
            "Workers taking items from the workqueue now (when their number is scaled)",
            metrics.workers.clone(),
        );
        registry.register(
            "workqueue_worker_changes",
            "Total number of changes of the workqueue's worker count, by direction",
            metrics.worker_changes.clone(),
        );
        registry.register_collector(Box::new(metrics.in_flight.clone()));
        metrics
    }

    pub(super) fn recorder<T>(&self, name: &str) -> Recorder<T> {
        let label = QueueName {
            name: name.to_owned(),
        };
        Recorder {
            depth: self.depth.get_or_create(&label).clone(),
            adds: self.adds.get_or_create(&label).clone(),
            queue_duration: self.queue_duration.get_or_create(&label).clone(),
            work_duration: self.work_duration.get_or_create(&label).clone(),
            retries: self.retries.get_or_create(&label).clone(),
            workers: self.workers.get_or_create(&label).clone(),
            scaled: [true, false].map(|up| {
                let direction = if up { "up" } else { "down" };
                let name = name.to_owned();
                (self
                    .worker_changes
                    .get_or_create(&Scaled { name, direction }))
                .clone()
            }),
            added_at: HashMap::default(),
            started_at: HashMap::default(),
        }
    }

    pub(super) fn track_in_flight(&self, name: &str, queue: Weak<dyn InFlightSource>) {
        self.in_flight.queues.lock().push((name.to_owned(), queue));
    }
}

/// One queue's metric handles and the timestamps behind its latencies. Lives inside the
/// queue's state, under its lock.
pub(super) struct Recorder<T> {
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    retries: Counter,
    workers: Gauge,
    /// Changes up, then down.
    scaled: [Counter; 2],
    added_at: HashMap<T, Instant, foldhash::fast::RandomState>,
    started_at: HashMap<T, Instant, foldhash::fast::RandomState>,
}

impl<T: QueueItem> Recorder<T> {
    pub(super) fn added(&mut self, item: &T) {
        self.adds.inc();
        self.depth.inc();
        self.added_at
            .entry(item.clone())
            .or_insert_with(Instant::now);
    }

    pub(super) fn taken(&mut self, item: &T) {
        self.depth.dec();
        let now = Instant::now();
        if let Some(added) = self.added_at.remove(item) {
            self.queue_duration.observe((now - added).as_secs_f64());
        }
        self.started_at.insert(item.clone(), now);
    }

    pub(super) fn done(&mut self, item: &T) {
        if let Some(started) = self.started_at.remove(item) {
            self.work_duration.observe(started.elapsed().as_secs_f64());
        }
    }

    pub(super) fn retried(&self) {
        self.retries.inc();
    }

    /// The worker count is `workers` now: after a change up or down (`Some(up)`, counted),
    /// or as the workers start (`None`).
    pub(super) fn scaled(&self, workers: usize, up: Option<bool>) {
        self.workers.set(i64::try_from(workers).unwrap_or(i64::MAX));
        if let Some(up) = up {
            self.scaled[usize::from(!up)].inc();
        }
    }

    pub(super) fn in_flight_seconds(&self) -> Vec<f64> {
        let now = Instant::now();
        let ages = self.started_at.values();
        ages.map(|started| (now - *started).as_secs_f64()).collect()
    }
}

/// A queue whose in-flight items can be aged, and groups measured, at scrape time.
pub(super) trait InFlightSource: Send + Sync {
    fn in_flight_seconds(&self) -> Vec<f64>;
    /// Its fairness groups (none when it is not fair).
    fn groups(&self) -> Vec<GroupStats>;
    /// Items queued in the live lane and in the backlog lane.
    fn lanes(&self) -> [usize; 2];
}

impl<T: QueueItem> InFlightSource for Shared<T> {
    fn in_flight_seconds(&self) -> Vec<f64> {
        Shared::in_flight_seconds(self)
    }

    fn groups(&self) -> Vec<GroupStats> {
        Shared::group_stats(self)
    }

    fn lanes(&self) -> [usize; 2] {
        Shared::lanes(self)
    }
}

/// The [`TOP_GROUPS`] busiest groups, and the rest summed as `other`.
fn top_groups(mut groups: Vec<GroupStats>) -> Vec<GroupStats> {
    if groups.len() <= TOP_GROUPS {
        return groups;
    }
    groups.sort_by(|a, b| {
        let load = |g: &GroupStats| (g.depth + g.in_flight, g.longest_wait);
        load(b).cmp(&load(a))
    });
    let rest = groups.split_off(TOP_GROUPS);
    let other = rest.into_iter().fold(
        GroupStats {
            name: "other".to_owned(),
            depth: 0,
            in_flight: 0,
            longest_wait: None,
        },
        |sum, g| GroupStats {
            depth: sum.depth + g.depth,
            in_flight: sum.in_flight + g.in_flight,
            longest_wait: sum.longest_wait.max(g.longest_wait),
            ..sum
        },
    );
    groups.push(other);
    groups
}

/// Computes the in-flight gauges of every live queue on each scrape.
#[derive(Default)]
struct InFlight {
    queues: Mutex<Vec<(String, Weak<dyn InFlightSource>)>>,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight").finish_non_exhaustive()
    }
}

impl Collector for InFlight {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        type Ages = Vec<(QueueName, Vec<f64>)>;
        type Groups = Vec<(String, Vec<GroupStats>, [usize; 2])>;
        let (ages, groups): (Ages, Groups) = {
            let mut queues = self.queues.lock();
            queues.retain(|(_, queue)| queue.strong_count() > 0);
            let live = queues.iter().filter_map(|(name, queue)| {
                let label = QueueName { name: name.clone() };
                let queue = queue.upgrade()?;
                let groups = (name.clone(), top_groups(queue.groups()), queue.lanes());
                Some(((label, queue.in_flight_seconds()), groups))
            });
            live.unzip()
        };
        {
            let mut family = encoder.encode_descriptor(
                "workqueue_lane_depth",
                "Items waiting in the workqueue, by lane: live changes, then backlog",
                None,
                MetricType::Gauge,
            )?;
            for (name, _, lanes) in &groups {
                for (lane, depth) in ["live", "backlog"].into_iter().zip(lanes) {
                    let label = LaneLabel {
                        name: name.clone(),
                        lane,
                    };
                    let depth = i64::try_from(*depth).unwrap_or(i64::MAX);
                    ConstGauge::new(depth).encode(family.encode_family(&label)?)?;
                }
            }
        }
        type Summary = fn(&[f64]) -> f64;
        let gauges: [(&str, &str, Summary); 2] = [
            (
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
                |ages| ages.iter().fold(0.0, |sum, age| sum + age),
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for the workqueue been running",
                |ages| ages.iter().copied().fold(0.0, f64::max),
            ),
        ];
        for (name, help, value) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (label, ages) in &ages {
                ConstGauge::new(value(ages)).encode(family.encode_family(label)?)?;
            }
        }
        type Measure = fn(&GroupStats) -> f64;
        let per_group: [(&str, &str, Measure); 3] = [
            (
                "workqueue_group_depth",
                "Items waiting in the workqueue, per fairness group",
                |g| g.depth as f64,
            ),
            (
                "workqueue_group_in_flight",
                "Items of the fairness group held by workers now",
                |g| g.in_flight as f64,
            ),
            (
                "workqueue_group_longest_wait_seconds",
                "How many seconds the fairness group's oldest queued item has waited",
                |g| g.longest_wait.map_or(0.0, |w| w.as_secs_f64()),
            ),
        ];
        for (metric, help, value) in per_group {
            let mut family = encoder.encode_descriptor(metric, help, None, MetricType::Gauge)?;
            for (name, groups, _) in &groups {
                for g in groups {
                    let label = GroupLabel {
                        name: name.clone(),
                        group: g.name.clone(),
                    };
                    ConstGauge::new(value(g)).encode(family.encode_family(&label)?)?;
                }
            }
        }
        Ok(())
    }
}
