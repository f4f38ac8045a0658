//! Holding a `coordination.k8s.io/v1` Lease: the one mechanism behind leader election and
//! shard membership.
//!
//! [`LeaseLock::try_acquire_or_renew`] is client-go's `tryAcquireOrRenew`: read the Lease;
//! if another holder renewed it within its duration *as measured on this machine's clock
//! since this process saw it change*, back off; otherwise write it with this identity,
//! with the `resourceVersion` read (optimistic concurrency: of two candidates writing at
//! once, one gets a 409). The Lease's timestamps are written for people and other tools but
//! never trusted for decisions, so clock skew between machines cannot make two holders.

#[cfg(feature = "testing")]
mod memory;
#[cfg(feature = "testing")]
mod partitionable;
mod record;
mod store;

use std::time::Duration;

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::ObjectMeta;
use parking_lot::Mutex;
use tokio::time::Instant;

use self::record::LeaseRecord;
pub use self::store::LeaseStore;
#[cfg(feature = "testing")]
pub use self::{memory::MemoryLeases, partitionable::Partitionable};

/// A Lease this process competes for (or holds), with what it last observed of it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::{sync::Arc, time::Duration};
/// use kube_informer_runtime::lease::{Attempt, LeaseLock, MemoryLeases};
///
/// let leases = Arc::new(MemoryLeases::default());
/// let a = LeaseLock::new(leases.clone(), "my-operator", "pod-a", Duration::from_secs(15));
/// let b = LeaseLock::new(leases, "my-operator", "pod-b", Duration::from_secs(15));
/// assert!(matches!(a.try_acquire_or_renew().await.unwrap(), Attempt::Held));
/// assert!(matches!(b.try_acquire_or_renew().await.unwrap(), Attempt::HeldBy(holder) if holder == "pod-a"));
/// # }
/// ```
pub struct LeaseLock {
    store: Arc<dyn LeaseStore>,
    labels: std::collections::BTreeMap<String, String>,
    name: String,
    identity: String,
    duration: Duration,
    observed: Mutex<Option<Observed>>,
}

/// The record as last read or written, and when (this machine's clock) it last changed.
#[derive(Debug, Clone)]
struct Observed {
    record: LeaseRecord,
    resource_version: Option<String>,
    at: Instant,
}

/// What one attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// This identity holds the Lease now (acquired or renewed).
    Held,
    /// Another holder's Lease is still valid.
    HeldBy(String),
}

impl std::fmt::Debug for LeaseLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseLock")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl LeaseLock {
    /// The Lease `name` in `store` (a `kube::Api<Lease>` of a namespace, or `MemoryLeases`
    /// with the feature `testing`), competed for as `identity`, held for `duration` after
    /// each renewal.
    pub fn new(store: Arc<dyn LeaseStore>, name: &str, identity: &str, duration: Duration) -> Self {
        Self {
            store,
            labels: std::collections::BTreeMap::new(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            duration,
            observed: Mutex::new(None),
        }
    }

    /// Labels written on the Lease (for finding a group of Leases, e.g. a shard ring's).
    #[must_use]
    pub fn labels(mut self, labels: std::collections::BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }

    /// The holder last observed (empty: none).
    pub fn observed_holder(&self) -> Option<String> {
        let observed = self.observed.lock();
        observed
            .as_ref()
            .map(|o| o.record.holder.clone())
            .filter(|h| !h.is_empty())
    }

    /// One attempt to acquire or renew the Lease (client-go's `tryAcquireOrRenew`).
    pub async fn try_acquire_or_renew(&self) -> Result<Attempt, kube::Error> {
        let read = self.store.get(&self.name).await?;
        // Stamped after the read is answered, never before it: a slow read must not make
        // the record it returns look older than it is (client-go does the same).
        let now = Instant::now();
        let current = match read {
            None => {
                let record = LeaseRecord::acquired(&self.identity, self.duration, 0);
                let created = self.store.create(&self.lease(&record, None)).await?;
                self.observe(record, created.metadata.resource_version, now);
                return Ok(Attempt::Held);
            }
            Some(lease) => lease,
        };
        let record = LeaseRecord::from_lease(&current);
        let resource_version = current.metadata.resource_version.clone();
        let observed_at = {
            let mut observed = self.observed.lock();
            match observed.as_mut() {
                Some(o) if o.record == record => o.at,
                _ => {
                    *observed = Some(Observed {
                        record: record.clone(),
                        resource_version: resource_version.clone(),
                        at: now,
                    });
                    now
                }
            }
        };
        let held_by_other = !record.holder.is_empty() && record.holder != self.identity;
        let valid_for =
            Duration::from_secs(u64::try_from(record.duration_seconds.max(1)).unwrap_or(1));
        if held_by_other && observed_at + valid_for > now {
            return Ok(Attempt::HeldBy(record.holder));
        }
        let next = if record.holder == self.identity {
            record.renewed(self.duration)
        } else {
            LeaseRecord::acquired(&self.identity, self.duration, record.transitions + 1)
        };
        let replaced = self
            .store
            .replace(&self.name, &self.lease(&next, resource_version))
            .await?;
        self.observe(next, replaced.metadata.resource_version, now);
        Ok(Attempt::Held)
    }

    /// Gives the Lease up, if held: holder emptied and a one-second duration, so another
    /// candidate acquires it at once (client-go's `ReleaseOnCancel`).
    pub async fn release(&self) -> Result<(), kube::Error> {
        let observed = self.observed.lock().clone();
        let Some(observed) = observed.filter(|o| o.record.holder == self.identity) else {
            return Ok(());
        };
        let released = observed.record.released();
        let lease = self.lease(&released, observed.resource_version.clone());
        self.store.replace(&self.name, &lease).await?;
        *self.observed.lock() = None;
        Ok(())
    }

    fn observe(&self, record: LeaseRecord, resource_version: Option<String>, at: Instant) {
        *self.observed.lock() = Some(Observed {
            record,
            resource_version,
            at,
        });
    }

    fn lease(&self, record: &LeaseRecord, resource_version: Option<String>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                resource_version,
                labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(record.to_spec()),
        }
    }
}
