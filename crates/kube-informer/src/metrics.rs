//! [`Metrics`]: every Prometheus metric of this crate, registered once (feature `metrics`).
//!
//! One bundle for a process, registered once: every level takes the same bundle — the
//! factory ([`FactoryOptions::metrics`]), a standalone informer or reflector
//! (`InformerOptions::metrics`, `ReflectorOptions::metrics`) and work queues
//! ([`workqueue::QueueConfig::metrics`](crate::workqueue::QueueConfig::metrics)). The metric names and labels are client-go's, listed in
//! [`informer::InformerMetrics`](crate::informer::InformerMetrics),
//! [`reflector::ReflectorMetrics`](crate::reflector::ReflectorMetrics) and
//! [`workqueue::WorkqueueMetrics`](crate::workqueue::WorkqueueMetrics), plus
//! `informer_decode_backlog`: LIST pages and watch batches waiting for a decoding thread
//! ([`decode_backlog`](crate::list_watch::decode_backlog)).
//!
//! [`FactoryOptions::metrics`]: crate::FactoryOptions::metrics
//!
//! The setters that take the bundle are defined here, not beside the options they set:
//! the informer, the reflector and the work queue know their own metrics, not the bundle,
//! so none of them imports this module (the work queue stays a leaf).

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::gauge::ConstGauge,
    registry::Registry,
};

use crate::{
    informer::{InformerMetrics, InformerOptions},
    reflector::{ReflectorMetrics, ReflectorOptions},
    workqueue::{QueueConfig, QueueItem, WorkqueueMetrics},
};

/// The informer, reflector and work queue metrics, registered in one registry.
///
/// ```
/// use prometheus_client::registry::Registry;
/// use kube_informer::{FactoryOptions, metrics::Metrics, workqueue::QueueConfig};
///
/// let mut registry = Registry::default();
/// let metrics = Metrics::register(&mut registry);
/// let options = FactoryOptions::default().metrics(&metrics);
/// let queue = QueueConfig::<String>::default().name("pods").metrics(&metrics);
/// # let _ = (options, queue);
/// ```
#[derive(Clone, Debug)]
pub struct Metrics {
    informers: InformerMetrics,
    reflectors: ReflectorMetrics,
    workqueues: WorkqueueMetrics,
}

impl Metrics {
    /// Creates every metric and registers it in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        registry.register_collector(Box::new(DecodeBacklog));
        Self {
            informers: InformerMetrics::register(registry),
            reflectors: ReflectorMetrics::register(registry),
            workqueues: WorkqueueMetrics::register(registry),
        }
    }
}

/// `informer_decode_backlog`: the process's [decode backlog](crate::list_watch::decode_backlog),
/// read at scrape time.
#[derive(Debug)]
struct DecodeBacklog;

impl Collector for DecodeBacklog {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let backlog = crate::list_watch::decode_backlog();
        let gauge = ConstGauge::new(i64::try_from(backlog).unwrap_or(i64::MAX));
        let metric = encoder.encode_descriptor(
            "informer_decode_backlog",
            "LIST pages and watch batches waiting for a decoding thread",
            None,
            gauge.metric_type(),
        )?;
        gauge.encode(metric)
    }
}

impl<T: QueueItem> QueueConfig<T> {
    /// Records the queue's metrics into the bundle `metrics` (a named queue only, as in
    /// client-go; see [`crate::metrics`]).
    #[must_use]
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        self.metrics = Some(metrics.workqueues.clone());
        self
    }
}

impl<K> InformerOptions<K> {
    /// Records the informer's metrics (FIFO depth, processing time, the cache's
    /// resourceVersion, each handler's backlog) and its reflectors' into the bundle
    /// `metrics` (see [`crate::metrics`]).
    #[must_use]
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        self.metrics = Some(metrics.informers.clone());
        self.reflector.metrics = Some(metrics.reflectors.clone());
        self
    }
}

impl ReflectorOptions {
    /// Records lists, watches, restarts and failures into the bundle `metrics` (see
    /// [`crate::metrics`]).
    #[must_use]
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        self.metrics = Some(metrics.reflectors.clone());
        self
    }
}
