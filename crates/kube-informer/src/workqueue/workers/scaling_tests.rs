//! Workers that follow the work: they grow while items wait past the target, never past
//! the ceiling, shrink to the floor when idle, lose nothing, and stop with their owner.

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicUsize, Ordering},
};

use parking_lot::Mutex;

use super::*;
use crate::workqueue::QueueConfig;

struct Run {
    queue: RateLimitingQueue<u32>,
    workers: Workers<u32>,
    /// Most reconciles at once.
    most: Arc<AtomicUsize>,
    /// Each item's reconciles.
    seen: Arc<Mutex<BTreeMap<u32, usize>>>,
    /// Every change of the worker count.
    changes: Arc<Mutex<Vec<usize>>>,
}

/// Scaled workers (1 to 8) over a queue holding `queued` items already; each takes 100 ms.
fn start(queued: u32) -> Run {
    let queue = RateLimitingQueue::new(QueueConfig::default().name("scaled"));
    (0..queued).for_each(|i| queue.add(i));
    let (most, running) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let changes = Arc::new(Mutex::new(Vec::new()));
    let scaling = WorkerScaling::new(1, 8)
        .target_wait(Duration::from_millis(200))
        .check_every(Duration::from_millis(50))
        .scale_down_after(Duration::from_secs(1))
        .on_change({
            let changes = changes.clone();
            move |n| changes.lock().push(n)
        });
    let workers = Workers::spawn_scaled(&queue, scaling, {
        let (most, running, seen) = (most.clone(), running.clone(), seen.clone());
        move |item: u32| {
            let (most, running, seen) = (most.clone(), running.clone(), seen.clone());
            async move {
                *seen.lock().entry(item).or_default() += 1;
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Requeue::Never
            }
        }
    });
    Run {
        queue,
        workers,
        most,
        seen,
        changes,
    }
}

#[tokio::test(start_paused = true)]
async fn workers_grow_with_the_wait_up_to_the_ceiling_and_shrink_to_the_floor_when_idle() {
    let mut run = start(0);
    assert_eq!(run.workers.active(), 1);
    for i in 0..400 {
        run.queue.add(i);
    }
    // One worker would take 40 s; eight take 5 s and a little.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(run.queue.is_empty(), "the backlog is gone");
    assert_eq!(
        run.most.load(Ordering::SeqCst),
        8,
        "grew to the ceiling, no further"
    );
    let grown = run.changes.lock().clone();
    assert_eq!(
        grown[..3],
        [2, 4, 8],
        "doubling while items waited past the target"
    );
    // Idle: one worker retired per second of quiet, down to the floor.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(run.workers.active(), 1);
    assert_eq!(*run.changes.lock(), [2, 4, 8, 7, 6, 5, 4, 3, 2, 1]);
    // Still working at the floor, and every item reconciled exactly once.
    run.queue.add(1_000);
    assert!(run.workers.drain(None).await);
    let seen = run.seen.lock();
    assert_eq!(seen.len(), 401);
    assert!(seen.values().all(|&n| n == 1), "each item once");
    assert_eq!(
        run.workers.running(),
        0,
        "every task, supervisor included, ended"
    );
}

/// A retired worker finishes what it holds; a drain ends parked workers and the supervisor
/// at once, and finishes the queue with the active ones.
#[tokio::test(start_paused = true)]
async fn a_drain_finishes_the_queue_and_ends_every_worker_active_or_not() {
    let mut run = start(0);
    for i in 0..50 {
        run.queue.add(i);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(run.workers.active() > 1, "grew");
    assert!(run.workers.drain(Some(Duration::from_secs(60))).await);
    assert_eq!(run.seen.lock().len(), 50, "the whole queue, none lost");
    assert_eq!(run.workers.running(), 0);
}

#[tokio::test(start_paused = true)]
async fn abort_and_drop_stop_scaled_workers() {
    let mut run = start(0);
    for i in 0..50 {
        run.queue.add(i);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    run.workers.abort().await;
    assert_eq!(run.workers.running(), 0);
    let run = start(0);
    let queue = run.queue.clone();
    drop(run);
    assert!(
        queue.is_shutting_down(),
        "dropping the workers shuts their queue"
    );
}

/// Items queued before the workers started (an informer's first list) count as waiting
/// from the start: the workers grow for them too.
#[tokio::test(start_paused = true)]
async fn a_backlog_queued_before_the_workers_started_makes_them_grow() {
    let mut run = start(200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(run.changes.lock()[..3], [2, 4, 8]);
    assert!(run.workers.drain(None).await);
    assert_eq!(run.seen.lock().len(), 200);
}

/// The caller's `on_change` panicking is logged; the supervisor goes on scaling.
#[tokio::test(start_paused = true)]
async fn a_panicking_on_change_callback_does_not_stop_the_scaling() {
    let queue = RateLimitingQueue::new(QueueConfig::default().name("panicky"));
    (0..200).for_each(|i| queue.add(i));
    let scaling = WorkerScaling::new(1, 8)
        .target_wait(Duration::from_millis(200))
        .check_every(Duration::from_millis(50))
        .on_change(|_| panic!("a dashboard hook failed"));
    let mut workers = Workers::spawn_scaled(&queue, scaling, |_: u32| async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Requeue::Never
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(workers.active(), 8, "grew past the first change's panic");
    assert_eq!(
        workers.running(),
        9,
        "every worker and the supervisor still run"
    );
    assert!(workers.drain(None).await);
}

/// A group parked at its in-flight limit (a fleet member whose reconciles hang, its other
/// 198 keys waiting behind them) is not work more workers could do: the workers grow for
/// the group's first two items, then not at all, and the other groups' items still get
/// workers of their own — which go again once those items are done.
#[tokio::test(start_paused = true)]
async fn a_group_parked_at_its_limit_does_not_grow_the_workers() {
    let queue = RateLimitingQueue::new(
        QueueConfig::default()
            .name("capped")
            .fair_by(|item: &u32| {
                std::borrow::Cow::Owned(if *item < 1000 { "hung" } else { "ok" }.to_owned())
            })
            .max_in_flight_per_group(Some(2)),
    );
    let changes = Arc::new(Mutex::new(Vec::new()));
    let scaling = WorkerScaling::new(1, 16)
        .target_wait(Duration::from_millis(200))
        .check_every(Duration::from_millis(50))
        .on_change({
            let changes = changes.clone();
            move |n| changes.lock().push(n)
        });
    let done = Arc::new(Mutex::new(Vec::new()));
    let mut workers = Workers::spawn_scaled(&queue, scaling, {
        let done = done.clone();
        move |item: u32| {
            let done = done.clone();
            async move {
                if item < 1000 {
                    std::future::pending::<()>().await; // hangs, holding its worker
                }
                done.lock().push(item);
                Requeue::Never
            }
        }
    });
    for i in 0..200 {
        queue.add(i);
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        workers.active(),
        2,
        "grew for the hung group's two takeable items only: {:?}",
        changes.lock()
    );
    // Another group's work still grows the workers, and is done.
    for i in 1000..1010 {
        queue.add(i);
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        done.lock().len(),
        10,
        "the other group's items were reconciled"
    );
    assert!(workers.active() > 2, "grew for the other group's items");
    // Only the parked group's items are left: the workers shrink back to the two it holds.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        workers.active(),
        2,
        "shrank back while the hung group stays parked: {:?}",
        changes.lock()
    );
    workers.abort().await;
}
