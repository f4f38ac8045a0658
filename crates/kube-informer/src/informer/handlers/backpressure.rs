//! When a handler's backlog holds the informer back, and when a handler is set aside.
//!
//! A listener whose backlog reaches its limit makes the informer wait before it applies
//! more (the queue then fills and the reflector stops reading the socket). A handler that
//! is merely busy drains and the informer goes on; one that *stays* behind — its backlog
//! not back under half the limit within the grace period — is set aside: it keeps
//! buffering (every notification, or one per object when coalescing), as client-go's
//! listeners always do, and no longer holds anyone back. Once it has caught up (under half
//! the limit) it is held to the limit again.

use std::time::Duration;

use tokio::time::Instant;

/// How far a handler may fall behind before the informer waits for it, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backpressure {
    /// Pending notifications at which the informer waits.
    pub(crate) limit: usize,
    /// How long the backlog may stay above half the limit before the handler is set aside.
    pub(crate) grace: Duration,
}

impl Default for Backpressure {
    fn default() -> Self {
        Self {
            limit: DEFAULT_BACKLOG_LIMIT,
            grace: DEFAULT_GRACE,
        }
    }
}

/// The backlog at which the informer waits for a handler by default (client-go's initial
/// listener buffer).
pub const DEFAULT_BACKLOG_LIMIT: usize = 1024;

/// How long a handler may stay behind before it is set aside, by default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// What the informer should do about one listener now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Go on.
    Room,
    /// Wait until the backlog is under the limit, at most until the deadline (`None`: a
    /// grace too long to end).
    Until(Option<Instant>),
}

/// What happened to a listener's standing, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    SetAside,
    CaughtUp,
}

/// One listener's standing.
#[derive(Debug, Default)]
pub(crate) struct Standing {
    /// Since when the backlog has been at the limit without falling under half of it.
    behind_since: Option<Instant>,
    set_aside: bool,
}

impl Standing {
    pub(crate) fn is_set_aside(&self) -> bool {
        self.set_aside
    }

    /// Looks at a backlog of `pending` at `now`: whether the informer should wait, and
    /// whether the listener was just set aside or took back its place.
    pub(crate) fn check(
        &mut self,
        pressure: Backpressure,
        pending: usize,
        now: Instant,
    ) -> (Hold, Change) {
        let low = pressure.limit / 2;
        let mut change = Change::None;
        if pending <= low {
            self.behind_since = None;
            if std::mem::take(&mut self.set_aside) {
                change = Change::CaughtUp;
            }
            return (Hold::Room, change);
        }
        if self.set_aside || pending < pressure.limit {
            return (Hold::Room, change);
        }
        let since = *self.behind_since.get_or_insert(now);
        let deadline = since.checked_add(pressure.grace);
        if deadline.is_some_and(|deadline| now >= deadline) {
            self.set_aside = true;
            return (Hold::Room, Change::SetAside);
        }
        (Hold::Until(deadline), change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Backpressure = Backpressure {
        limit: 10,
        grace: Duration::from_secs(5),
    };

    #[test]
    fn a_full_backlog_holds_back_until_the_grace_runs_out_then_is_set_aside() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut standing = Standing::default();
        assert_eq!(standing.check(P, 9, t0), (Hold::Room, Change::None));
        assert_eq!(
            standing.check(P, 10, t0),
            (Hold::Until(Some(t0 + s(5))), Change::None)
        );
        // Draining, but not under half: the clock keeps running.
        assert_eq!(standing.check(P, 6, t0 + s(1)), (Hold::Room, Change::None));
        assert_eq!(
            standing.check(P, 10, t0 + s(2)),
            (Hold::Until(Some(t0 + s(5))), Change::None)
        );
        assert_eq!(
            standing.check(P, 12, t0 + s(5)),
            (Hold::Room, Change::SetAside)
        );
        assert!(standing.is_set_aside());
        // Set aside: never held back, whatever the backlog.
        assert_eq!(
            standing.check(P, 5000, t0 + s(6)),
            (Hold::Room, Change::None)
        );
        // Caught up: held to the limit again, with a fresh grace.
        assert_eq!(
            standing.check(P, 5, t0 + s(7)),
            (Hold::Room, Change::CaughtUp)
        );
        assert!(!standing.is_set_aside());
        assert_eq!(
            standing.check(P, 10, t0 + s(8)),
            (Hold::Until(Some(t0 + s(13))), Change::None)
        );
    }

    #[test]
    fn a_busy_handler_that_drains_under_half_starts_a_fresh_grace() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut standing = Standing::default();
        assert_eq!(
            standing.check(P, 10, t0),
            (Hold::Until(Some(t0 + s(5))), Change::None)
        );
        assert_eq!(standing.check(P, 4, t0 + s(4)), (Hold::Room, Change::None));
        assert_eq!(
            standing.check(P, 10, t0 + s(6)),
            (Hold::Until(Some(t0 + s(11))), Change::None)
        );
    }

    #[test]
    fn an_endless_grace_holds_back_for_ever() {
        let t0 = Instant::now();
        let endless = Backpressure {
            limit: 10,
            grace: Duration::MAX,
        };
        let mut standing = Standing::default();
        assert_eq!(
            standing.check(endless, 10, t0),
            (Hold::Until(None), Change::None)
        );
        assert!(!standing.is_set_aside());
    }
}
