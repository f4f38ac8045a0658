//! Two leader-elected manager replicas on one server, as a Deployment of two runs them:
//! rounds that kill the leader (its `run` future dropped, as when the process dies) and
//! that partition it from the server (the proxy goes silent; held bytes land when it
//! heals). Replica A talks through a partitionable proxy, replica B directly; the rounds
//! alternate, so each kind of failure hits a leader, at least ten times each in all. Four
//! such pairs run side by side (each with its own namespace, Lease and proxy), since the
//! rounds are mostly waiting for Leases to expire. Verdicts, per pair: no two reconciles of
//! the two replicas ever overlap; a killed replica starts nothing after its kill; a
//! partitioned one starts nothing once its renew deadline has passed and runs nothing after
//! it returned (leadership lost); the other one takes over.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use e2e::{Backend, both, ensure_namespace};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, api::PostParams};
use kube_informer::{FactoryOptions, Selectors};
use kube_informer_runtime::{
    controller::{Action, Cached, ControllerOptions},
    leader_election::LeaderElectionConfig,
    manager::{Manager, ManagerError, ManagerOptions},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Each kind of failure, at least, over all pairs.
const EACH: usize = 10;
/// The pairs of replicas, side by side.
const PAIRS: usize = 4;
/// The election's lease: another replica may lead this long after the last renewal it saw.
const LEASE_DURATION: Duration = Duration::from_secs(6);
/// The election's renew deadline (below): a partitioned leader steps down by then.
const RENEW_DEADLINE: Duration = Duration::from_secs(3);
/// What a step-down may take past the deadline on a loaded machine: the timer firing late,
/// the manager halting its workers. The lease leaves this margin and a second more: a
/// lease's safety rests on such a bound (as client-go's does), so the test gives it room
/// a machine with every core busy keeps, rather than one a quiet machine keeps.
const STEP_DOWN_SLACK: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy)]
struct Span {
    life: usize,
    start: Instant,
    end: Instant,
}

/// Logs a reconcile's span when it ends or is dropped (cancelled).
struct Recording {
    log: Arc<Mutex<Vec<Span>>>,
    life: usize,
    start: Instant,
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.log.lock().push(Span {
            life: self.life,
            start: self.start,
            end: Instant::now(),
        });
    }
}

struct Replica {
    life: usize,
    proxied: bool,
    stop: CancellationToken,
    task: JoinHandle<(Result<(), ManagerError>, Instant)>,
}

/// Where a pair runs: its namespace (and Lease), and the clients of its two replicas.
struct Pair {
    namespace: String,
    /// Through the pair's own proxy.
    proxied: kube::Client,
    direct: kube::Client,
}

