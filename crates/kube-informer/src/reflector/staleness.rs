//! What a reflector hears of where the server is, for its informer's staleness: each
//! version the server told it of (a LIST's, a bookmark's, a probe's `limit=1` read, an
//! event's as it arrived) with the moment it heard it. The cache is as stale as the oldest
//! of those versions it has not applied yet is old; while the server cannot be reached
//! (a probe unanswered, a request failed), as old as that silence.
//!
//! Nothing here polls: the versions come with what the reflector reads anyway, plus the
//! optional probe ([`ReflectorOptions::staleness_probe`](super::ReflectorOptions::staleness_probe)),
//! one `limit=1` read per period.

use std::{collections::VecDeque, sync::OnceLock, time::Duration};

use kube::Resource;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Reflector, list::ListFailure};
use crate::{ResourceVersion, list_watch::ListerWatcher};

/// Versions heard and not yet known applied kept apart before they are merged (each
/// merge can only overstate the staleness, never hide it).
const KEPT: usize = 256;

/// The version the reflector's cache has applied (empty or malformed: none yet).
pub(crate) type AppliedVersion = Box<dyn Fn() -> String + Send + Sync>;

/// The versions a reflector heard of and when; see the [module docs](self).
#[derive(Default)]
pub(crate) struct Heard {
    state: Mutex<State>,
    /// Set by the informer: the version its cache has applied (for this reflector's
    /// namespace, with one reflector per namespace), and whether events move it (a
    /// RealFifo's do; a DeltaFifo's do not: only bookmarks and relists do), so an event's
    /// version can be waited for. Unset: events count.
    applied: OnceLock<(AppliedVersion, bool)>,
}

#[derive(Default)]
struct State {
    /// Versions heard, increasing, each with the earliest moment it stands for.
    pending: VecDeque<(ResourceVersion, Instant)>,
    /// Since when the server's version is unknown: a probe unanswered or failed, a
    /// request that failed. Ended by the next version a LIST, bookmark or probe gives.
    unknown_since: Option<Instant>,
    newest: Option<ResourceVersion>,
}

/// How far one reflector's cache is behind the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lag {
    pub(crate) behind: Duration,
    pub(crate) versions: Option<u128>,
}

impl Heard {
    /// Reads the cache's applied version with `applied` (once; later calls are ignored);
    /// `events_applied`: whether an applied event moves that version (see the field).
    pub(crate) fn set_applied(&self, applied: AppliedVersion, events_applied: bool) {
        let _ = self.applied.set((applied, events_applied));
    }

    /// The server was at `resource_version` (at least) just now. `confirms`: a LIST, a
    /// bookmark or a probe, which also end a time the server's version was unknown (an
    /// event only says where the watch is).
    pub(crate) fn heard(&self, resource_version: &str, confirms: bool) {
        let events_applied = self.applied.get().is_none_or(|(_, events)| *events);
        if !confirms && !events_applied {
            return; // the cache's version would not show it applied until a bookmark
        }
        let now = Instant::now();
        let mut state = self.state.lock();
        // The server answered, whatever its version says (an opaque one included).
        let unknown_since = match confirms {
            true => state.unknown_since.take(),
            false => None,
        };
        let Ok(version) = resource_version.parse::<ResourceVersion>() else {
            return;
        };
        let since = unknown_since.map_or(now, |s| s.min(now));
        state.newest = state.newest.max(Some(version));
        if state.pending.len() >= KEPT {
            self.forget_applied(&mut state);
        }
        let full = state.pending.len() >= KEPT;
        match state.pending.back_mut() {
            // Not past the newest kept: it is applied no later than that one, so only an
            // earlier moment matters. Past it, but no room: merged into the newest, from
            // the newest's moment (overstating, never hiding, the staleness).
            Some(last) if version <= last.0 => last.1 = last.1.min(since),
            Some(last) if full => *last = (version, last.1.min(since)),
            _ => state.pending.push_back((version, since)),
        }
    }

    /// The server's version is unknown from now (a probe went out, a request failed),
    /// until a LIST, bookmark or probe tells it.
    pub(crate) fn lost_track(&self) {
        let mut state = self.state.lock();
        state.unknown_since.get_or_insert_with(Instant::now);
    }

    /// The server answered (a watch opened): its version is no longer unknown, though
    /// not learned either; what the watch delivers says the rest.
    pub(crate) fn reached_server(&self) {
        self.state.lock().unknown_since = None;
    }

    /// How far the cache is behind the versions heard, now.
    pub(crate) fn lag(&self) -> Lag {
        let now = Instant::now();
        let mut state = self.state.lock();
        let applied = self.forget_applied(&mut state);
        let oldest = state.pending.iter().map(|(_, at)| *at).min();
        let oldest = oldest.into_iter().chain(state.unknown_since).min();
        Lag {
            behind: oldest.map_or(Duration::ZERO, |at| now.saturating_duration_since(at)),
            versions: match (state.newest, applied) {
                (Some(newest), Some(applied)) => {
                    Some(u128::from(newest).saturating_sub(u128::from(applied)))
                }
                (None, _) => Some(0),
                (Some(_), None) => None,
            },
        }
    }

    /// Drops the versions the cache has applied; the applied version, if known.
    fn forget_applied(&self, state: &mut State) -> Option<ResourceVersion> {
        let (applied, _) = self.applied.get()?;
        let applied = applied().parse::<ResourceVersion>().ok()?;
        while state.pending.front().is_some_and(|(v, _)| *v <= applied) {
            state.pending.pop_front();
        }
        Some(applied)
    }
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// Every [`ReflectorOptions::staleness_probe`](super::ReflectorOptions::staleness_probe)
    /// while a watch is open: one `limit=1` read for the server's version. Until it
    /// answers, and after it fails, the server's version counts as unknown. Never
    /// returns unless cancelled; a reflector without the probe waits for cancellation.
    pub(super) async fn probe_staleness(&self, cancel: &CancellationToken) {
        let Some(every) = self.options.staleness_probe else {
            return cancel.cancelled().await;
        };
        let every = every.max(super::options::MIN_STALENESS_PROBE);
        loop {
            if Self::wait(cancel, every).await.is_err() {
                return;
            }
            // A sync under way is a read of the server's version already.
            if !self.shared.health.lock().watching {
                continue;
            }
            self.heard.lost_track();
            let read = tokio::select! {
                () = cancel.cancelled() => return,
                read = self.server_version() => read,
            };
            match read {
                Ok(version) => self.heard.heard(&version, true),
                Err(ListFailure::Client(err)) => {
                    tracing::debug!(reflector = %self.name, "staleness probe failed: {err}");
                }
                Err(ListFailure::TimedOut(after)) => {
                    tracing::debug!(reflector = %self.name, "staleness probe timed out after {after:?}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
