//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! `tools/leaderelection` semantics: one leader among any number of candidates, handed over
//! when it stops renewing (crash, partition) or releases (shutdown).
//!
//! # The safety argument
//!
//! A candidate takes over only after the Lease went unchanged for the lease duration *as
//! measured on its own clock since it saw the last change* — never from the timestamps in
//! the Lease, so clock skew between machines does not matter (only clock *rate* does).
//!
//! Let the leader's last successful write (an acquisition or a renewal) *start* at `S` and
//! land in the Lease at `W ≥ S`. The leader stops leading at `S + renew_deadline`
//! ([`LeaderElector::leading`] turns false then, whatever the API server or the network
//! are doing: a hung request cannot delay it). Another candidate sees that record in the
//! answer to a read, which it receives at some `G ≥ W`, and stamps it then (after the
//! read, never before it: a slow read cannot make the record look older than it is); it
//! may write the Lease only after `G + lease_duration ≥ S + lease_duration`, and its write
//! carries the resourceVersion it read, so it fails if the leader renewed meanwhile.
//! Hence the old leader has stepped down `lease_duration − renew_deadline` before anyone
//! else can lead — for every configuration [`validate`](LeaderElectionConfig::validate)
//! accepts, which requires that margin to be at least [`MIN_MARGIN`] (1 s), the time
//! the old leader's reconciles have to stop. What remains outside the argument: clock
//! *rates* (drift is parts per million), a process that does not run at all (a blocking
//! task starving the runtime — [`LeaderElector::stalled`] reports it, and the manager's
//! `/healthz` fails on it), and requests already on the wire when leadership ends.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::coordination::v1::Lease;
//! use kube_informer_runtime::{
//!     CancellationToken,
//!     leader_election::{LeaderElectionConfig, LeaderElector},
//! };
//!
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let leases: kube::Api<Lease> = kube::Api::namespaced(client, "operators");
//! let elector = LeaderElector::new(leases, LeaderElectionConfig::new("my-operator"))?;
//! let mut leading = elector.leading();
//! let cancel = CancellationToken::new();
//! tokio::spawn({ let elector = elector.clone(); let cancel = cancel.clone(); async move { elector.run(cancel).await } });
//! leading.wait_for(|l| *l).await?; // became leader: start reconciling
//! leading.wait_for(|l| !*l).await?; // lost it: stop at once
//! # Ok(()) }
//! ```

mod config;

use std::{sync::Arc, time::Duration};

use parking_lot::Mutex;
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

