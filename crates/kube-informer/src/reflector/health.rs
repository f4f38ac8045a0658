//! What a reflector has recently achieved: the signal behind liveness and readiness
//! probes.

use tokio::time::Instant;

/// A reflector's recent history, as [`Reflector::health`](super::Reflector::health) reports
/// it.
///
/// ```
/// use std::time::Duration;
/// use kube_informer::reflector::ReflectorHealth;
///
/// let health = ReflectorHealth::default();
/// // Never synced: a readiness probe says no; not failing yet: a liveness probe says yes.
/// assert!(!health.has_synced_once());
/// assert!(health.is_recovering(5));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReflectorHealth {
    /// When the cache was last brought in step with a whole LIST or streaming list.
    pub last_sync: Option<Instant>,
    /// When the server was last heard from on a watch (an event or a bookmark).
    pub last_watch_event: Option<Instant>,
    /// Failures since the last success (a sync, or a watch event).
    pub consecutive_failures: u32,
    /// The newest failure, as its message, and when it happened.
    pub last_error: Option<(Instant, String)>,
    /// Whether a watch is open now.
    pub watching: bool,
}

impl ReflectorHealth {
    /// Whether a sync ever succeeded.
    pub fn has_synced_once(&self) -> bool {
        self.last_sync.is_some()
    }

    /// Whether the reflector is keeping up or recovering: fewer than `max_failures`
    /// failures in a row. A liveness probe built on it restarts a process whose watches
    /// fail for good (expired credentials, a removed resource), not one riding out a blip.
    pub fn is_recovering(&self, max_failures: u32) -> bool {
        self.consecutive_failures < max_failures
    }

    pub(super) fn synced(&mut self) {
        self.last_sync = Some(Instant::now());
        self.consecutive_failures = 0;
    }

    pub(super) fn heard(&mut self) {
        self.last_watch_event = Some(Instant::now());
        self.consecutive_failures = 0;
    }

    pub(super) fn failed(&mut self, message: String) {
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        self.last_error = Some((Instant::now(), message));
    }
}
