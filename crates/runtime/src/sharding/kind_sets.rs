//! [`KindSets`]: the kinds a ring's sharder places, as they come and go — a manager's
//! sharded controllers' (fixed once it runs) and each fleet member's (while it is engaged).
//! The sharder places each set on its own, so one member's unsynced cache or unanswered
//! write holds back that member's objects only, and a member engaged or gone starts or
//! stops that member's caches only.

use std::collections::BTreeMap;

use tokio::sync::watch;

use super::ShardedKind;

/// One set: its kinds, and a serial that changes whenever they do (a member engaged anew
/// with another client has new kinds under the same name).
#[derive(Clone)]
pub(crate) struct KindSet {
    pub(crate) serial: u64,
    pub(crate) kinds: Vec<ShardedKind>,
}

/// The sharded kinds by who placed them (`""` for a manager's controllers,
/// `<controller>/<cluster>` for a fleet member's). Cheap to clone: clones share the sets.
#[derive(Clone)]
pub(crate) struct KindSets(watch::Sender<(u64, BTreeMap<String, KindSet>)>);

impl Default for KindSets {
    fn default() -> Self {
        Self(watch::channel((0, BTreeMap::new())).0)
    }
}

impl KindSets {
    /// Adds `kinds` to the set `by`.
    pub(crate) fn extend(&self, by: &str, kinds: &[ShardedKind]) {
        if kinds.is_empty() {
            return;
        }
        self.0.send_modify(|(serials, sets)| {
            *serials += 1;
            let set = sets.entry(by.to_owned()).or_insert_with(|| KindSet {
                serial: 0,
                kinds: Vec::new(),
            });
            set.serial = *serials;
            set.kinds.extend_from_slice(kinds);
        });
    }

    /// Drops the set `by`.
    pub(crate) fn remove(&self, by: &str) {
        self.0
            .send_if_modified(|(_, sets)| sets.remove(by).is_some());
    }

    /// Every kind now.
    pub(crate) fn all(&self) -> Vec<ShardedKind> {
        let sets = self.0.borrow();
        sets.1.values().flat_map(|s| s.kinds.clone()).collect()
    }

    /// Every set now, by who placed it.
    pub(crate) fn sets(&self) -> BTreeMap<String, KindSet> {
        self.0.borrow().1.clone()
    }

    /// Told of every change.
    pub(crate) fn subscribe(&self) -> watch::Receiver<(u64, BTreeMap<String, KindSet>)> {
        self.0.subscribe()
    }
}
