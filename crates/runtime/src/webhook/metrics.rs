//! controller-runtime's webhook metrics, for every webhook server of the process (as
//! controller-runtime's are global), labelled by the webhook's path. A
//! [`Manager`](crate::manager::Manager) registers them; without one, [`register_metrics`]
//! does. Requests to paths no webhook serves are not counted (they would let any client
//! add series).
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `controller_runtime_webhook_requests_total` | counter | webhook, code | requests answered, by HTTP status (a denial is a `200` whose review says so) |
//! | `controller_runtime_webhook_latency_seconds` | histogram | webhook | time to answer, from the request's headers to the answer |
//! | `controller_runtime_webhook_requests_in_flight` | gauge | webhook | requests being answered now |

use std::sync::LazyLock;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};
use tokio::time::Instant;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Webhook {
    webhook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Answered {
    webhook: String,
    code: String,
}

/// controller-runtime's buckets: Prometheus's defaults (5 ms to 10 s).
fn latency() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

struct Metrics {
    requests: Family<Answered, Counter>,
    latency: Family<Webhook, Histogram, fn() -> Histogram>,
    in_flight: Family<Webhook, Gauge>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| Metrics {
    requests: Family::default(),
    latency: Family::new_with_constructor(latency),
    in_flight: Family::default(),
});

/// Registers the webhook metrics in `registry`.
///
/// ```
/// let mut registry = prometheus_client::registry::Registry::default();
/// kube_informer_runtime::webhook::register_metrics(&mut registry);
/// ```
pub fn register_metrics(registry: &mut Registry) {
    super::certs::register_metrics(registry);
    registry.register(
        "controller_runtime_webhook_requests",
        "Total number of admission requests by HTTP status code",
        METRICS.requests.clone(),
    );
    registry.register(
        "controller_runtime_webhook_latency_seconds",
        "Histogram of the latency of processing admission requests",
        METRICS.latency.clone(),
    );
    registry.register(
        "controller_runtime_webhook_requests_in_flight",
        "Current number of admission requests being served",
        METRICS.in_flight.clone(),
    );
}

/// One request to the webhook at a path, counted in flight while it lives.
pub(super) struct Serving {
    webhook: String,
    started: Instant,
    in_flight: Gauge,
}

impl Serving {
    pub(super) fn start(webhook: &str) -> Self {
        let label = Webhook {
            webhook: webhook.to_owned(),
        };
        let in_flight = METRICS.in_flight.get_or_create(&label).clone();
        in_flight.inc();
        Self {
            webhook: label.webhook,
            started: Instant::now(),
            in_flight,
        }
    }

    /// Answered with the HTTP status `code`.
    pub(super) fn answered(self, code: u16) {
        let label = Webhook {
            webhook: self.webhook.clone(),
        };
        let seconds = self.started.elapsed().as_secs_f64();
        METRICS.latency.get_or_create(&label).observe(seconds);
        let answered = Answered {
            webhook: self.webhook.clone(),
            code: code.to_string(),
        };
        METRICS.requests.get_or_create(&answered).inc();
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.in_flight.dec();
    }
}
