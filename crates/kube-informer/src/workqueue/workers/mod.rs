//! [`Workers`]: N tasks draining a [`RateLimitingQueue`], each item handed to your function,
//! its answer ([`Requeue`]) applied to the queue — the loop at the heart of every
//! controller, owned by whoever started it.
//!
//! Ownership is structured: the workers are tasks of a [`JoinSet`] inside the `Workers`
//! value. [`drain`](Workers::drain) lets them finish what they hold and what is queued,
//! [`abort`](Workers::abort) cancels them at their next await point and waits until they
//! have stopped, and dropping the value shuts the queue down and aborts them (without
//! waiting, since `Drop` cannot). No worker outlives its owner, so a controller that is
//! dropped — or a manager that loses leadership — cannot leave reconciles running behind
//! its back.
//!
//! The queue's guarantees carry over: an item is never processed by two workers at once,
//! and an item added while it is processed comes back afterwards.
//!
//! ```
//! use std::time::Duration;
//! use kube_informer::workqueue::{QueueConfig, RateLimitingQueue, Requeue, Workers};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let queue = RateLimitingQueue::new(QueueConfig::default().name("configs"));
//! queue.add("shop/web".to_owned());
//! let mut workers = Workers::spawn(&queue, 2, |key: String| async move {
//!     println!("reconciling {key}");
//!     Requeue::Never // done: forget its failures
//! });
//! // ... later, on shutdown: finish what is held and queued, at most 30 s.
//! assert!(workers.drain(Some(Duration::from_secs(30))).await);
//! # }
//! ```

use std::{future::Future, panic::AssertUnwindSafe, sync::Arc, time::Duration};

use futures_util::FutureExt;
use tokio::{sync::watch, task::JoinSet};

use self::scaling::Gate;
pub use self::scaling::WorkerScaling;
use super::{QueueItem, RateLimitingQueue, WorkItem};
use crate::util::panic_message;

mod scaling;

/// What the queue does with an item after a worker processed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Not again until it is added again; its failure count is forgotten.
    Never,
    /// Again after this long (a periodic check); its failure count is forgotten.
    After(Duration),
    /// Again after the rate limiter's delay for it; its failure count grows.
    RateLimited,
}

/// Workers over a [`RateLimitingQueue`], owned by this value: [`drain`](Self::drain)
/// finishes what is held and queued, [`abort`](Self::abort) cancels and waits, and
/// dropping it shuts the queue down and aborts the workers without waiting. No worker
/// outlives its owner.
#[derive(Debug)]
pub struct Workers<T: QueueItem> {
    queue: RateLimitingQueue<T>,
    tasks: JoinSet<()>,
    /// The active count, when scaled.
    active: Option<watch::Receiver<usize>>,
}

impl<T: QueueItem> Workers<T> {
    /// Starts `count` workers (at least one) taking items from `queue` and calling
    /// `process` with each. A panic in `process` — before it returns its future, or
    /// inside it — is caught, logged and treated as [`Requeue::RateLimited`]; the worker
    /// goes on. Callers that want to count or report panics catch them themselves.
    pub fn spawn<F, Fut>(queue: &RateLimitingQueue<T>, count: usize, process: F) -> Self
    where
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Requeue> + Send + 'static,
    {
        let process = Arc::new(process);
        let mut tasks = JoinSet::new();
        for _ in 0..count.max(1) {
            tasks.spawn(work(queue.clone(), process.clone(), None));
        }
        Self {
            queue: queue.clone(),
            tasks,
            active: None,
        }
    }

    /// Starts workers whose number follows the work, between `scaling`'s floor and ceiling
    /// (see [`WorkerScaling`]); otherwise as [`spawn`](Self::spawn). Every worker up to the
    /// ceiling is a task from the start, owned by this value; only the active ones take
    /// items.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kube_informer::workqueue::{QueueConfig, RateLimitingQueue, Requeue, WorkerScaling, Workers};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let queue = RateLimitingQueue::new(QueueConfig::default().name("configs"));
    /// let scaling = WorkerScaling::new(2, 32).target_wait(Duration::from_millis(500));
    /// let mut workers = Workers::spawn_scaled(&queue, scaling, |key: String| async move {
    ///     Requeue::Never
    /// });
    /// assert_eq!(workers.active(), 2);
    /// assert!(workers.drain(Some(Duration::from_secs(30))).await);
    /// # }
    /// ```
    pub fn spawn_scaled<F, Fut>(
        queue: &RateLimitingQueue<T>,
        scaling: WorkerScaling,
        process: F,
    ) -> Self
    where
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Requeue> + Send + 'static,
    {
        queue.shared.time_waits();
        let (active, receiver) = watch::channel(scaling.floor());
        queue.shared.scaled(scaling.floor(), None);
        let process = Arc::new(process);
        let mut tasks = JoinSet::new();
        for index in 0..scaling.ceiling() {
            let gate = Gate {
                index,
                active: receiver.clone(),
            };
            tasks.spawn(work(queue.clone(), process.clone(), Some(gate)));
        }
        tasks.spawn(scaling::supervise(queue.clone(), scaling, active));
        Self {
            queue: queue.clone(),
            tasks,
            active: Some(receiver),
        }
    }

