//! [`WorkerScaling`]: workers that follow the work, between a floor and a ceiling.
//!
//! Every worker up to the ceiling is a task from the start, so all of them stay owned by the
//! [`Workers`](super::Workers) value (drained, aborted, dropped with it); only the first
//! *active* ones take items. A supervisor task, in the same set, looks at the queue every
//! [`check_every`](WorkerScaling::check_every): when the oldest queued item has waited longer
//! than the target it doubles the active count (up to the ceiling); when the queue has been
//! empty with a worker idle for [`scale_down_after`](WorkerScaling::scale_down_after) it
//! retires one (down to the floor). Items of a fairness group at its
//! [in-flight limit](super::super::QueueConfig::max_in_flight_per_group) count as neither
//! waiting nor queued: more workers could not take them (a hung tenant's backlog never
//! drives the workers to the ceiling, nor keeps them there). A retired worker finishes the item it holds first. Each
//! change is logged and counted (`workqueue_workers`, `workqueue_worker_changes_total`).

use std::{fmt, sync::Arc, time::Duration};

use tokio::{sync::watch, time::Instant};

use super::super::{QueueItem, RateLimitingQueue};

/// Workers that follow the work, between a floor and a ceiling
/// ([`Workers::spawn_scaled`](super::Workers::spawn_scaled)).
///
/// Every worker up to the ceiling is a task from the start, owned by the `Workers` value
/// (drained, aborted, dropped with it); only the first *active* ones take items. A
/// supervisor task looks at the queue every [`check_every`](Self::check_every): when the
/// oldest queued item has waited longer than [`target_wait`](Self::target_wait) it doubles
/// the active count (up to the ceiling); when the queue has been empty with a worker idle
/// for [`scale_down_after`](Self::scale_down_after) it retires one (down to the floor). The
/// items of a fairness group at its in-flight limit are not counted: no worker could take
/// them. A retired worker finishes the item it holds first. Each change is logged and counted
/// (`workqueue_workers`, `workqueue_worker_changes_total`).
///
/// ```
/// use std::time::Duration;
/// use kube_informer::workqueue::WorkerScaling;
///
/// // 2 workers, up to 16 while the oldest queued item waits more than 500 ms.
/// let scaling = WorkerScaling::new(2, 16).target_wait(Duration::from_millis(500));
/// assert_eq!((scaling.floor(), scaling.ceiling()), (2, 16));
/// ```
#[derive(Clone)]
pub struct WorkerScaling {
    floor: usize,
    ceiling: usize,
    target_wait: Duration,
    check_every: Duration,
    scale_down_after: Duration,
    on_change: Option<Arc<dyn Fn(usize) + Send + Sync>>,
}

impl fmt::Debug for WorkerScaling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerScaling")
            .field("floor", &self.floor)
            .field("ceiling", &self.ceiling)
            .field("target_wait", &self.target_wait)
            .field("check_every", &self.check_every)
            .field("scale_down_after", &self.scale_down_after)
            .finish_non_exhaustive()
    }
}

impl WorkerScaling {
    /// Between `floor` (at least 1) and `ceiling` (at least `floor`) workers; starts at the
    /// floor. Defaults: grow when the oldest item waited more than 1 s, checked every
    /// 250 ms; retire one after 30 s with an empty queue and a worker idle.
    pub fn new(floor: usize, ceiling: usize) -> Self {
        let floor = floor.max(1);
        Self {
            floor,
            ceiling: ceiling.max(floor),
            target_wait: Duration::from_secs(1),
            check_every: Duration::from_millis(250),
            scale_down_after: Duration::from_secs(30),
            on_change: None,
        }
    }

    /// Grow while the oldest queued item has waited longer than this (default 1 s).
    #[must_use]
    pub fn target_wait(mut self, wait: Duration) -> Self {
        self.target_wait = wait;
        self
    }

