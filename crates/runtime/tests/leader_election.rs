//! Leader election with paused clocks on in-memory Leases (the same optimistic concurrency as
//! the API server): one leader among two or three candidates, handover after a crash, a
//! leader stepping down during an outage before anyone else may lead, release on cancel,
//! and random schedules — never two leaders at once.

use std::{future::Future, sync::Arc, time::Duration};

use futures_util::future::BoxFuture;
use kube_informer_runtime::{
    leader_election::{LeaderElectionConfig, LeaderElector},
    lease::{LeaseStore, MemoryLeases},
};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// (candidate, from, until) of every leadership, closed or still open.
type Terms = Arc<Mutex<Vec<(String, Instant, Option<Instant>)>>>;

struct Candidate {
    name: String,
    elector: LeaderElector,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new("operator").identity(identity)
}

/// Starts a candidate whose terms are recorded into `terms`.
fn candidate(store: &Arc<MemoryLeases>, identity: &str, terms: &Terms, release: bool) -> Candidate {
    let store: Arc<dyn LeaseStore> = store.clone();
    let elector = LeaderElector::new(store, config(identity).release_on_cancel(release)).unwrap();
    let mut leading = elector.leading();
    let (terms, name) = (terms.clone(), identity.to_owned());
    tokio::spawn(async move {
        while leading.changed().await.is_ok() {
            let now = Instant::now();
            let mut terms = terms.lock();
            let open = terms.iter().any(|t| t.0 == name && t.2.is_none());
            // A step-down and a re-acquisition in the same instant arrive as one change.
            if *leading.borrow() && !open {
                terms.push((name.clone(), now, None));
            } else if let Some(open) = terms
                .iter_mut()
                .rev()
                .find(|t| t.0 == name && t.2.is_none())
            {
                open.2 = Some(now);
            }
        }
    });
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (elector, cancel) = (elector.clone(), cancel.clone());
        async move { elector.run(cancel).await }
    });
    Candidate {
        name: identity.to_owned(),
        elector,
        cancel,
        task,
    }
}

/// No two terms overlap (a term still open counts as running until `now`).
fn assert_never_two_leaders(terms: &Terms) {
    let now = Instant::now();
    let terms = terms.lock().clone();
    for (i, a) in terms.iter().enumerate() {
        for b in &terms[i + 1..] {
            let (a_end, b_end) = (a.2.unwrap_or(now), b.2.unwrap_or(now));
            let overlap = a.1 < b_end && b.1 < a_end;
            assert!(
                !overlap || a.0 == b.0,
                "two leaders at once: {a:?} and {b:?}"
            );
        }
    }
}

/// A crash: the candidate's task dies without stepping down or releasing; a dead process
/// reconciles nothing, so its term ends now.
async fn crash(terms: &Terms, victim: &Candidate) {
    victim.task.abort();
    // Let the recorder catch up with a term that began at this very instant.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let now = Instant::now();
    let mut terms = terms.lock();
    if let Some(open) = terms
        .iter_mut()
        .rev()
        .find(|t| t.0 == victim.name && t.2.is_none())
    {
        open.2 = Some(now);
    }
}

fn leaders(candidates: &[Candidate]) -> Vec<String> {
    candidates
        .iter()
        .filter(|c| c.elector.is_leading())
        .map(|c| c.name.clone())
        .collect()
}

/// Every candidate's `LeaderElector::leader` names `leader` (client-go's `OnNewLeader`).
fn assert_all_see<'a>(candidates: impl IntoIterator<Item = &'a Candidate>, leader: &str) {
    for c in candidates {
        let seen = c.elector.leader().borrow().clone();
        assert_eq!(seen.as_deref(), Some(leader), "as {} sees it", c.name);
    }
}

