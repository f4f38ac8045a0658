//! The processor: the set of listeners, and which of them a resync is due for.

use std::{sync::Arc, time::Duration};

use kube::Resource;
use tokio::time::Instant;

use super::{handler::Notification, listener::Listener};

/// The shortest resync period a handler can have (client-go's `minimumResyncPeriod`).
pub(crate) const MIN_RESYNC: Duration = Duration::from_secs(1);

pub(crate) struct Entry<K> {
    pub(crate) id: u64,
    pub(crate) listener: Arc<Listener<K>>,
    resync: Option<Duration>,
    next_resync: Instant,
    /// Whether the resync in progress is for this listener.
    syncing: bool,
}

pub(crate) struct Processor<K> {
    entries: Vec<Entry<K>>,
    next_id: u64,
}

impl<K> Default for Processor<K> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            next_id: 0,
        }
    }
}

impl<K: Resource + Send + Sync + 'static> Processor<K> {
    pub(crate) fn add(&mut self, listener: Arc<Listener<K>>, resync: Option<Duration>) -> u64 {
        self.next_id += 1;
        let now = Instant::now();
        self.entries.push(Entry {
            id: self.next_id,
            listener,
            resync,
            next_resync: now + resync.unwrap_or(Duration::ZERO),
            syncing: false,
        });
        self.next_id
    }

    pub(crate) fn remove(&mut self, id: u64) -> Option<Arc<Listener<K>>> {
        let i = self.entries.iter().position(|e| e.id == id)?;
        Some(self.entries.remove(i).listener)
    }

    /// The shortest resync period any handler asked for: how often to check.
    pub(crate) fn shortest_resync(&self) -> Option<Duration> {
        self.entries.iter().filter_map(|e| e.resync).min()
    }

    pub(crate) fn listeners(&self) -> impl Iterator<Item = &Arc<Listener<K>>> {
        self.entries.iter().map(|e| &e.listener)
    }

    /// Marks the listeners whose resync is due; true if any is (then the FIFO resyncs and
    /// the `Sync` updates reach only them).
    pub(crate) fn should_resync(&mut self) -> bool {
        let now = Instant::now();
        let mut any = false;
        for entry in &mut self.entries {
            entry.syncing = false;
            if let Some(period) = entry.resync
                && now >= entry.next_resync
            {
                entry.syncing = true;
                entry.next_resync = now + period;
                any = true;
            }
        }
        any
    }

    /// Queues `notification` for every listener, or, for a resync, for those it is due for.
    pub(crate) fn distribute(&self, notification: &Notification<K>, is_sync: bool) {
        for entry in &self.entries {
            if !is_sync || entry.syncing {
                entry.listener.push(notification.clone());
            }
        }
    }
}

/// A handler's resync period: none stays none; at least [`MIN_RESYNC`] (client-go's rule),
/// with a warning when raised. The informer's check period follows the shortest period, so
/// it is never rounded up to the check period (client-go does that for late handlers).
pub(crate) fn resync_period(asked: Option<Duration>) -> Option<Duration> {
    let asked = asked?;
    if asked < MIN_RESYNC {
        tracing::warn!(
            ?asked,
            "a resync period below {MIN_RESYNC:?} was raised to {MIN_RESYNC:?}"
        );
    }
    Some(asked.max(MIN_RESYNC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resync_periods_are_at_least_a_second() {
        let s = Duration::from_secs;
        assert_eq!(resync_period(None), None, "none stays none");
        assert_eq!(resync_period(Some(Duration::from_millis(10))), Some(s(1)));
        assert_eq!(resync_period(Some(s(5))), Some(s(5)));
    }
}
