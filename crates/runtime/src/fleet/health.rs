//! Each member's health, as a person or a probe reads it, and the fleet's metrics.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `fleet_cluster_engaged` | gauge | cluster | 1 while the member is engaged |
//! | `fleet_cluster_ready` | gauge | cluster | 1 while every informer of the member is synced and not failed |
//! | `fleet_cluster_consecutive_failures` | gauge | cluster | list/watch failures in a row, the member's worst informer |
//! | `fleet_cluster_kubeconfig_error` | gauge | cluster | 1 while the member's last kubeconfig could not be used |
//!
//! Members named by an error but never engaged appear with `engaged` 0.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{MetricType, gauge::ConstGauge},
    registry::Registry,
};

use super::Fleet;

/// One member's state now.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterHealth {
    /// The member's name.
    pub name: String,
    /// Whether it is engaged.
    pub engaged: bool,
    /// Whether every informer asked of it is synced and not failed (`false` before any is
    /// asked for).
    pub ready: bool,
    /// Whether anything reads from it (an informer was asked of it): a member no
    /// controller follows (a cluster filter's no) is engaged and idle, and neither makes
    /// nor breaks readiness.
    pub read: bool,
    /// List/watch failures in a row of its worst informer.
    pub consecutive_failures: u32,
    /// Why its last kubeconfig could not be used.
    pub error: Option<String>,
}

impl ClusterHealth {
    /// `Ok` when it is engaged and ready; otherwise why not, as `/readyz` lists it.
    pub(crate) fn verdict(&self) -> Result<(), String> {
        if let Some(error) = &self.error {
            return Err(format!("its kubeconfig cannot be used: {error}"));
        }
        match (self.engaged, self.ready) {
            (true, true) => Ok(()),
            (false, _) => Err("not engaged".to_owned()),
            (true, false) if !self.read => Err("nothing reads from it".to_owned()),
            (true, false) if self.consecutive_failures > 0 => Err(format!(
                "not synced; {} list/watch failures in a row",
                self.consecutive_failures
            )),
            (true, false) => Err("not synced".to_owned()),
        }
    }
}

impl Fleet {
    /// Every member's health, by name: engaged ones and those whose kubeconfig failed.
    pub fn health(&self) -> Vec<ClusterHealth> {
        let errors = self.errors();
        let mut health: Vec<ClusterHealth> = self
            .clusters()
            .into_iter()
            .map(|(name, cluster)| {
                let informers = cluster.factory().health();
                ClusterHealth {
                    engaged: true,
                    ready: !informers.is_empty() && informers.iter().all(|i| i.is_ready()),
                    read: !informers.is_empty(),
                    consecutive_failures: informers
                        .iter()
                        .map(|i| i.reflector.consecutive_failures)
                        .max()
                        .unwrap_or(0),
                    error: errors.get(&name).cloned(),
                    name,
                }
            })
            .collect();
        for (name, error) in errors {
            if !health.iter().any(|h| h.name == name) {
                health.push(ClusterHealth {
                    name,
                    engaged: false,
                    ready: false,
                    read: false,
                    consecutive_failures: 0,
                    error: Some(error),
                });
            }
        }
        health.sort_by(|a, b| a.name.cmp(&b.name));
        health
    }

    /// Registers the fleet's metrics (computed from [`health`](Self::health) at each
    /// scrape) in `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(Metrics(self.clone())));
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabel {
    cluster: String,
}

#[derive(Debug)]
struct Metrics(Fleet);

impl Collector for Metrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let health = self.0.health();
        type Value = fn(&ClusterHealth) -> i64;
        let gauges: [(&str, &str, Value); 4] = [
            (
                "fleet_cluster_engaged",
                "1 while the member cluster is engaged",
                |h| i64::from(h.engaged),
            ),
            (
                "fleet_cluster_ready",
                "1 while every informer of the member is synced and not failed",
                |h| i64::from(h.ready),
            ),
            (
                "fleet_cluster_consecutive_failures",
                "List/watch failures in a row of the member's worst informer",
                |h| i64::from(h.consecutive_failures),
            ),
            (
                "fleet_cluster_kubeconfig_error",
                "1 while the member's last kubeconfig could not be used",
                |h| i64::from(h.error.is_some()),
            ),
        ];
        for (name, help, value) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for cluster in &health {
                let label = ClusterLabel {
                    cluster: cluster.name.clone(),
                };
                ConstGauge::new(value(cluster)).encode(family.encode_family(&label)?)?;
            }
        }
        Ok(())
    }
}
