//! Sharded managers under random schedules, on a paused clock: up to four replicas of a
//! sharded controller (ConfigMaps owning Secrets) over fake-apiserver, reached in memory so
//! that the clock moves only when everything is idle, with their Leases in memory behind
//! links that hang or fail. Every schedule first scales 3 → 4 → 2 replicas, then runs
//! random joins, kills (the manager's future dropped), graceful stops, partitions from the
//! Leases (requests hang, or fail; answers lost after the write landed), heals, and object
//! churn (creates with children, updates, deletes), while reconciles of random length run.
//! For every seed:
//!
//! - no object is ever reconciled by two replicas (or twice by one) at once;
//! - a killed replica's reconciles end when it is killed, a returned one has none running,
//!   and a replica cut off from the Leases reconciles nothing once its renew deadline
//!   passed;
//! - a joining replica takes only objects that hash to it, and a leaving one gives only
//!   its own away (consistent hashing moves ~1/N, not all);
//! - once everything heals, within the Lease duration and a few sharder rounds, every
//!   object is labelled for a live replica, its children for the same one, each replica's
//!   caches hold exactly its shard, and each object was last reconciled there — and is
//!   reconciled there again when it changes.
//!
//! A failing seed is printed; rerun one with `SCHEDULE_SEED=<n>` (and `SCHEDULE_TRACE=1`
//! for the steps and the runtime's logs).

use crate::common;
#[path = "sharding_schedules/world.rs"]
mod world;

use std::collections::BTreeMap;

use common::schedule::Rng;
use world::{Timing, World};

/// Where each object's shard went between two settled states.
fn moves(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    before
        .iter()
        .filter(|(key, shard)| after.get(*key).is_some_and(|now| now != *shard))
        .map(|(key, shard)| format!("{key}: {shard} → {}", after[key]))
        .collect()
}

async fn schedule(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let timing = Timing::random(&mut rng);
    let mut world = World::new(seed, rng, timing).await;
    world.populate(40).await;

    // 3 → 4 → 2, each settled: moves go only to the newcomer, and only from the leavers.
    for slot in 0..3 {
        world.start(slot).await;
    }
    let three = world.settle("3 replicas").await;
    world.start(3).await;
    let four = world.settle("a 4th joined").await;
    let moved = moves(&three, &four);
    trace_placements(&three, &four);
    assert!(
        moved.iter().all(|m| m.ends_with("→ s3")),
        "seed {seed}: a join moved objects between old shards: {moved:?}"
    );
    let share = moved.len() as f64 / four.len() as f64;
    assert!(
        (0.05..=0.5).contains(&share),
        "seed {seed}: a 4th shard took {:.0}% of the objects",
        share * 100.0
    );
    world.stop_gracefully(0).await;
    world.stop_gracefully(1).await;
    let two = world.settle("2 replicas left").await;
    let moved = moves(&four, &two);
    assert!(
        moved
            .iter()
            .all(|m| m.contains(": s0 →") || m.contains(": s1 →")),
        "seed {seed}: objects of staying shards moved: {moved:?}"
    );

    for _ in 0..30 {
        let pause = world.rng.millis(50, 2000);
        tokio::time::sleep(pause).await;
        world.reap().await;
        world.step().await;
    }
    world.heal_all().await;
    world.settle("everything healed").await;
    world.touch_all();
    world.settle("every object changed once more").await;
    world.kill_all().await;
    world.check();
}

/// With a manager's default timing (15 s Leases), a killed replica's objects are labelled,
/// cached and reconciled on the others within the Lease's duration and five seconds, the
/// sharder's own replica included (the next sharder has been watching the Leases, so it
/// does not count the dead shard alive for another duration).
#[test]
fn a_killed_replicas_objects_move_within_the_lease_duration_and_five_seconds() {
    let _ = kube_informer::list_watch::set_decoding_threads(0);
    for (seed, kill_the_sharder) in [(1, true), (2, false), (3, true), (4, false)] {
        paused(async move {
            let timing = Timing::defaults();
            let bound = timing.lease() + std::time::Duration::from_secs(5);
            let mut world = World::new(seed, Rng(seed), timing).await;
            world.quick_reconciles = true;
            world.populate(60).await;
            for slot in 0..3 {
                world.start(slot).await;
            }
            world.settle("3 replicas").await;
            let sharder = world.sharder_slot().await;
            let victim = if kill_the_sharder {
                sharder
            } else {
                (sharder + 1) % 3
            };
            world.kill_slot(victim).await;
            let killed = tokio::time::Instant::now();
            world.settle("a replica killed").await;
            let took = killed.elapsed();
            assert!(
                took <= bound,
                "seed {seed}: killing s{victim} (the sharder: {kill_the_sharder}) took {took:?} to settle, more than {bound:?}"
            );
            world.kill_all().await;
            world.check();
        });
    }
}

