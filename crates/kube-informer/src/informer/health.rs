//! Whether an informer is synced, alive and keeping up — what readiness and liveness probes
//! ask — and the error of a sync that did not happen in time.

use std::time::Duration;

use crate::reflector::ReflectorHealth;

/// An informer's state, for probes and dashboards
/// ([`SharedIndexInformer::health`](super::SharedIndexInformer::health)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InformerHealth {
    /// The informer's name.
    pub name: String,
    /// Whether the first sync has been applied to the cache.
    pub synced: bool,
    /// Whether `run` is running.
    pub running: bool,
    /// Set when a task of the informer died: the cache no longer follows the server.
    pub failed: Option<String>,
    /// The reflector's recent successes and failures.
    pub reflector: ReflectorHealth,
}

impl InformerHealth {
    /// For a readiness probe: synced, and not failed.
    pub fn is_ready(&self) -> bool {
        self.synced && self.failed.is_none()
    }

    /// For a liveness probe: no task died, and fewer than `max_failures` list/watch failures
    /// in a row (a watch that keeps failing for good — expired credentials, a resource that
    /// no longer exists — should restart the process; a blip should not).
    pub fn is_alive(&self, max_failures: u32) -> bool {
        self.failed.is_none() && self.reflector.is_recovering(max_failures)
    }
}

/// An informer (or a handler registration) did not sync in time; says which, and why as far
/// as it is known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} did not sync within {waited:?}{}", describe(.failed, .last_error, *.stopped))]
pub struct SyncError {
    /// The informer (or `informer/handler`) that did not sync.
    pub name: String,
    /// How long was waited.
    pub waited: Duration,
    /// The informer's newest list/watch failure, if any.
    pub last_error: Option<String>,
    /// Why the informer failed, if a task of it died.
    pub failed: Option<String>,
    /// Whether the informer was stopped (or never started) while waiting.
    pub stopped: bool,
}

fn describe(failed: &Option<String>, last_error: &Option<String>, stopped: bool) -> String {
    if let Some(failed) = failed {
        return format!(": it failed: {failed}");
    }
    let mut out = String::new();
    if stopped {
        out.push_str(": it is not running");
    }
    if let Some(error) = last_error {
        out.push_str(if stopped {
            "; last error: "
        } else {
            ": last error: "
        });
        out.push_str(error);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_error_says_why() {
        let err = SyncError {
            name: "Pod".into(),
            waited: Duration::from_secs(5),
            last_error: Some("list of Pod failed: 403 Forbidden".into()),
            failed: None,
            stopped: false,
        };
        assert_eq!(
            err.to_string(),
            "Pod did not sync within 5s: last error: list of Pod failed: 403 Forbidden"
        );
    }
}