async fn start(pair: &Pair, life: usize, proxied: bool, log: &Arc<Mutex<Vec<Span>>>) -> Replica {
    let client = if proxied {
        pair.proxied.clone()
    } else {
        pair.direct.clone()
    };
    let election = LeaderElectionConfig::new("e2e-replicas")
        .namespace(&pair.namespace)
        .identity(format!("life-{life}"))
        .lease_duration(LEASE_DURATION)
        .renew_deadline(RENEW_DEADLINE)
        .retry_period(Duration::from_millis(500))
        .release_on_cancel(false);
    let options = ManagerOptions::default()
        .no_endpoints()
        .shutdown_timeout(Duration::from_secs(3))
        .leader_election(election)
        .factory(
            FactoryOptions::default()
                .selectors(Selectors::default().in_namespace(pair.namespace.clone())),
        );
    let mut manager = Manager::new(client, options).await.unwrap();
    let controller = manager
        .controller::<ConfigMap>(ControllerOptions::default().name("replicas").workers(2))
        .resync(Duration::from_secs(1));
    let log = log.clone();
    manager.add_controller(
        controller,
        move |_: Cached<ConfigMap>, _: Arc<()>| {
            let recording = Recording {
                log: log.clone(),
                life,
                start: Instant::now(),
            };
            async move {
                tokio::time::sleep(Duration::from_millis(40)).await;
                drop(recording);
                // Periodic requeues: a worker left running would go on reconciling.
                Ok::<_, kube::Error>(Action::RequeueAfter(Duration::from_millis(300)))
            }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
    );
    let stop = CancellationToken::new();
    let run = manager.run_until(stop.clone(), CancellationToken::new());
    let task = tokio::spawn(async move { (run.await, Instant::now()) });
    Replica {
        life,
        proxied,
        stop,
        task,
    }
}

/// Waits (at most a minute: a hang, not a verdict) until `life` has reconciled after `since`.
async fn reconciled_by(log: &Arc<Mutex<Vec<Span>>>, life: usize, since: Instant, what: &str) {
    for _ in 0..1200 {
        if log.lock().iter().any(|s| s.life == life && s.start > since) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

async fn a_killed_or_partitioned_leader_never_overlaps_the_next(backend: Backend) {
    let name = backend.name();
    let t0 = Instant::now();
    let pairs = (0..PAIRS).map(|index| pair(&backend, index));
    let counts = futures_util::future::join_all(pairs).await;
    let kills: usize = counts.iter().map(|(k, _, _)| k).sum();
    let partitions: usize = counts.iter().map(|(_, p, _)| p).sum();
    let reconciles: usize = counts.iter().map(|(_, _, r)| r).sum();
    assert!(
        kills >= EACH && partitions >= EACH,
        "{name}: {kills} kills, {partitions} partitions"
    );
    eprintln!(
        "{name}: {kills} kills, {partitions} partitions, {reconciles} reconciles in {:?}",
        t0.elapsed()
    );
}

both!(a_killed_or_partitioned_leader_never_overlaps_the_next);

/// One pair's rounds, until it has killed and partitioned its share; its verdicts. Returns
/// its kills, partitions and reconciles.
async fn pair(backend: &Backend, index: usize) -> (usize, usize, usize) {
    let name = format!("{} pair {index}", backend.name());
    let each = EACH.div_ceil(PAIRS);
    let (proxy, proxied) = backend.another_proxy().await;
    let pair = Pair {
        namespace: format!("rt-replicas-{index}"),
        proxied,
        direct: backend.client(),
    };
    let client = backend.client();
    ensure_namespace(&client, &pair.namespace).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &pair.namespace);
    for n in 0..3 {
        let cm = json!({"metadata": {"name": format!("cm-{n}")}});
        let cm: ConfigMap = serde_json::from_value(cm).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let log: Arc<Mutex<Vec<Span>>> = Arc::default();
    // (life, when): returned from `run_until`, or killed.
    let mut returned: Vec<(usize, Instant)> = Vec::new();
    let mut killed: Vec<(usize, Instant)> = Vec::new();
    // (life, when): cut off from the server.
    let mut cut: Vec<(usize, Instant)> = Vec::new();
    let mut lives = 0..;
    let mut a = start(&pair, lives.next().unwrap(), true, &log).await;
    let mut b = start(&pair, lives.next().unwrap(), false, &log).await;
    for _ in 0..1200 {
        if !log.lock().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut kills = 0;
    let mut partitions = 0;
    for round in 0..each * 4 {
        if kills >= each && partitions >= each {
            break;
        }
        tokio::time::sleep(Duration::from_millis(800)).await; // the leader at work a while
        let leader = log.lock().last().map(|s| s.life).expect("someone leads");
        let since = Instant::now();
        if leader == b.life {
            // Kill B: A must take over. The kill has happened when the aborted task is
            // gone (its future dropped), not when the abort is asked for: until then its
            // workers may still be polled on the other thread.
            b.task.abort();
            let _ = (&mut b.task).await;
            killed.push((b.life, Instant::now()));
            reconciled_by(&log, a.life, since, "A took over from the killed B").await;
            b = start(&pair, lives.next().unwrap(), b.proxied, &log).await;
            kills += 1;
        } else {
            assert_eq!(
                leader, a.life,
                "{name}: round {round}: the last reconcile is by a replica that was killed or returned"
            );
            // Partition A: it must step down by itself, and B take over.
            proxy.partition();
            cut.push((a.life, Instant::now()));
            reconciled_by(&log, b.life, since, "B took over from the partitioned A").await;
            let (result, at) = (&mut a.task).await.unwrap();
            proxy.heal();
            assert!(
                matches!(result, Err(ManagerError::LeadershipLost)),
                "{name}: round {round}: the partitioned leader returned {result:?}"
            );
            returned.push((a.life, at));
            a = start(&pair, lives.next().unwrap(), a.proxied, &log).await;
            partitions += 1;
        }
    }
    for replica in [a, b] {
        replica.stop.cancel();
        let (result, at) = replica.task.await.unwrap();
        assert!(result.is_ok(), "{name}: {result:?}");
        returned.push((replica.life, at));
    }
    let spans = log.lock().clone();
    for x in &spans {
        for y in &spans {
            let overlap = x.life != y.life && x.start < y.end && y.start < x.end;
            assert!(
                !overlap,
                "{name}: two replicas reconciled at once: {x:?} {y:?}"
            );
        }
    }
    // A replica that returned has stopped everything; a killed one (its future dropped)
    // starts nothing after the kill, and what ran is cancelled as the runtime drops the
    // aborted workers (on other threads, so its last spans may end a moment after).
    for (life, at) in &returned {
        let late = spans.iter().find(|s| s.life == *life && s.end > *at);
        assert!(
            late.is_none(),
            "{name}: life {life} ran after it returned: {late:?}"
        );
    }
    // The old leader's renew deadline counts from its last renewal's start, before the cut:
    // past cut + deadline (and a moment to act on it) it starts nothing.
    for (life, at) in &cut {
        let bound = *at + RENEW_DEADLINE + STEP_DOWN_SLACK;
        let late = spans.iter().find(|s| s.life == *life && s.start > bound);
        assert!(
            late.is_none(),
            "{name}: life {life} started a reconcile {:?} after it was cut off (renew deadline {RENEW_DEADLINE:?}): {late:?}",
            late.map(|s| s.start - *at)
        );
    }
    for (life, at) in &killed {
        let late = spans.iter().find(|s| s.life == *life && s.start > *at);
        assert!(
            late.is_none(),
            "{name}: life {life} started after its kill: {late:?}"
        );
    }
    (kills, partitions, spans.len())
}