/// Someone else moves the shard label of objects being reconciled (to another live shard,
/// mostly: the one move the drain used not to cover), ten times: no object is ever
/// reconciled by two replicas at once, and each ends where the ring puts it.
#[test]
fn labels_someone_else_moves_never_give_one_object_to_two_replicas() {
    let _ = kube_informer::list_watch::set_decoding_threads(0);
    for seed in [5, 6, 7] {
        paused(async move {
            let mut world = World::new(seed, Rng(seed), Timing::defaults()).await;
            world.populate(30).await;
            for slot in 0..3 {
                world.start(slot).await;
            }
            world.settle("3 replicas").await;
            let mut edits = 0;
            while edits < 10 {
                world.churn();
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                if world.foreign_label() {
                    edits += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
            }
            world.settle("after 10 foreign label edits").await;
            world.kill_all().await;
            world.check();
        });
    }
}

/// Runs `test` on a fresh runtime with a paused clock.
fn paused(test: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(test);
}

/// The seeds of one quarter of the 100 schedules (four tests, so that the harness runs them
/// on every core); `SCHEDULE_SEED` runs that one seed instead, in the first quarter.
fn random_schedules(quarter: u64) {
    // Decoding on the reflectors' own tasks: a decoding thread would be a wait the paused
    // clock takes for idleness.
    let _ = kube_informer::list_watch::set_decoding_threads(0);
    if std::env::var("SCHEDULE_TRACE").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("info,kube_informer_runtime::sharding=debug")
            .try_init();
    }
    let seeds: Vec<u64> = match std::env::var("SCHEDULE_SEED") {
        Ok(seed) if quarter == 0 => vec![seed.parse().expect("SCHEDULE_SEED is a number")],
        Ok(_) => Vec::new(),
        Err(_) => (quarter * 25 + 1..=quarter * 25 + 25).collect(),
    };
    for seed in seeds {
        // A runtime per seed: a fresh paused clock, and nothing left over from the last.
        paused(schedule(seed));
    }
}

#[test]
fn random_schedules_of_sharded_managers_never_reconcile_one_object_twice_at_once_1_to_25() {
    random_schedules(0);
}

#[test]
fn random_schedules_of_sharded_managers_never_reconcile_one_object_twice_at_once_26_to_50() {
    random_schedules(1);
}

#[test]
fn random_schedules_of_sharded_managers_never_reconcile_one_object_twice_at_once_51_to_75() {
    random_schedules(2);
}

#[test]
fn random_schedules_of_sharded_managers_never_reconcile_one_object_twice_at_once_76_to_100() {
    random_schedules(3);
}

fn trace_placements(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) {
    if std::env::var("SCHEDULE_TRACE").is_ok() {
        eprintln!("before {before:?}\nafter {after:?}");
    }
}

/// The first scenario at its size: 3 replicas and 3,000 ConfigMaps, every other one
/// with a Secret it controls. Every object ends on the shard the ring gives it, each child
/// on its owner's, every cache holds exactly its shard, and every object was reconciled by
/// its shard (never by two at once).
#[test]
fn three_replicas_split_three_thousand_objects_with_their_children() {
    let _ = kube_informer::list_watch::set_decoding_threads(0);
    paused(async {
        let mut world = World::new(3000, Rng(3000), Timing::defaults()).await;
        world.quick_reconciles = true;
        world.populate(3000).await;
        for slot in 0..3 {
            world.start(slot).await;
        }
        let placed = world.settle("3 replicas, 3,000 objects").await;
        assert_eq!(placed.len(), 3000);
        for shard in ["s0", "s1", "s2"] {
            let n = placed.values().filter(|s| *s == shard).count();
            assert!((900..=1100).contains(&n), "{shard} holds {n} of 3,000");
        }
        world.kill_all().await;
        world.check();
    });
}
