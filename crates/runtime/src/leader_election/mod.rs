//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! `tools/leaderelection` semantics: one leader among any number of candidates, handed over
//! when it stops renewing (crash, partition) or releases (shutdown).
//!
//! # The safety argument
//!
//! A candidate takes over only after the Lease went unchanged for the lease duration *as
//! measured on its own clock since it saw the last change* — never from the timestamps in
//! the Lease, so clock skew between machines does not matter (only clock *rate* does). The
//! leader, for its part, stops leading as soon as it has failed to renew for the renew
//! deadline, measured from the start of its last successful renewal. Since that renewal
//! changed the Lease no earlier than it started, and the renew deadline (10 s) is shorter
//! than the lease duration (15 s), the old leader has stopped before any other candidate
//! may start. [`LeaderElector::leading`] turns false at that instant, whatever the API
//! server or the network are doing (a hung request cannot delay it).
//!
//! ```no_run
//! use std::time::Duration;
//! use kube_informer_runtime::leader_election::{LeaderElectionConfig, LeaderElector};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let config = LeaderElectionConfig::new("my-operator", "operators", "pod-7f9c");
//! let elector = LeaderElector::new(client, config)?;
//! let mut leading = elector.leading();
//! let cancel = CancellationToken::new();
//! tokio::spawn({ let elector = elector.clone(); let cancel = cancel.clone(); async move { elector.run(cancel).await } });
//! leading.wait_for(|l| *l).await?; // became leader: start reconciling
//! leading.wait_for(|l| !*l).await?; // lost it: stop at once
//! # Ok(()) }
//! ```

mod config;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use parking_lot::Mutex;
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

pub use self::config::{ConfigError, LeaderElectionConfig};
use crate::lease::{Attempt, LeaseLock};

/// Competes for a Lease and says whether this candidate leads. Cheap to clone.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::{sync::Arc, time::Duration};
/// use kube_informer_runtime::{
///     leader_election::{LeaderElectionConfig, LeaderElector},
///     lease::MemoryLeases,
/// };
/// use tokio_util::sync::CancellationToken;
///
/// let leases = Arc::new(MemoryLeases::default()); // `LeaderElector::new(client, ..)` in production
/// let config = LeaderElectionConfig::new("my-operator", "operators", "pod-a");
/// let elector = LeaderElector::with_store(leases, config).unwrap();
/// let mut leading = elector.leading();
/// let cancel = CancellationToken::new();
/// tokio::spawn({ let e = elector.clone(); let c = cancel.clone(); async move { e.run(c).await } });
/// leading.wait_for(|leads| *leads).await.unwrap();
/// assert!(elector.is_leading());
/// cancel.cancel(); // releases the Lease: another candidate takes over at once
/// # }
/// ```
#[derive(Clone)]
pub struct LeaderElector {
    inner: Arc<Inner>,
}

struct Inner {
    lock: LeaseLock,
    config: LeaderElectionConfig,
    leading: watch::Sender<bool>,
    leader: watch::Sender<Option<String>>,
    last_error: Mutex<Option<String>>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("lease", &self.inner.config.name)
            .field("identity", &self.inner.config.identity)
            .field("leading", &self.is_leading())
            .finish()
    }
}

impl LeaderElector {
    /// A candidate for the Lease of `config`, writing through `client`.
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> Result<Self, ConfigError> {
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        Self::with_store(Arc::new(api), config)
    }

    /// A candidate reading and writing its Lease in `store` (e.g.
    /// [`MemoryLeases`](crate::lease::MemoryLeases) in tests).
    pub fn with_store(
        store: Arc<dyn crate::lease::LeaseStore>,
        config: LeaderElectionConfig,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let lock = LeaseLock::new(store, &config.name, &config.identity, config.lease_duration);
        Ok(Self {
            inner: Arc::new(Inner {
                lock,
                config,
                leading: watch::channel(false).0,
                leader: watch::channel(None).0,
                last_error: Mutex::new(None),
            }),
        })
    }

    /// Whether this candidate leads now.
    pub fn is_leading(&self) -> bool {
        *self.inner.leading.borrow()
    }

