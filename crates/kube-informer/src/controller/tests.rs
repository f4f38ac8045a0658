//! The controller's workers: results, retries, panics, drains, exclusion per key.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::*;
use crate::workqueue::ItemExponentialFailureRateLimiter;

fn controller(max_retries: Option<u32>, workers: usize) -> Controller<String> {
    let limiter =
        ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(60));
    let queue = RateLimitingQueue::new(QueueConfig::default().rate_limiter(limiter));
    Controller::with_queue(
        queue,
        ControllerOptions::default()
            .workers(workers)
            .max_retries(max_retries),
    )
}

/// Runs `c` with `reconcile` for `secs` of paused time, then stops it.
async fn run_for<F, Fut>(c: &Controller<String>, secs: u64, reconcile: F)
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, String>> + Send + 'static,
{
    let cancel = CancellationToken::new();
    let stopper = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(secs)).await;
            cancel.cancel();
        })
    };
    c.run(reconcile, cancel).await;
    stopper.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn success_forgets_and_errors_back_off_until_max_retries() {
    let c = controller(Some(3), 1);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    c.queue().add("ok".into());
    c.queue().add("failing".into());
    let log = calls.clone();
    run_for(&c, 120, move |key: String| {
        log.lock().push((key.clone(), start.elapsed().as_secs()));
        async move {
            if key == "ok" {
                Ok(Action::Done)
            } else {
                Err(format!("{key} is broken"))
            }
        }
    })
    .await;
    let calls = calls.lock();
    let failing: Vec<u64> = calls
        .iter()
        .filter(|(k, _)| k == "failing")
        .map(|(_, t)| *t)
        .collect();
    assert_eq!(
        failing,
        [0, 1, 3, 7],
        "1 s, 2 s, 4 s apart, then dropped after 3 retries"
    );
    assert_eq!(calls.iter().filter(|(k, _)| k == "ok").count(), 1);
    assert_eq!(c.queue().num_requeues(&"ok".to_owned()), 0);
    assert_eq!(
        c.queue().num_requeues(&"failing".to_owned()),
        0,
        "forgotten when dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn requeue_after_looks_again_later_and_panics_count_as_errors() {
    let c = controller(None, 1);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    c.queue().add("periodic".into());
    c.queue().add("panics-once".into());
    let (log, panicked) = (calls.clone(), Arc::new(AtomicUsize::new(0)));
    run_for(&c, 25, move |key: String| {
        log.lock().push((key.clone(), start.elapsed().as_secs()));
        let panicked = panicked.clone();
        async move {
            if key == "panics-once" && panicked.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("reconcile bug");
            }
            Ok(if key == "periodic" {
                Action::RequeueAfter(Duration::from_secs(10))
            } else {
                Action::Done
            })
        }
    })
    .await;
    let calls = calls.lock();
    let times = |name: &str| {
        calls
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, t)| *t)
            .collect::<Vec<_>>()
    };
    assert_eq!(times("periodic"), [0, 10, 20]);
    assert_eq!(
        times("panics-once"),
        [0, 1],
        "retried after the panic, with backoff"
    );
}

/// A reconcile function that panics before it returns its future used to kill its worker
/// for good: with two workers and two such panics, nothing else was reconciled.
#[tokio::test(start_paused = true)]
async fn a_panic_before_the_future_is_caught_and_the_worker_goes_on() {
    let c = controller(None, 2);
    for i in 0..10 {
        c.queue().add(format!("k{i}"));
    }
    let done = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let (d, panicked) = (done.clone(), Arc::new(AtomicUsize::new(0)));
    run_for(&c, 30, move |key: String| {
        if panicked.fetch_add(1, Ordering::SeqCst) < 2 {
            panic!("a bug before the future");
        }
        d.lock().insert(key);
        async { Ok(Action::Done) }
    })
    .await;
    assert_eq!(
        done.lock().len(),
        10,
        "every key reconciled: {:?}",
        done.lock()
    );
}