pub use self::config::{ConfigError, LeaderElectionConfig, MIN_MARGIN};
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
/// let leases = MemoryLeases::default(); // a `kube::Api<Lease>` in production
/// let config = LeaderElectionConfig::new("my-operator").identity("pod-a");
/// let elector = LeaderElector::new(leases, config).unwrap();
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
    /// Terms begun: bumped each time leadership begins, before `leading` turns true.
    term: std::sync::atomic::AtomicU64,
    leader: watch::Sender<Option<String>>,
    last_error: Mutex<Option<String>>,
    /// While leading: the wall-clock instant by which the elector must renew or step down
    /// (for [`LeaderElector::stalled`], which must not depend on the elector running).
    must_renew_by: Mutex<Option<std::time::Instant>>,
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
    /// A candidate for the Lease of `config`, reading and writing it in `store`: a
    /// `kube::Api<Lease>` of the Lease's namespace (the [`Manager`](crate::Manager)
    /// makes it from its client and [`LeaderElectionConfig::namespace`]), or
    /// `MemoryLeases` (feature `testing`) in tests.
    pub fn new(
        store: impl crate::lease::LeaseStore,
        config: LeaderElectionConfig,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let store: Arc<dyn crate::lease::LeaseStore> = Arc::new(store);
        let lock = LeaseLock::new(store, &config.name, &config.identity, config.lease_duration)
            .labels(config.labels.clone());
        Ok(Self {
            inner: Arc::new(Inner {
                lock,
                config,
                leading: watch::channel(false).0,
                term: std::sync::atomic::AtomicU64::new(0),
                leader: watch::channel(None).0,
                last_error: Mutex::new(None),
                must_renew_by: Mutex::new(None),
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

    /// How many terms this candidate has begun (0 before the first). A watch of
    /// [`leading`](Self::leading) keeps only the newest value: a step-down and a new term
    /// that both land before the watcher looks read as "still leading". Compare the term
    /// at each look with the one the work started under: a different one means leadership
    /// was lost in between (another candidate may have led), and that work must stop.
    ///
    /// ```
    /// # fn example(elector: &kube_informer_runtime::leader_election::LeaderElector) {
    /// let started_under = elector.term();
    /// // ... later, on a change of `leading()` ...
    /// let still_the_same_term = elector.is_leading() && elector.term() == started_under;
    /// # let _ = still_the_same_term;
    /// # }
    /// ```
    pub fn term(&self) -> u64 {
        self.inner.term.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The holder of the Lease as last observed (client-go's `OnNewLeader`).
    pub fn leader(&self) -> watch::Receiver<Option<String>> {
        self.inner.leader.subscribe()
    }

    /// The newest failure to read or write the Lease.
    pub fn last_error(&self) -> Option<String> {
        self.inner.last_error.lock().clone()
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &LeaderElectionConfig {
        &self.inner.config
    }

    /// How long past its renew deadline this candidate still says it leads, if it does:
    /// the elector did not get to run (a reconcile blocking the runtime's threads starves
    /// it). Read on the wall clock, without the elector's help; a manager's `/healthz`
    /// fails on it, so the kubelet restarts a process that cannot prove it leads.
    pub fn stalled(&self) -> Option<Duration> {
        let deadline = (*self.inner.must_renew_by.lock())?;
        let late = std::time::Instant::now().checked_duration_since(deadline)?;
        (self.is_leading() && late > Duration::ZERO).then_some(late)
    }

    /// Campaigns until `cancel`: acquires, renews while it can, and campaigns again after
    /// losing. On cancel, leadership ends at once; a renewal on the wire is let finish (so
    /// the release below carries the Lease's newest resourceVersion), then a leader
    /// releases the Lease (if [`LeaderElectionConfig::release_on_cancel`]) so another
    /// candidate takes over at once. If this future is dropped or panics, `leading` turns
    /// false all the same.
    pub async fn run(&self, cancel: CancellationToken) {
        let _stepped_down = StepDownOnDrop(self);
        while !cancel.is_cancelled() {
            let Some(started) = self.acquire(&cancel).await else {
                break;
            };
            self.renew(started, &cancel).await;
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
        if !leading {
            *self.inner.must_renew_by.lock() = None;
        }
        self.inner.leading.send_if_modified(|l| {
            let changed = *l != leading;
            if changed && leading {
                // Before the value is seen: a watcher that sees `true` sees its term.
                self.inner
                    .term
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
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

    /// Records a successful write that started at `started`: leadership is proven until
    /// `started + renew_deadline`.
    fn proven(&self, started: Instant) {
        let left =
            (started + self.inner.config.renew_deadline).saturating_duration_since(Instant::now());
        *self.inner.must_renew_by.lock() = Some(std::time::Instant::now() + left);
    }

    /// Tries every retry period (jittered) until it holds the Lease; when the successful
    /// attempt started, or `None` if cancelled.
    async fn acquire(&self, cancel: &CancellationToken) -> Option<Instant> {
        let config = &self.inner.config;
        loop {
            let started = Instant::now();
            let attempt = self.attempt(config.retry_period);
            tokio::select! {
                () = cancel.cancelled() => return None,
                held = attempt => if held {
                    self.proven(started);
                    self.set_leading(true);
                    return Some(started);
                },
            }
            let wait = jittered(config.retry_period);
            tokio::select! {
                () = cancel.cancelled() => return None,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Renews every retry period while leading; returns when the renew deadline passed
    /// without a renewal (measured from the *start* of the last successful write, the
    /// acquisition included), or on cancel.
    async fn renew(&self, acquired: Instant, cancel: &CancellationToken) {
        let config = &self.inner.config;
        let mut renewed_at = acquired;
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
            let attempt = self.attempt(limit.max(Duration::from_millis(1)));
            let mut attempt = std::pin::pin!(attempt);
            let renewed = tokio::select! {
                held = &mut attempt => held,
                () = cancel.cancelled() => {
                    // Leadership ends now; the write on the wire is let land (bounded by
                    // the renew deadline), so a release carries its resourceVersion
                    // instead of failing with a 409 and leaving the Lease to expire.
                    self.set_leading(false);
                    attempt.await;
                    return;
                }
                () = tokio::time::sleep_until(deadline) => {
                    self.failed(format!(
                        "lease {}: not renewed within the renew deadline {:?}; stepping down",
                        config.name, config.renew_deadline
                    ));
                    return;
                }
            };
            if renewed {
                renewed_at = started;
                self.proven(started);
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

/// Sets `leading` to false when the campaign ends in any way, a panic or a drop included:
/// a dead elector never leaves `leading` true.
struct StepDownOnDrop<'a>(&'a LeaderElector);

impl Drop for StepDownOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set_leading(false);
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