    /// How often the queue is looked at (default 250 ms; at least 1 ms).
    #[must_use]
    pub fn check_every(mut self, period: Duration) -> Self {
        self.check_every = period.max(Duration::from_millis(1));
        self
    }

    /// Retire one worker after the queue has been empty, with a worker idle, this long
    /// (default 30 s); the next one after as long again.
    #[must_use]
    pub fn scale_down_after(mut self, quiet: Duration) -> Self {
        self.scale_down_after = quiet;
        self
    }

    /// Called with the new count after each change (a controller updates its gauges);
    /// called again, it adds a callback (each runs, in the order given).
    #[must_use]
    pub fn on_change(mut self, notify: impl Fn(usize) + Send + Sync + 'static) -> Self {
        self.on_change = Some(match self.on_change.take() {
            None => Arc::new(notify),
            Some(first) => Arc::new(move |workers| {
                first(workers);
                notify(workers);
            }),
        });
        self
    }

    /// The fewest workers.
    pub fn floor(&self) -> usize {
        self.floor
    }

    /// The most workers.
    pub fn ceiling(&self) -> usize {
        self.ceiling
    }
}

/// A worker's turn: worker `index` takes items only while `index` < the active count.
pub(super) struct Gate {
    pub(super) index: usize,
    pub(super) active: watch::Receiver<usize>,
}

impl Gate {
    /// Waits until this worker is active; `false` when the queue shut down first.
    pub(super) async fn open<T: QueueItem>(&mut self, queue: &RateLimitingQueue<T>) -> bool {
        loop {
            if self.index < *self.active.borrow_and_update() {
                return true;
            }
            tokio::select! {
                changed = self.active.changed() => {
                    if changed.is_err() {
                        return false;
                    }
                }
                () = queue.shared.closed() => return false,
            }
        }
    }

    /// Resolves when this worker is retired (never, once the supervisor has ended).
    pub(super) async fn retired(&mut self) {
        let index = self.index;
        if self.active.wait_for(|n| index >= *n).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Sets the active count from the queue's wait until the queue shuts down.
pub(super) async fn supervise<T: QueueItem>(
    queue: RateLimitingQueue<T>,
    scaling: WorkerScaling,
    active: watch::Sender<usize>,
) {
    let name = queue.name().unwrap_or("workqueue").to_owned();
    let mut tick = tokio::time::interval(scaling.check_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut quiet_since: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = queue.shared.closed() => return,
        }
        let now = Instant::now();
        let workers = *active.borrow();
        let (waited, queued, busy) = queue.shared.load(now);
        let next = if waited.is_some_and(|w| w > scaling.target_wait) {
            quiet_since = None;
            (workers * 2).min(scaling.ceiling)
        } else if queued == 0 && busy < workers {
            let since = *quiet_since.get_or_insert(now);
            if now - since < scaling.scale_down_after {
                continue;
            }
            quiet_since = Some(now);
            workers.saturating_sub(1).max(scaling.floor)
        } else {
            quiet_since = None;
            continue;
        };
        if next == workers {
            continue;
        }
        active.send_replace(next);
        queue.shared.scaled(next, Some(next > workers));
        if let Some(notify) = &scaling.on_change {
            // The caller's code: a panic is logged, and the scaling goes on.
            let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notify(next)));
            if let Err(panic) = called {
                tracing::error!(
                    queue = name,
                    "the worker scaling's on_change callback panicked: {}",
                    crate::util::panic_message(panic.as_ref())
                );
            }
        }
        if next > workers {
            tracing::info!(
                queue = name,
                workers = next,
                "the oldest item a worker could take waited {:?} (target {:?}): {workers} → {next} workers",
                waited.unwrap_or_default(),
                scaling.target_wait
            );
        } else {
            tracing::info!(
                queue = name,
                workers = next,
                "idle for {:?}: {workers} → {next} workers",
                scaling.scale_down_after
            );
        }
    }
}