/// A success that asks to look again later forgets the key's failures: a periodic key with
/// occasional errors is never dropped for them.
#[tokio::test(start_paused = true)]
async fn requeue_after_forgets_the_failure_count() {
    let c = controller(Some(3), 1);
    c.queue().add("periodic".into());
    let calls = Arc::new(AtomicUsize::new(0));
    let n = calls.clone();
    run_for(&c, 600, move |_key: String| {
        // Fails twice in every three calls: never three times in a row.
        let call = n.fetch_add(1, Ordering::SeqCst);
        async move {
            match call % 3 {
                2 => Ok(Action::RequeueAfter(Duration::from_secs(10))),
                _ => Err("flaky".to_owned()),
            }
        }
    })
    .await;
    assert!(
        calls.load(Ordering::SeqCst) > 30,
        "still reconciled after 10 minutes"
    );
}

/// A reconcile that never finishes cannot keep `run` from returning: the drain gives up at
/// its deadline.
#[tokio::test(start_paused = true)]
async fn the_drain_gives_up_at_its_deadline() {
    let limiter =
        ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(60));
    let queue = RateLimitingQueue::new(QueueConfig::default().rate_limiter(limiter));
    let c = Controller::with_queue(
        queue,
        ControllerOptions::default().drain_timeout(Some(Duration::from_secs(5))),
    );
    c.queue().add("stuck".to_owned());
    let started = Instant::now();
    run_for(&c, 1, |_key: String| async {
        std::future::pending::<()>().await;
        Ok(Action::Done)
    })
    .await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(6) && took < Duration::from_secs(7),
        "{took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn stopping_drains_what_is_held_and_queued() {
    let c = controller(None, 2);
    for i in 0..6 {
        c.queue().add(format!("k{i}"));
    }
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    // Stop at once: the 6 keys (3 s each, 2 workers) are still all reconciled.
    run_for(&c, 0, move |_key: String| {
        let d = d.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            d.fetch_add(1, Ordering::SeqCst);
            Ok(Action::Done)
        }
    })
    .await;
    assert_eq!(done.load(Ordering::SeqCst), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_is_never_reconciled_twice_at_once_and_never_missed() {
    let c = Arc::new(controller(None, 8));
    let (active, max_active, last_seen) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let version = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let run = {
        let (c, cancel) = (c.clone(), cancel.clone());
        let (active, max_active, last_seen, version) = (
            active.clone(),
            max_active.clone(),
            last_seen.clone(),
            version.clone(),
        );
        tokio::spawn(async move {
            c.run(
                move |_key: String| {
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
                        Ok::<_, String>(Action::Done)
                    }
                },
                cancel,
            )
            .await;
        })
    };
    for v in 1..=2000 {
        version.store(v, Ordering::SeqCst);
        c.queue().add("k".into());
        if v % 50 == 0 {
            tokio::task::yield_now().await;
        }
    }
    cancel.cancel();
    run.await.unwrap();
    assert_eq!(
        max_active.load(Ordering::SeqCst),
        1,
        "two workers held the key at once"
    );
    assert_eq!(
        last_seen.load(Ordering::SeqCst),
        2000,
        "the last change was never reconciled"
    );
}

#[test]
fn enqueue_keys_queues_the_key_of_every_change_tombstones_included() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::ObjectMeta;

    use crate::informer::ResourceEventHandler;
    let queue: RateLimitingQueue<ObjectKey> = RateLimitingQueue::default();
    let handler = enqueue_keys::<ConfigMap>(queue.clone());
    let cm = |name: &str| {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    };
    // Called through the trait: the inherent on_* of HandlerFuncs are its builder.
    ResourceEventHandler::on_add(&handler, cm("a"), true);
    ResourceEventHandler::on_update(&handler, cm("a"), cm("b"));
    let tombstone = DeletedObject::FinalStateUnknown {
        key: ObjectKey::new(Some("ns"), "c"),
        last_known: cm("c"),
    };
    ResourceEventHandler::on_delete(&handler, tombstone);
    ResourceEventHandler::on_add(&handler, cm("a"), false); // already queued: once
    assert_eq!(queue.len(), 3);
}
