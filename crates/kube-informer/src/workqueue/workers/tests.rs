//! The workers: requeue answers, panics, drains, aborts, drops, exclusion per key.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::*;
use crate::workqueue::{ItemExponentialFailureRateLimiter, QueueConfig};

fn queue() -> RateLimitingQueue<String> {
    let limiter =
        ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(60));
    RateLimitingQueue::new(QueueConfig::default().rate_limiter(limiter))
}

/// Runs `count` workers with `process` for `secs` of paused time, then drains them.
async fn run_for<F, Fut>(queue: &RateLimitingQueue<String>, count: usize, secs: u64, process: F)
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Requeue> + Send + 'static,
{
    let mut workers = Workers::spawn(queue, count, process);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    assert!(workers.drain(None).await);
}

fn times(calls: &Mutex<Vec<(String, u64)>>, name: &str) -> Vec<u64> {
    let calls = calls.lock();
    calls
        .iter()
        .filter(|(k, _)| k == name)
        .map(|(_, t)| *t)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn rate_limited_items_back_off_and_after_looks_again_later() {
    let q = queue();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    for key in ["ok", "failing", "periodic"] {
        q.add(key.into());
    }
    let log = calls.clone();
    run_for(&q, 1, 25, move |key: String| {
        log.lock().push((key.clone(), start.elapsed().as_secs()));
        async move {
            match key.as_str() {
                "ok" => Requeue::Never,
                "periodic" => Requeue::After(Duration::from_secs(10)),
                _ => Requeue::RateLimited,
            }
        }
    })
    .await;
    assert_eq!(times(&calls, "ok"), [0]);
    assert_eq!(
        times(&calls, "failing"),
        [0, 1, 3, 7, 15],
        "1, 2, 4, 8 s apart"
    );
    assert_eq!(times(&calls, "periodic"), [0, 10, 20]);
    assert_eq!(q.num_requeues(&"ok".to_owned()), 0);
    assert_eq!(
        q.num_requeues(&"periodic".to_owned()),
        0,
        "After forgets failures"
    );
}

/// A function that panics — before it returns its future, or inside it — costs one
/// backoff, never a worker: with two workers and two panics, everything is processed.
#[tokio::test(start_paused = true)]
async fn panics_are_caught_and_the_workers_go_on() {
    let q = queue();
    for i in 0..10 {
        q.add(format!("k{i}"));
    }
    let done = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let (d, calls) = (done.clone(), Arc::new(AtomicUsize::new(0)));
    run_for(&q, 2, 30, move |key: String| {
        let call = calls.fetch_add(1, Ordering::SeqCst);
        if call == 0 {
            panic!("a bug before the future");
        }
        let d = d.clone();
        async move {
            if call == 1 {
                panic!("a bug inside the future");
            }
            d.lock().insert(key);
            Requeue::Never
        }
    })
    .await;
    assert_eq!(
        done.lock().len(),
        10,
        "every key processed: {:?}",
        done.lock()
    );
}

#[tokio::test(start_paused = true)]
async fn a_drain_finishes_what_is_held_and_queued() {
    let q = queue();
    for i in 0..6 {
        q.add(format!("k{i}"));
    }
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    // Drained at once: the 6 keys (3 s each, 2 workers) are still all processed.
    run_for(&q, 2, 0, move |_key: String| {
        let d = d.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            d.fetch_add(1, Ordering::SeqCst);
            Requeue::Never
        }
    })
    .await;
    assert_eq!(done.load(Ordering::SeqCst), 6);
}

/// Counts the work in progress; a dropped (cancelled) future counts as ended. A `watch`
/// channel, so a test waits for the count it means instead of a number of yields.
#[derive(Clone)]
struct InFlight(Arc<tokio::sync::watch::Sender<usize>>);