    /// How many workers take items now (fixed unless [scaled](Self::spawn_scaled)).
    pub fn active(&self) -> usize {
        match &self.active {
            Some(active) => *active.borrow(),
            None => self.tasks.len(),
        }
    }

    /// How many worker tasks are still running (with [scaling](Self::spawn_scaled): every
    /// worker up to the ceiling, and the supervisor).
    #[cfg(test)]
    pub(crate) fn running(&self) -> usize {
        self.tasks.len()
    }

    /// Shuts the queue down and lets the workers finish what they hold and what is queued,
    /// for at most `limit` (`None`: as long as it takes); whether they all finished. At
    /// the limit the workers are [aborted](Self::abort). Cancel-safe: dropping the future
    /// midway leaves the workers running, to be drained again or aborted.
    pub async fn drain(&mut self, limit: Option<Duration>) -> bool {
        let drain = async {
            self.queue.shut_down_with_drain().await;
            while self.tasks.join_next().await.is_some() {}
        };
        let drained = match limit {
            Some(limit) => tokio::time::timeout(limit, drain).await.is_ok(),
            None => {
                drain.await;
                true
            }
        };
        if !drained {
            let queue = self.queue.name().unwrap_or("workqueue");
            tracing::warn!(
                queue,
                "drain timed out after {limit:?}; cancelling the work still running"
            );
            self.abort().await;
        }
        drained
    }

    /// Shuts the queue down, cancels every worker at its next await point (what it was
    /// processing is dropped, not finished) and waits until all have stopped. Code that
    /// blocks a thread without awaiting cannot be interrupted: this waits for it.
    pub async fn abort(&mut self) {
        self.queue.shut_down();
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }
}

impl<T: QueueItem> Drop for Workers<T> {
    /// Shuts the queue down and aborts the workers (the [`JoinSet`] does), without waiting.
    fn drop(&mut self) {
        self.queue.shut_down();
    }
}

/// One worker: takes items (while active, when gated) and processes them until the queue
/// is shut down and empty.
async fn work<T, F, Fut>(queue: RateLimitingQueue<T>, process: Arc<F>, mut gate: Option<Gate>)
where
    T: QueueItem,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Requeue> + Send + 'static,
{
    loop {
        let item = match &mut gate {
            None => queue.get().await,
            Some(gate) => {
                if !gate.open(&queue).await {
                    return;
                }
                tokio::select! {
                    biased;
                    item = queue.get() => item,
                    () = gate.retired() => continue,
                }
            }
        };
        let Some(item) = item else {
            return;
        };
        process_one(&queue, &*process, item).await;
    }
}

/// Calls `process` with `item` (a panic is one backoff) and applies its answer.
async fn process_one<T, F, Fut>(queue: &RateLimitingQueue<T>, process: &F, item: WorkItem<T>)
where
    T: QueueItem,
    F: Fn(T) -> Fut,
    Fut: Future<Output = Requeue>,
{
    let key = item.item().clone();
    let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| process(key.clone()))) {
        Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
        Err(panic) => Err(panic),
    };
    let requeue = outcome.unwrap_or_else(|panic| {
        tracing::error!(
            queue = queue.name().unwrap_or("workqueue"),
            "a worker's function panicked: {}; retrying the item with backoff",
            panic_message(panic.as_ref())
        );
        Requeue::RateLimited
    });
    match requeue {
        Requeue::Never => item.forget(),
        Requeue::After(delay) => {
            queue.forget(&key);
            item.requeue_after(delay);
        }
        Requeue::RateLimited => item.requeue_rate_limited(),
    }
}

#[cfg(test)]
mod scaling_tests;
#[cfg(test)]
mod tests;
