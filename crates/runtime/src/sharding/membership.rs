//! Which shards are alive: each replica holds a Lease of its own, and an observer counts a
//! shard alive while its Lease keeps changing.
//!
//! # The safety argument
//!
//! A replica's shard Lease is held by a [`LeaderElector`](crate::leader_election::LeaderElector)
//! made from [`shard_lease`]: it renews like a leader, and its `leading` turns false at its
//! renew deadline once it cannot renew, whatever the API server or the network are doing —
//! the replica must then stop reconciling its shard. [`LiveShards`] stamps each Lease *after*
//! the read that returned it, on its own clock, and counts a shard dead only once its Lease
//! went unchanged for the Lease's duration since then. So, as for leader election, a shard
//! that stopped renewing has stopped reconciling `lease_duration − renew_deadline` (at
//! least one second, checked by `validate`) before any observer counts it dead and gives
//! its objects to another shard. Clock skew between machines does not matter (the Lease's
//! timestamps are never read for decisions); clock *rates* do, within parts per million.

use std::{collections::HashMap, sync::Arc, time::Duration};

use k8s_openapi::api::coordination::v1::Lease;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::Ring;
use crate::{leader_election::LeaderElectionConfig, lease::LeaseStore};

/// How long a read of the shard Leases may take before it is abandoned (an error; the
/// caller's next round reads again). A request that never answers — a partition the
/// connection does not notice — must not stop a sharder's rounds: its plans need a fresh
/// read, and a hung one would leave a dead shard's objects where they are for as long as
/// the client's own timeout (kube's is minutes).
pub(crate) const READ_LIMIT: Duration = Duration::from_secs(5);

/// The label that marks a Lease as one shard of a ring; its value is the ring's name.
pub const RING_LABEL: &str = "sharding.kube-informer.dev/ring";

/// The Lease configuration of `shard` in `ring`: the Lease `<ring>-<shard>`, held by
/// `shard`, labelled [`RING_LABEL`]`=<ring>`. Run a
/// [`LeaderElector`](crate::leader_election::LeaderElector) with it; while it leads, the
/// replica is a live shard of the ring.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::sync::Arc;
/// use kube_informer_runtime::{
///     CancellationToken,
///     leader_election::LeaderElector,
///     lease::MemoryLeases,
///     sharding::{LiveShards, shard_lease},
/// };
///
/// let leases = Arc::new(MemoryLeases::default()); // a `kube::Api<Lease>` in production
/// let shard = LeaderElector::new(leases.clone(), shard_lease("web", "replica-0")).unwrap();
/// let cancel = CancellationToken::new();
/// let run = tokio::spawn({ let (m, c) = (shard.clone(), cancel.clone()); async move { m.run(c).await } });
/// shard.leading().wait_for(|alive| *alive).await.unwrap();
///
/// let live = LiveShards::new(leases, "web");
/// let ring = live.observe().await.unwrap();
/// assert_eq!(ring.shards().collect::<Vec<_>>(), ["replica-0"]);
/// cancel.cancel();
/// run.await.unwrap();
/// # }
/// ```
pub fn shard_lease(ring: &str, shard: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new(lease_name(ring, shard))
        .identity(shard)
        .labels([(RING_LABEL, ring)])
}

fn lease_name(ring: &str, shard: &str) -> String {
    format!("{ring}-{shard}")
}

/// An observer of a ring's shard Leases: which shards are alive now (see the module docs).
pub struct LiveShards {
    store: Arc<dyn LeaseStore>,
    ring: String,
    /// Used when a Lease does not say its duration.
    default_duration: Duration,
    seen: Mutex<HashMap<String, Seen>>,
    /// The last ring made, reused while the live shards stay the same.
    last: Mutex<Ring>,
}

/// A Lease as last observed, and when (this machine's clock) it last changed.
struct Seen {
    resource_version: Option<String>,
    holder: String,
    changed_at: Instant,
}

impl std::fmt::Debug for LiveShards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveShards")
            .field("ring", &self.ring)
            .finish_non_exhaustive()
    }
}

impl LiveShards {
    /// Observes the shard Leases of `ring` in `store` (the namespace's `kube::Api<Lease>`,
    /// or `MemoryLeases`, feature `testing`).
    pub fn new(store: impl LeaseStore, ring: impl Into<String>) -> Self {
        Self {
            store: Arc::new(store),
            ring: ring.into(),
            default_duration: Duration::from_secs(15),
            seen: Mutex::new(HashMap::new()),
            last: Mutex::new(Ring::default()),
        }
    }

    /// Lists the ring's Leases and gives the ring of the shards alive now: held (by the
    /// shard the Lease is named after) and changed within the Lease's duration since this
    /// observer saw it change. A Lease seen for the first time counts as changed now: an
    /// observer that just started keeps a shard one duration too long, never too short.
    /// A read not answered within 5 s is abandoned with an error.
    pub async fn observe(&self) -> Result<Ring, kube::Error> {
        let list = self.store.list(RING_LABEL, &self.ring);
        let leases = tokio::time::timeout(READ_LIMIT, list).await.map_err(|_| {
            let hung = std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("reading the shard Leases: no answer within {READ_LIMIT:?}"),
            );
            kube::Error::Service(Box::new(hung))
        })??;
        // Stamped after the answer, never before it (see the module docs).
        let now = Instant::now();
        let mut seen = self.seen.lock();
        seen.retain(|name, _| {
            leases
                .iter()
                .any(|l| l.metadata.name.as_ref() == Some(name))
        });
        let mut alive = Vec::new();
        for lease in &leases {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            let holder = holder(lease);
            let resource_version = lease.metadata.resource_version.clone();
            let entry = seen.entry(name.clone()).or_insert_with(|| Seen {
                resource_version: resource_version.clone(),
                holder: holder.clone(),
                changed_at: now,
            });
            if entry.resource_version != resource_version || entry.holder != holder {
                *entry = Seen {
                    resource_version,
                    holder: holder.clone(),
                    changed_at: now,
                };
            }
            let duration = lease
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.default_duration, Duration::from_secs);
            let fresh = now.saturating_duration_since(entry.changed_at) < duration;
            if !holder.is_empty() && name == lease_name(&self.ring, &holder) && fresh {
                alive.push(holder);
            }
        }
        drop(seen);
        alive.sort();
        alive.dedup();
        let mut last = self.last.lock();
        if !last.shards().eq(alive.iter().map(String::as_str)) {
            *last = Ring::new(alive);
        }
        Ok(last.clone())
    }
}

fn holder(lease: &Lease) -> String {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default()
}
