//! A member's door into the fleet controller's queue: its keys, tagged with its name, held
//! back until the member's caches have synced — so a member that is slow to list, or
//! unreachable from the start, occupies no worker at all.

use std::{collections::HashMap, sync::Arc, time::Duration};

use kube_informer::{ObjectKey, workqueue::RateLimitingQueue};
use parking_lot::Mutex;

use super::controller::ClusterKey;
use crate::controller::KeySink;

/// One member's keys on their way into the fleet's queue.
pub(super) struct Inbox {
    queue: RateLimitingQueue<ClusterKey>,
    cluster: Arc<str>,
    /// Keys queued before the member's caches synced (`true`: work that can wait); `None`
    /// once open.
    held: Mutex<Option<HashMap<ObjectKey, bool>>>,
}

impl Inbox {
    /// A closed inbox of `cluster`.
    pub(super) fn new(queue: RateLimitingQueue<ClusterKey>, cluster: Arc<str>) -> Self {
        Self {
            queue,
            cluster,
            held: Mutex::new(Some(HashMap::new())),
        }
    }

    fn tagged(&self, key: ObjectKey) -> ClusterKey {
        ClusterKey {
            cluster: self.cluster.clone(),
            key,
        }
    }

    /// Holds `key` if still closed; `false`: open, queue it.
    fn hold(&self, key: &ObjectKey, can_wait: bool) -> bool {
        let mut held = self.held.lock();
        let Some(held) = held.as_mut() else {
            return false;
        };
        // A live change of a held key makes it live.
        let entry = held.entry(key.clone()).or_insert(can_wait);
        *entry &= can_wait;
        true
    }

    /// Lets held and later keys through (the member's caches have synced).
    pub(super) fn open(&self) {
        let held = self.held.lock().take().unwrap_or_default();
        // Live changes first, then what can wait, as the queue would order them.
        let (later, live): (Vec<_>, Vec<_>) = held.into_iter().partition(|(_, wait)| *wait);
        for (key, _) in live {
            self.queue.add(self.tagged(key));
        }
        for (key, _) in later {
            self.queue.add_low_priority(self.tagged(key));
        }
    }
}

impl KeySink for Inbox {
    fn add(&self, key: ObjectKey) {
        if !self.hold(&key, false) {
            self.queue.add(self.tagged(key));
        }
    }

    fn add_after(&self, key: ObjectKey, delay: Duration) {
        // Held, it is queued when the member opens; the worker waits out a debounce's rest.
        if !self.hold(&key, false) {
            self.queue.add_after(self.tagged(key), delay);
        }
    }

    fn add_low_priority(&self, key: ObjectKey) {
        if !self.hold(&key, true) {
            self.queue.add_low_priority(self.tagged(key));
        }
    }
}

#[cfg(test)]
mod tests {
    use kube_informer::workqueue::QueueConfig;

    use super::*;

    #[tokio::test]
    async fn keys_wait_until_the_member_opens_and_a_live_change_goes_first() {
        let queue = RateLimitingQueue::new(QueueConfig::default());
        let inbox = Inbox::new(queue.clone(), "a".into());
        inbox.add_low_priority(ObjectKey::new(Some("ns"), "listed"));
        inbox.add_low_priority(ObjectKey::new(Some("ns"), "changed"));
        inbox.add(ObjectKey::new(Some("ns"), "changed"));
        assert_eq!(queue.len(), 0, "nothing queued before the caches sync");
        inbox.open();
        assert_eq!(queue.len(), 2, "each held key once");
        let first = queue.get().await.expect("queued");
        assert_eq!(first.key.name(), "changed", "the live change goes first");
        inbox.add(ObjectKey::new(Some("ns"), "after"));
        assert_eq!(queue.len(), 2, "open: straight into the queue");
    }
}