#[tokio::test(start_paused = true)]
async fn one_leader_among_three_and_a_crash_hands_over_after_the_lease_duration() {
    let (store, terms) = (Arc::new(MemoryLeases::default()), Terms::default());
    let candidates: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|id| candidate(&store, id, &terms, false))
        .collect();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let first = leaders(&candidates);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_all_see(&candidates, &first[0]);
    // The leader crashes: it stops renewing without releasing.
    let crashed = candidates.iter().position(|c| c.name == first[0]).unwrap();
    crash(&terms, &candidates[crashed]).await;
    let crashed_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let next = leaders(&candidates);
    assert_eq!(
        next.len(),
        1,
        "a new leader, and the aborted one no longer says it leads: {next:?}"
    );
    assert_ne!(next[0], first[0]);
    let alive = candidates.iter().filter(|c| c.name != first[0]);
    assert_all_see(alive, &next[0]);
    let (_, from, _) = terms
        .lock()
        .iter()
        .find(|t| t.0 != first[0])
        .cloned()
        .unwrap();
    let waited = from - crashed_at;
    assert!(
        waited >= Duration::from_secs(13),
        "took over after {waited:?}"
    );
    assert!(
        waited <= Duration::from_secs(15 + 5),
        "took over after {waited:?}"
    );
    assert_never_two_leaders(&terms);
}

#[tokio::test(start_paused = true)]
async fn an_outage_longer_than_the_renew_deadline_steps_the_leader_down_first() {
    let (store, terms) = (Arc::new(MemoryLeases::default()), Terms::default());
    let candidates: Vec<_> = ["a", "b"]
        .iter()
        .map(|id| candidate(&store, id, &terms, true))
        .collect();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(leaders(&candidates).len(), 1);
    store.set_failing(true);
    let outage = Instant::now();
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert!(
        leaders(&candidates).is_empty(),
        "the leader stepped down within the renew deadline"
    );
    let stepped_down = terms.lock()[0].2.unwrap();
    assert!(stepped_down - outage <= Duration::from_secs(10));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(
        leaders(&candidates).is_empty(),
        "nobody leads while the API server is down"
    );
    store.set_failing(false);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        leaders(&candidates).len(),
        1,
        "a leader again after the outage"
    );
    assert_never_two_leaders(&terms);
}

#[tokio::test(start_paused = true)]
async fn a_hung_api_server_cannot_delay_stepping_down() {
    let (store, terms) = (Arc::new(MemoryLeases::default()), Terms::default());
    let candidates: Vec<_> = ["a", "b"]
        .iter()
        .map(|id| candidate(&store, id, &terms, true))
        .collect();
    tokio::time::sleep(Duration::from_secs(10)).await;
    store.set_hanging(true);
    let hung = Instant::now();
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(leaders(&candidates).is_empty());
    assert!(terms.lock()[0].2.unwrap() - hung <= Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_leader_releases_and_the_next_takes_over_at_once() {
    let (store, terms) = (Arc::new(MemoryLeases::default()), Terms::default());
    let candidates: Vec<_> = ["a", "b"]
        .iter()
        .map(|id| candidate(&store, id, &terms, true))
        .collect();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let leader = candidates.iter().find(|c| c.elector.is_leading()).unwrap();
    leader.cancel.cancel();
    let released = Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let next = leaders(&candidates);
    assert_eq!(next.len(), 1);
    assert_ne!(next[0], leader.name);
    let from = terms.lock().last().unwrap().1;
    // The next candidate's retry period (2 s) stretched by client-go's jitter factor 1.2 at
    // most: 4.4 s, however the jitter falls.
    assert!(
        from - released <= Duration::from_millis(4400),
        "within one jittered retry period: {:?}",
        from - released
    );
    let lease = store.lease("operator").unwrap();
    assert_eq!(lease.spec.unwrap().lease_transitions, Some(1));
    assert_never_two_leaders(&terms);
}

/// Random joins, crashes, releases and outages, 100 seeds: never two leaders at once.
#[tokio::test(start_paused = true)]
async fn random_schedules_never_make_two_leaders() {
    for seed in 1..=100u64 {
        let (store, terms) = (Arc::new(MemoryLeases::default()), Terms::default());
        let mut rng = seed;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut live: Vec<Candidate> = Vec::new();
        for step in 0..12 {
            match next() % 5 {
                0 | 1 => live.push(candidate(
                    &store,
                    &format!("c{seed}-{step}"),
                    &terms,
                    next() % 2 == 0,
                )),
                2 if !live.is_empty() => {
                    let victim = live.remove((next() % live.len() as u64) as usize);
                    crash(&terms, &victim).await;
                }
                3 if !live.is_empty() => {
                    let leaving = live.remove((next() % live.len() as u64) as usize);
                    leaving.cancel.cancel();
                    let _ = leaving.task.await;
                }
                _ => {
                    store.set_failing(true);
                    tokio::time::sleep(Duration::from_secs(next() % 20)).await;
                    store.set_failing(false);
                }
            }
            tokio::time::sleep(Duration::from_secs(next() % 25)).await;
        }
        assert_never_two_leaders(&terms);
        for c in live {
            c.task.abort();
        }
    }
}

/// A Lease store whose writes take `delay`, and that says when one is on the wire.
struct SlowWrites {
    leases: Arc<MemoryLeases>,
    delay: Duration,
    writing: Arc<std::sync::atomic::AtomicBool>,
}

impl SlowWrites {
    async fn write<T>(&self, write: impl Future<Output = T>) -> T {
        use std::sync::atomic::Ordering;
        self.writing.store(true, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        let answer = write.await;
        self.writing.store(false, Ordering::SeqCst);
        answer
    }
}

impl LeaseStore for SlowWrites {
    fn get<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<k8s_openapi::api::coordination::v1::Lease>, kube::Error>> {
        self.leases.get(name)
    }

    fn create<'a>(
        &'a self,
        lease: &'a k8s_openapi::api::coordination::v1::Lease,
    ) -> BoxFuture<'a, Result<k8s_openapi::api::coordination::v1::Lease, kube::Error>> {
        Box::pin(self.write(self.leases.create(lease)))
    }

    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a k8s_openapi::api::coordination::v1::Lease,
    ) -> BoxFuture<'a, Result<k8s_openapi::api::coordination::v1::Lease, kube::Error>> {
        Box::pin(self.write(self.leases.replace(name, lease)))
    }

    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<k8s_openapi::api::coordination::v1::Lease>, kube::Error>> {
        self.leases.list(label, value)
    }
}

