//! The certificates' metrics: what this replica changed, when each certificate expires,
//! and the injections that failed.

use std::sync::LazyLock;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use super::pki;
use super::plan::{Step, Stored};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Changed {
    change: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Which {
    certificate: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Failure {
    target: String,
    reason: &'static str,
}

struct Metrics {
    changes: Family<Changed, Counter>,
    expiry: Family<Which, Gauge>,
    failures: Family<Failure, Counter>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| Metrics {
    changes: Family::default(),
    expiry: Family::default(),
    failures: Family::default(),
});

/// Counts a change this replica made.
pub(super) fn changed(step: Step) {
    METRICS
        .changes
        .get_or_create(&Changed { change: name(step) })
        .inc();
}

/// Counts an injection into `target` that failed: `refused` (the API server answered an
/// error: RBAC, a webhook, ...), `contended` (other writers kept changing it), `reverted`
/// (another writer had replaced the bundle this replica wrote).
pub(super) fn injection_failed(target: &str, reason: &'static str) {
    METRICS
        .failures
        .get_or_create(&Failure {
            target: target.to_owned(),
            reason,
        })
        .inc();
}

fn name(step: Step) -> &'static str {
    match step {
        Step::Fresh => "created",
        Step::StartCaRoll => "ca_roll_started",
        Step::CaInjected => "ca_injected",
        Step::CaInjectionLost => "ca_injection_lost",
        Step::PromoteCa => "ca_promoted",
        Step::NewServing => "serving_renewed",
        Step::FixBundle => "bundle_fixed",
    }
}

/// Sets the expiry gauges from `stored`.
pub(super) fn record_expiry(stored: &Stored) {
    let pairs = [
        ("ca", stored.ca.as_ref()),
        ("serving", stored.serving.as_ref()),
    ];
    for (certificate, pair) in pairs {
        if let Some(end) = pair.and_then(|p| pki::not_after(&p.cert)) {
            METRICS
                .expiry
                .get_or_create(&Which { certificate })
                .set(end);
        }
    }
}

/// Registers `webhook_certificate_changes_total{change}` (created, ca_roll_started,
/// ca_injected, ca_injection_lost, ca_promoted, serving_renewed, bundle_fixed: what this
/// replica wrote), `webhook_certificate_expiration_timestamp_seconds{certificate="ca"|"serving"}`
/// and `webhook_certificate_injection_failures_total{target, reason}`.
pub(crate) fn register_metrics(registry: &mut Registry) {
    registry.register(
        "webhook_certificate_changes",
        "Changes this replica made to the webhook certificates, by change",
        METRICS.changes.clone(),
    );
    registry.register(
        "webhook_certificate_expiration_timestamp_seconds",
        "When the webhook CA and serving certificate expire, in Unix seconds",
        METRICS.expiry.clone(),
    );
    registry.register(
        "webhook_certificate_injection_failures",
        "Injections of the webhook CA bundle that failed, by target and reason",
        METRICS.failures.clone(),
    );
}