    /// Leadership as it changes: `true` when this candidate became leader, `false` the
    /// instant it can no longer prove it leads.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.inner.leading.subscribe()
    }

    /// The holder of the Lease as last observed (client-go's `OnNewLeader`).
    pub fn leader(&self) -> watch::Receiver<Option<String>> {
        self.inner.leader.subscribe()
    }

    /// The newest failure to read or write the Lease.
    pub fn last_error(&self) -> Option<String> {
        self.inner.last_error.lock().clone()
    }

    /// Campaigns until `cancel`: acquires, renews while it can, and campaigns again after
    /// losing. On cancel, a leader releases the Lease (if
    /// [`LeaderElectionConfig::release_on_cancel`]) so another candidate takes over at once.
    pub async fn run(&self, cancel: CancellationToken) {
        while !cancel.is_cancelled() {
            if !self.acquire(&cancel).await {
                break;
            }
            self.renew(&cancel).await;
            self.set_leading(false);
        }
        self.set_leading(false);
        if self.inner.config.release_on_cancel
            && let Err(err) = self.inner.lock.release().await
        {
            self.failed(format!("releasing the lease failed: {err}"));
        }
    }

    fn set_leading(&self, leading: bool) {
        self.inner.leading.send_if_modified(|l| {
            let changed = *l != leading;
            *l = leading;
            changed
        });
        if leading {
            tracing::info!(lease = %self.inner.config.name, identity = %self.inner.config.identity, "became leader");
        }
    }

    fn failed(&self, message: String) {
        tracing::warn!(lease = %self.inner.config.name, "{message}");
        *self.inner.last_error.lock() = Some(message);
    }

    /// One attempt, within `limit`; whether it holds the Lease now.
    async fn attempt(&self, limit: Duration) -> bool {
        let attempt = tokio::time::timeout(limit, self.inner.lock.try_acquire_or_renew()).await;
        let held = match attempt {
            Ok(Ok(Attempt::Held)) => true,
            Ok(Ok(Attempt::HeldBy(_))) => false,
            Ok(Err(err)) => {
                self.failed(format!("lease {}: {err}", self.inner.config.name));
                false
            }
            Err(_) => {
                self.failed(format!(
                    "lease {}: no answer within {limit:?}",
                    self.inner.config.name
                ));
                false
            }
        };
        let holder = self.inner.lock.observed_holder();
        self.inner.leader.send_if_modified(|l| {
            let changed = *l != holder;
            *l = holder;
            changed
        });
        held
    }

    /// Tries every retry period (jittered) until it holds the Lease; `false` if cancelled.
    async fn acquire(&self, cancel: &CancellationToken) -> bool {
        let config = &self.inner.config;
        loop {
            if self.attempt(config.retry_period).await {
                self.set_leading(true);
                return true;
            }
            let wait = jittered(config.retry_period);
            tokio::select! {
                () = cancel.cancelled() => return false,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Renews every retry period while leading; returns when the renew deadline passed
    /// without a renewal (measured from the start of the last successful one), or on
    /// cancel.
    async fn renew(&self, cancel: &CancellationToken) {
        let config = &self.inner.config;
        let mut renewed_at = Instant::now();
        loop {
            let deadline = renewed_at + config.renew_deadline;
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep_until(deadline) => {
                    self.failed(format!(
                        "lease {}: not renewed within the renew deadline {:?}; stepping down",
                        config.name, config.renew_deadline
                    ));
                    return;
                }
                () = tokio::time::sleep(config.retry_period) => {}
            }
            let started = Instant::now();
            let limit = deadline.saturating_duration_since(started);
            let renewed = tokio::select! {
                () = cancel.cancelled() => return,
                held = self.attempt(limit.max(Duration::from_millis(1))) => held,
            };
            if renewed {
                renewed_at = started;
            } else if self
                .inner
                .lock
                .observed_holder()
                .is_some_and(|h| h != config.identity)
            {
                self.failed(format!(
                    "lease {}: taken over by another candidate",
                    config.name
                ));
                return;
            }
        }
    }
}

/// `period` stretched by up to client-go's jitter factor (1.2): candidates do not retry in
/// lockstep.
fn jittered(period: Duration) -> Duration {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    let unit = (random >> 11) as f64 / (1u64 << 53) as f64;
    period + period.mul_f64(config::JITTER_FACTOR * unit)
}
