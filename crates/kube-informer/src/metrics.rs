//! [`Metrics`]: every Prometheus metric of this crate, registered once (feature `metrics`).
//!
//! One bundle for a process, registered once: every level takes the same bundle — the
//! factory ([`FactoryOptions::metrics`]), a standalone informer or reflector
//! (`InformerOptions::metrics`, `ReflectorOptions::metrics`) and work queues
//! ([`workqueue::QueueConfig::metrics`](crate::workqueue::QueueConfig::metrics)). The metric names and labels are client-go's, listed in
//! [`informer::InformerMetrics`](crate::informer::InformerMetrics),
//! [`reflector::ReflectorMetrics`](crate::reflector::ReflectorMetrics) and
//! [`workqueue::WorkqueueMetrics`](crate::workqueue::WorkqueueMetrics).
//!
//! [`FactoryOptions::metrics`]: crate::FactoryOptions::metrics

use prometheus_client::registry::Registry;

use crate::{informer::InformerMetrics, reflector::ReflectorMetrics, workqueue::WorkqueueMetrics};

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
        Self {
            informers: InformerMetrics::register(registry),
            reflectors: ReflectorMetrics::register(registry),
            workqueues: WorkqueueMetrics::register(registry),
        }
    }

    /// The informers' metrics (batches, FIFO depth, handler backlogs).
    pub fn informers(&self) -> &InformerMetrics {
        &self.informers
    }

    /// The reflectors' metrics (lists, watches, restarts, failures).
    pub fn reflectors(&self) -> &ReflectorMetrics {
        &self.reflectors
    }

    /// The work queues' metrics (client-go's `workqueue_*`).
    pub fn workqueues(&self) -> &WorkqueueMetrics {
        &self.workqueues
    }
}