/// A cancel that lands while a renewal is on the wire: the renewal is let land, and the
/// release carries its resourceVersion, so the Lease is handed over within the next
/// candidate's retry period instead of a 409 leaving it to expire (15 s).
#[tokio::test(start_paused = true)]
async fn a_cancel_during_a_renewal_still_releases_at_once() {
    use std::sync::atomic::Ordering;
    let (store, terms) = (Arc::new(MemoryLeases::default()), Terms::default());
    let writing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let slow: Arc<dyn LeaseStore> = Arc::new(SlowWrites {
        leases: store.clone(),
        delay: Duration::from_millis(1500),
        writing: writing.clone(),
    });
    let a = LeaderElector::new(slow, config("a")).unwrap();
    let cancel_a = CancellationToken::new();
    let task_a = tokio::spawn({
        let (a, cancel) = (a.clone(), cancel_a.clone());
        async move { a.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(a.is_leading(), "a leads alone");
    let b = candidate(&store, "b", &terms, true);
    tokio::time::sleep(Duration::from_secs(4)).await;
    // Wait for a renewal on the wire, then cancel in its middle.
    while !writing.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(writing.load(Ordering::SeqCst), "still on the wire");
    let asked = Instant::now();
    cancel_a.cancel();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!a.is_leading(), "leadership ends at the cancel");
    assert_eq!(asked.elapsed(), Duration::ZERO, "in the same instant");
    task_a.await.unwrap();
    let spec = store.lease("operator").unwrap().spec.unwrap();
    assert_ne!(
        spec.holder_identity.as_deref(),
        Some("a"),
        "a's release did not land: {spec:?}"
    );
    while !b.elector.is_leading() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // What remained of the renewal (0.8 s), a's release (1.5 s), then b's retry period
    // (2 s, jittered by up to 1.2): far below the 15 s lease a failed release would cost.
    let took = asked.elapsed();
    assert!(
        took <= Duration::from_millis(6800),
        "b led {took:?} after the cancel"
    );
}
