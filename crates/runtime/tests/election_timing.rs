//! Leader election under slow requests, on a paused clock: slow reads and slow answers must
//! not let two candidates lead at once, with the tightest timing `validate()` accepts
//! around client-go's (15 s lease, 13 s renew deadline, 2 s retry). Two mistakes each made
//! this fail: counting the renew deadline from when the acquisition was *answered* rather
//! than from when it *started*, and stamping a newly seen record *before* the read that
//! returned it. Each attempt to acquire is bounded by the retry period, so the delays here
//! stay below it (a slower request is an attempt that failed).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures_util::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use kube_informer_runtime::{
    leader_election::{LeaderElectionConfig, LeaderElector},
    lease::{LeaseStore, MemoryLeases},
};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One candidate's view of a shared store: reads that take `read_delay` to reach the
/// server, writes whose answers take `answer_delay` to come back, and a partition (every
/// request hangs).
struct Slow {
    inner: Arc<MemoryLeases>,
    read_delay: Mutex<Duration>,
    answer_delay: Mutex<Duration>,
    partitioned: AtomicBool,
}

impl Slow {
    fn new(inner: &Arc<MemoryLeases>) -> Arc<Self> {
        Arc::new(Self {
            inner: inner.clone(),
            read_delay: Mutex::new(Duration::ZERO),
            answer_delay: Mutex::new(Duration::ZERO),
            partitioned: AtomicBool::new(false),
        })
    }

    async fn gate(&self) {
        if self.partitioned.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }
}

impl LeaseStore for Slow {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>> {
        Box::pin(async move {
            self.gate().await;
            let delay = *self.read_delay.lock();
            tokio::time::sleep(delay).await;
            self.gate().await;
            self.inner.get(name).await
        })
    }

    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.gate().await;
            let written = self.inner.create(lease).await;
            let delay = *self.answer_delay.lock();
            tokio::time::sleep(delay).await;
            written
        })
    }

    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.gate().await;
            let written = self.inner.replace(name, lease).await;
            let delay = *self.answer_delay.lock();
            tokio::time::sleep(delay).await;
            written
        })
    }

    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>> {
        self.inner.list(label, value)
    }
}

/// The tightest of client-go's shape that `validate()` accepts.
fn config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new("tight")
        .identity(identity)
        .lease_duration(Duration::from_secs(15))
        .renew_deadline(Duration::from_secs(13))
        .retry_period(Duration::from_secs(2))
        .release_on_cancel(false)
}

/// (from, until) of a candidate's terms, recorded as `leading` changes.
type Terms = Arc<Mutex<Vec<(Instant, Option<Instant>)>>>;

fn start(store: Arc<Slow>, identity: &str) -> (LeaderElector, Terms, CancellationToken) {
    let elector = LeaderElector::new(store, config(identity)).unwrap();
    let terms = Terms::default();
    let mut leading = elector.leading();
    let log = terms.clone();
    tokio::spawn(async move {
        while leading.changed().await.is_ok() {
            let now = Instant::now();
            let mut log = log.lock();
            if *leading.borrow() {
                log.push((now, None));
            } else if let Some(open) = log.last_mut().filter(|t| t.1.is_none()) {
                open.1 = Some(now);
            }
        }
    });
    let cancel = CancellationToken::new();
    tokio::spawn({
        let (elector, cancel) = (elector.clone(), cancel.clone());
        async move { elector.run(cancel).await }
    });
    (elector, terms, cancel)
}

fn assert_disjoint(round: &str, a: &Terms, b: &Terms) {
    let now = Instant::now();
    for x in a.lock().iter() {
        for y in b.lock().iter() {
            let (x_end, y_end) = (x.1.unwrap_or(now), y.1.unwrap_or(now));
            assert!(
                !(x.0 < y_end && y.0 < x_end),
                "{round}: two leaders at once: {x:?} and {y:?}"
            );
        }
    }
}

