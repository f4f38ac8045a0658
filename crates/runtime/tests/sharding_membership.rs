//! Shard membership on a paused clock over in-memory Leases: live replicas make the ring, a
//! released shard leaves at once, a killed one after its Lease's duration, and a
//! partitioned one has always stopped (its `leading` false) before any observer drops it —
//! under seeded random schedules.

use std::{sync::Arc, time::Duration};

use kube_informer_runtime::{
    CancellationToken,
    leader_election::LeaderElector,
    lease::{MemoryLeases, Partitionable},
    sharding::{LiveShards, Ring, shard_lease},
};
use tokio::time::Instant;

struct Replica {
    elector: LeaderElector,
    link: Partitionable,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn replica(leases: &Arc<MemoryLeases>, shard: &str) -> Replica {
    let link = Partitionable::new(leases.clone());
    let elector = LeaderElector::new(link.clone(), shard_lease("web", shard)).unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (elector, cancel) = (elector.clone(), cancel.clone());
        async move { elector.run(cancel).await }
    });
    Replica {
        elector,
        link,
        cancel,
        task,
    }
}

async fn alive(replicas: &[&Replica]) {
    for r in replicas {
        r.elector.leading().wait_for(|l| *l).await.unwrap();
    }
}

fn names(ring: &Ring) -> Vec<&str> {
    ring.shards().collect()
}

#[tokio::test(start_paused = true)]
async fn live_replicas_make_the_ring_and_a_released_one_leaves_at_once() {
    let leases = Arc::new(MemoryLeases::default());
    let (a, b, c) = (
        replica(&leases, "a"),
        replica(&leases, "b"),
        replica(&leases, "c"),
    );
    alive(&[&a, &b, &c]).await;
    let live = LiveShards::new(leases.clone(), "web");
    assert_eq!(names(&live.observe().await.unwrap()), ["a", "b", "c"]);
    // Another ring's observer sees none of them.
    let other = LiveShards::new(leases.clone(), "api");
    assert!(other.observe().await.unwrap().is_empty());

    b.cancel.cancel(); // a graceful stop releases the Lease
    b.task.await.unwrap();
    assert_eq!(names(&live.observe().await.unwrap()), ["a", "c"]);
    for r in [a, c] {
        r.cancel.cancel();
        r.task.await.unwrap();
    }
    assert!(live.observe().await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_killed_replica_leaves_after_its_lease_duration_and_not_before() {
    let leases = Arc::new(MemoryLeases::default());
    let (a, b) = (replica(&leases, "a"), replica(&leases, "b"));
    alive(&[&a, &b]).await;
    let live = LiveShards::new(leases.clone(), "web");
    assert_eq!(names(&live.observe().await.unwrap()), ["a", "b"]);
    // Killed: no release, the Lease just stops changing.
    let last_renewal = leases.lease("web-b").unwrap().metadata.resource_version;
    b.task.abort();
    let _ = b.task.await;
    let killed = Instant::now();
    let mut left = None;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if !live.observe().await.unwrap().contains("b") {
            left = Some(killed.elapsed());
            break;
        }
    }
    assert_eq!(
        leases.lease("web-b").unwrap().metadata.resource_version,
        last_renewal,
        "nobody renewed it"
    );
    let left = left.expect("the killed shard never left the ring");
    // Seen unchanged since at most one retry period (2 s) before the kill.
    assert!(
        left >= Duration::from_secs(13) && left <= Duration::from_secs(16),
        "left after {left:?}"
    );
    assert_eq!(names(&live.observe().await.unwrap()), ["a"]);
    a.cancel.cancel();
    a.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_lease_held_by_someone_else_is_not_a_shard() {
    let leases = Arc::new(MemoryLeases::default());
    // The Lease of shard `x`, but held under another identity.
    let impostor = LeaderElector::new(
        leases.clone(),
        shard_lease("web", "x").identity("someone-else"),
    )
    .unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (e, c) = (impostor.clone(), cancel.clone());
        async move { e.run(c).await }
    });
    impostor.leading().wait_for(|l| *l).await.unwrap();
    assert!(
        LiveShards::new(leases.clone(), "web")
            .observe()
            .await
            .unwrap()
            .is_empty()
    );
    cancel.cancel();
    task.await.unwrap();
}

/// splitmix64: one seed, one repeatable schedule.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The safety property: whenever an observer drops a shard that was partitioned, the
/// replica had already stopped counting itself alive, by at least the margin between its
/// lease duration and its renew deadline (5 s by default).
#[tokio::test(start_paused = true)]
async fn a_partitioned_replica_has_stopped_before_any_observer_drops_it() {
    for seed in 0..60u64 {
        let mut rng = seed;
        let leases = Arc::new(MemoryLeases::default());
        let (a, b) = (replica(&leases, "a"), replica(&leases, "b"));
        alive(&[&a, &b]).await;
        let live = LiveShards::new(leases.clone(), "web");
        assert_eq!(live.observe().await.unwrap().len(), 2, "seed {seed}");
        tokio::time::sleep(Duration::from_millis(next(&mut rng) % 4000)).await;
        // When b stepped down, on its own clock.
        let stepped_down = Arc::new(parking_lot::Mutex::new(None));
        let watcher = tokio::spawn({
            let (mut leading, stepped_down) = (b.elector.leading(), stepped_down.clone());
            async move {
                leading.wait_for(|l| !*l).await.unwrap();
                *stepped_down.lock() = Some(Instant::now());
            }
        });
        b.link.set_partitioned(true);
        let dropped = loop {
            tokio::time::sleep(Duration::from_millis(200 + next(&mut rng) % 1800)).await;
            if !live.observe().await.unwrap().contains("b") {
                break Instant::now();
            }
        };
        watcher.await.unwrap();
        let stepped_down = stepped_down.lock().expect("b never stepped down");
        assert!(
            stepped_down + Duration::from_secs(5) <= dropped,
            "seed {seed}: b stepped down at {:?}, was dropped at {:?}",
            stepped_down,
            dropped
        );
        assert!(live.observe().await.unwrap().contains("a"), "seed {seed}");
        for r in [a, b] {
            r.cancel.cancel();
            r.task.abort();
            let _ = r.task.await;
        }
    }
}
