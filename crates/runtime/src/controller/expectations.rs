//! [`Expectations`]: what a controller has asked the API server to create or delete for an
//! object and not yet seen in its cache (client-go's `ControllerExpectations`).
//!
//! A reconcile that creates three pods for a ReplicaSet and is called again before the
//! informer has seen them would count zero pods in the cache and create three more. Record
//! the writes with [`Expectations::expect_creations`]; the controller's owned-object
//! handlers mark each created (or deleted) child as observed; until every expected change
//! is observed — or the expectations are five minutes old, in case an event was missed —
//! [`Expectations::satisfied`] says no, and the reconcile should not act on the counts.

use std::{collections::HashMap, sync::Arc, time::Duration};

use kube_informer::ObjectKey;
use parking_lot::Mutex;
use tokio::time::Instant;

/// How long expectations are trusted (client-go's `ExpectationsTimeout`).
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Clone, Copy)]
struct Pending {
    creations: i64,
    deletions: i64,
    set_at: Instant,
}

/// Creations and deletions expected per owner key. Cheap to clone (clones share them).
///
/// ```
/// use kube_informer::ObjectKey;
/// use kube_informer_runtime::controller::Expectations;
///
/// let expectations = Expectations::default();
/// let owner = ObjectKey::new(Some("shop"), "web");
/// assert!(expectations.satisfied(&owner)); // nothing expected
/// expectations.expect_creations(&owner, 2); // we just created two pods
/// expectations.creation_observed(&owner); // the informer saw one
/// assert!(!expectations.satisfied(&owner));
/// expectations.creation_observed(&owner);
/// assert!(expectations.satisfied(&owner));
/// ```
#[derive(Clone, Default)]
pub struct Expectations {
    pending: Arc<Mutex<HashMap<ObjectKey, Pending>>>,
}

impl std::fmt::Debug for Expectations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expectations")
            .field("owners", &self.pending.lock().len())
            .finish()
    }
}

impl Expectations {
    /// Expects `count` creations for `owner` (replacing earlier expectations).
    pub fn expect_creations(&self, owner: &ObjectKey, count: usize) {
        self.set(owner, count, 0);
    }

    /// Expects `count` deletions for `owner` (replacing earlier expectations).
    pub fn expect_deletions(&self, owner: &ObjectKey, count: usize) {
        self.set(owner, 0, count);
    }

    fn set(&self, owner: &ObjectKey, creations: usize, deletions: usize) {
        let pending = Pending {
            creations: i64::try_from(creations).unwrap_or(i64::MAX),
            deletions: i64::try_from(deletions).unwrap_or(i64::MAX),
            set_at: Instant::now(),
        };
        self.pending.lock().insert(owner.clone(), pending);
    }

    /// A creation of one of `owner`'s children was observed, or one that was expected
    /// will not happen (its create failed): expect one creation less.
    pub fn creation_observed(&self, owner: &ObjectKey) {
        if let Some(p) = self.pending.lock().get_mut(owner.as_str()) {
            p.creations -= 1;
        }
    }

    /// A deletion of one of `owner`'s children was observed.
    pub fn deletion_observed(&self, owner: &ObjectKey) {
        if let Some(p) = self.pending.lock().get_mut(owner.as_str()) {
            p.deletions -= 1;
        }
    }

    /// Whether the cache can be trusted for `owner`: nothing is expected, everything
    /// expected was observed, or the expectations are older than
    /// [`EXPECTATIONS_TIMEOUT`].
    pub fn satisfied(&self, owner: &ObjectKey) -> bool {
        let pending = self.pending.lock();
        pending.get(owner.as_str()).is_none_or(|p| {
            (p.creations <= 0 && p.deletions <= 0) || p.set_at.elapsed() > EXPECTATIONS_TIMEOUT
        })
    }

    /// Forgets `owner`'s expectations (it was deleted).
    pub fn forget(&self, owner: &ObjectKey) {
        self.pending.lock().remove(owner.as_str());
    }
}