impl InFlight {
    fn new() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(0)))
    }

    fn get(&self) -> usize {
        *self.0.borrow()
    }

    /// Waits until exactly `n` are in flight. The deadline is a hang guard in real time,
    /// far above what the wait takes on a loaded machine; it never decides a verdict that
    /// would otherwise pass.
    async fn until(&self, n: usize) {
        let mut rx = self.0.subscribe();
        let wait = rx.wait_for(|now| *now == n);
        match tokio::time::timeout(Duration::from_secs(60), wait).await {
            Ok(changed) => drop(changed.expect("the sender lives in self")),
            Err(_) => panic!("{} in flight after 60 s, waiting for {n}", self.get()),
        }
    }

    fn start(&self) -> Guard {
        self.0.send_modify(|n| *n += 1);
        Guard(self.0.clone())
    }
}

struct Guard(Arc<tokio::sync::watch::Sender<usize>>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

fn hanging(
    in_flight: &InFlight,
) -> impl Fn(String) -> futures_util::future::BoxFuture<'static, Requeue> + Send + Sync + 'static {
    let in_flight = in_flight.clone();
    move |_key| {
        let guard = in_flight.start();
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Requeue::Never
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_drain_cancels_what_is_still_running_at_its_limit() {
    let q = queue();
    q.add("stuck".to_owned());
    let in_flight = InFlight::new();
    let mut workers = Workers::spawn(&q, 2, hanging(&in_flight));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(in_flight.get(), 1);
    let started = Instant::now();
    assert!(!workers.drain(Some(Duration::from_secs(5))).await);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(in_flight.get(), 0, "the hung work was dropped");
    assert_eq!(workers.running(), 0);
}

/// Dropping the owner stops the workers: nothing keeps processing the queue, and what ran
/// is cancelled (a controller dropped by its manager leaves no reconcile behind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_workers_stops_them_and_the_queue() {
    let q = queue();
    let in_flight = InFlight::new();
    let workers = Workers::spawn(&q, 3, hanging(&in_flight));
    for i in 0..3 {
        q.add(format!("k{i}"));
    }
    in_flight.until(3).await;
    // Dropping aborts without waiting (as documented): the cancelled reconciles end when
    // the runtime next polls their tasks, which on a loaded machine can be much later.
    drop(workers);
    in_flight.until(0).await;
    assert!(q.is_shutting_down());
    q.add("late".to_owned());
    assert!(q.is_empty(), "a dropped owner's queue takes nothing more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_cancels_and_waits() {
    let q = queue();
    let in_flight = InFlight::new();
    let mut workers = Workers::spawn(&q, 2, hanging(&in_flight));
    q.add("a".to_owned());
    q.add("b".to_owned());
    in_flight.until(2).await;
    workers.abort().await;
    assert_eq!(in_flight.get(), 0, "abort returned before the work stopped");
    assert_eq!(workers.running(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_is_never_processed_twice_at_once_and_never_missed() {
    let q = queue();
    let (active, max_active, last_seen) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let version = Arc::new(AtomicUsize::new(0));
    let mut workers = {
        let (active, max_active, last_seen, version) = (
            active.clone(),
            max_active.clone(),
            last_seen.clone(),
            version.clone(),
        );
        Workers::spawn(&q, 8, move |_key: String| {
            let (active, max_active, last_seen, version) = (
                active.clone(),
                max_active.clone(),
                last_seen.clone(),
                version.clone(),
            );
            async move {
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                max_active.fetch_max(now, Ordering::SeqCst);
                let seen = version.load(Ordering::SeqCst);
                tokio::task::yield_now().await;
                last_seen.fetch_max(seen, Ordering::SeqCst);
                active.fetch_sub(1, Ordering::SeqCst);
                Requeue::Never
            }
        })
    };
    for v in 1..=2000 {
        version.store(v, Ordering::SeqCst);
        q.add("k".into());
        if v % 50 == 0 {
            tokio::task::yield_now().await;
        }
    }
    assert!(workers.drain(None).await);
    assert_eq!(
        max_active.load(Ordering::SeqCst),
        1,
        "two workers held the key at once"
    );
    assert_eq!(
        last_seen.load(Ordering::SeqCst),
        2000,
        "the last change was never processed"
    );
}
