//! When a handler's backlog holds the informer back, and when a handler is set aside.
//!
//! A listener whose backlog reaches its limit makes the informer wait before it applies
//! more (the queue then fills and the reflector stops reading the socket). A handler that
//! makes room — its backlog back under the limit — within the grace period has kept up: the
//! informer goes on, and the next wait starts a fresh grace. So a handler slower than the
//! API server but still working paces the informer for as long as the load lasts, which is
//! what bounds memory. One that makes *no* room within the grace period (stuck, or slower
//! than a batch per grace period) is set aside: it keeps buffering (every notification, or
//! one per object when coalescing), as client-go's listeners always do, and no longer holds
//! anyone back. Once it has caught up (under half the limit) it is held to the limit again.

use std::time::Duration;

use tokio::time::Instant;

/// How far a handler may fall behind before the informer waits for it, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backpressure {
    /// Pending notifications at which the informer waits.
    pub(crate) limit: usize,
    /// How long the informer waits, in one go, for a handler at its limit to make room
    /// before it sets the handler aside.
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
    /// Since when the backlog has been at the limit without making room.
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
        if self.set_aside {
            return (Hold::Room, change);
        }
        if pending < pressure.limit {
            // It made room: it keeps up, however busy it is.
            self.behind_since = None;
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
        // Still no room: the same deadline.
        assert_eq!(
            standing.check(P, 11, t0 + s(2)),
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
        // Under the limit is not enough to take its place back: under half is.
        assert_eq!(standing.check(P, 9, t0 + s(7)), (Hold::Room, Change::None));
        assert!(standing.is_set_aside());
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
    fn a_handler_that_keeps_making_room_is_never_set_aside() {
        // Saturated for a minute: at the limit every second, room half a second later,
        // never back under half.
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut standing = Standing::default();
        for second in 0..60 {
            let at = t0 + ms(1000 * second);
            assert_eq!(
                standing.check(P, 19, at),
                (Hold::Until(Some(at + P.grace)), Change::None)
            );
            assert_eq!(
                standing.check(P, 9, at + ms(500)),
                (Hold::Room, Change::None)
            );
        }
        assert!(!standing.is_set_aside());
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
