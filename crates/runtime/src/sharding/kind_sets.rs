//! [`KindSets`]: the kinds a ring's sharder places, as they come and go — a manager's
//! sharded controllers' (fixed once it runs) and each fleet member's (while it is engaged).

use std::collections::BTreeMap;

use tokio::sync::watch;

use super::ShardedKind;

/// The sharded kinds by who placed them (`""` for a manager's controllers,
/// `<controller>/<cluster>` for a fleet member's). Cheap to clone: clones share the sets.
#[derive(Clone)]
pub(crate) struct KindSets(watch::Sender<BTreeMap<String, Vec<ShardedKind>>>);

impl Default for KindSets {
    fn default() -> Self {
        Self(watch::channel(BTreeMap::new()).0)
    }
}

impl KindSets {
    /// Adds `kinds` to the set `by`.
    pub(crate) fn extend(&self, by: &str, kinds: &[ShardedKind]) {
        if kinds.is_empty() {
            return;
        }
        self.0.send_modify(|sets| {
            sets.entry(by.to_owned())
                .or_default()
                .extend_from_slice(kinds);
        });
    }

    /// Drops the set `by`.
    pub(crate) fn remove(&self, by: &str) {
        self.0.send_if_modified(|sets| sets.remove(by).is_some());
    }

    /// Every kind now.
    pub(crate) fn all(&self) -> Vec<ShardedKind> {
        self.0.borrow().values().flatten().cloned().collect()
    }

    /// Told of every change.
    pub(crate) fn subscribe(&self) -> watch::Receiver<BTreeMap<String, Vec<ShardedKind>>> {
        self.0.subscribe()
    }
}