/// The leader's acquisition lands at once but its answer is slow; then it is cut off. It
/// must step down 13 s after its attempt *started*, before the other can take over 15 s
/// after it saw the write.
#[tokio::test(start_paused = true)]
async fn a_slow_answer_to_the_acquisition_does_not_stretch_the_term() {
    for answer_ms in [900u64, 1_300, 1_600, 1_800, 1_950] {
        let shared = Arc::new(MemoryLeases::default());
        let (a_store, b_store) = (Slow::new(&shared), Slow::new(&shared));
        *a_store.answer_delay.lock() = Duration::from_millis(answer_ms);
        let (a, a_terms, _a_cancel) = start(a_store.clone(), "a");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (_b, b_terms, _b_cancel) = start(b_store, "b");
        let mut leading = a.leading();
        leading.wait_for(|l| *l).await.unwrap();
        a_store.partitioned.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(60)).await;
        let round = format!("answer delayed {answer_ms} ms");
        assert!(!b_terms.lock().is_empty(), "{round}: b never took over");
        assert_disjoint(&round, &a_terms, &b_terms);
    }
}

/// The other candidate's reads take seconds to reach the server; the leader is cut off
/// right after a renewal that such a read returns. Stamped before the read, the record
/// would look seconds older than it is, and the takeover would come before the old
/// leader's deadline.
#[tokio::test(start_paused = true)]
async fn slow_reads_do_not_make_a_record_look_older_than_it_is() {
    let mut rounds = 0;
    for read_ms in [1_200u64, 1_600, 1_950] {
        for cut_ms in [1_000u64, 1_900, 2_600, 3_300] {
            let shared = Arc::new(MemoryLeases::default());
            let (a_store, b_store) = (Slow::new(&shared), Slow::new(&shared));
            let (a, a_terms, _a_cancel) = start(a_store.clone(), "a");
            a.leading().wait_for(|l| *l).await.unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
            *b_store.read_delay.lock() = Duration::from_millis(read_ms);
            let (_b, b_terms, _b_cancel) = start(b_store, "b");
            tokio::time::sleep(Duration::from_millis(read_ms + cut_ms)).await;
            a_store.partitioned.store(true, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(90)).await;
            let round = format!("reads {read_ms} ms, cut {cut_ms} ms later");
            assert!(!b_terms.lock().is_empty(), "{round}: b never took over");
            assert_disjoint(&round, &a_terms, &b_terms);
            rounds += 1;
        }
    }
    assert_eq!(rounds, 12);
}

/// A leader whose runtime thread is blocked (a reconcile doing blocking work) cannot run
/// its elector: it still says it leads, but `stalled()` (read on the wall clock, which the
/// block cannot stop) reports how far past its renew deadline it is, so `/healthz` fails.
#[tokio::test]
async fn a_starved_elector_reports_itself_stalled() {
    let leases = Arc::new(MemoryLeases::default());
    let config = LeaderElectionConfig::new("starved")
        .namespace("shop")
        .identity("blocked")
        // A renew deadline a busy machine cannot outrun between the acquisition and the
        // first look at `stalled()` (at 600 ms it could).
        .lease_duration(Duration::from_secs(6))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(200));
    let elector = LeaderElector::new(leases, config).unwrap();
    let mut leading = elector.leading();
    let cancel = CancellationToken::new();
    let campaign = {
        let (elector, cancel) = (elector.clone(), cancel.clone());
        tokio::spawn(async move { elector.run(cancel).await })
    };
    leading.wait_for(|l| *l).await.unwrap();
    assert_eq!(elector.stalled(), None, "just acquired");
    // Block this (the only) runtime thread past the renew deadline: the elector cannot run.
    std::thread::sleep(Duration::from_millis(4500));
    assert!(elector.is_leading(), "nothing ran to step down");
    let late = elector
        .stalled()
        .expect("a starved leader reports the stall");
    // The last renewal started before the block: at least 4.5 s ago, 3 s allowed.
    assert!(late >= Duration::from_millis(1500), "late by {late:?}");
    cancel.cancel();
    campaign.await.unwrap();
    assert_eq!(elector.stalled(), None, "not leading any more");
}
