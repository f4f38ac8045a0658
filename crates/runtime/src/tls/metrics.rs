//! controller-runtime's certificate-watcher metrics, for every [`CertWatcher`](super::CertWatcher)
//! of the process (as controller-runtime's are global). A
//! [`Manager`](crate::manager::Manager) registers them; without one, [`register`] does.
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `certwatcher_read_certificate_total` | counter | reads of a certificate and key pair: at load, and at each check for a change |
//! | `certwatcher_read_certificate_errors_total` | counter | reads that failed (a missing file, a PEM that does not parse, a key that does not match): the previous pair stays in use |

use std::sync::LazyLock;

use prometheus_client::{metrics::counter::Counter, registry::Registry};

static READS: LazyLock<Counter> = LazyLock::new(Counter::default);
static ERRORS: LazyLock<Counter> = LazyLock::new(Counter::default);

/// Registers the certificate-watcher metrics in `registry`.
///
/// ```
/// let mut registry = prometheus_client::registry::Registry::default();
/// kube_informer_runtime::tls::register_metrics(&mut registry);
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains("certwatcher_read_certificate_total"));
/// ```
pub fn register_metrics(registry: &mut Registry) {
    registry.register(
        "certwatcher_read_certificate",
        "Total number of certificate reads",
        READS.clone(),
    );
    registry.register(
        "certwatcher_read_certificate_errors",
        "Total number of certificate read errors",
        ERRORS.clone(),
    );
}

/// Counts one read, and its failure.
pub(super) fn read<T, E>(result: Result<T, E>) -> Result<T, E> {
    READS.inc();
    if result.is_err() {
        ERRORS.inc();
    }
    result
}
