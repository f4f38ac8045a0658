//! [`Queue`]: the dirty and processing sets, fair ordering, shutdown, and the [`WorkItem`]
//! guard. The state is plain data behind a mutex that is never held across an `.await`.

use std::{
    collections::{HashMap, HashSet},
    fmt,
    ops::Deref,
    sync::Arc,
    time::Duration,
};

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{
    QueueConfig, QueueItem, RateLimiter, default_controller_rate_limiter,
    delaying::Delays,
    fair::{FRONT, GroupId, LOW, Lines},
};

type Set<T> = HashSet<T, foldhash::fast::RandomState>;
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A fair, de-duplicating work queue (client-go's `workqueue.Interface`).
///
/// See [the module docs](super) for its guarantees. Cloning is cheap; every clone is the same
/// queue.
#[doc(alias = "Interface")]
///
/// ```
/// use kube_informer::workqueue::{Queue, QueueConfig};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let queue: Queue<String> = Queue::new(QueueConfig::default().name("pods"));
/// queue.add("shop/web-1".to_owned());
/// queue.add("shop/web-1".to_owned()); // already queued: one item
/// assert_eq!(queue.len(), 1);
/// let item = queue.get().await.expect("not shut down");
/// assert_eq!(item.item(), "shop/web-1");
/// item.done(); // or just drop it
/// queue.shut_down();
/// assert!(queue.get().await.is_none());
/// # }
/// ```
pub struct Queue<T: QueueItem> {
    pub(super) shared: Arc<Shared<T>>,
}

pub(super) struct Shared<T: QueueItem> {
    state: Mutex<State<T>>,
    /// Wakes `get` when an item is queued or the queue shuts down.
    item_ready: Notify,
    /// Wakes `shut_down_with_drain` when the processing set empties.
    idle: Notify,
    /// Cancelled on shutdown ([`Shared::closed`]).
    closing: CancellationToken,
    pub(super) delays: Delays<T>,
    pub(super) limiter: Box<dyn RateLimiter<T>>,
    pub(super) name: Option<String>,
}

struct State<T: QueueItem> {
    /// The queued items: two lanes, each split into fairness groups (`fair.rs`).
    lines: Lines<T>,
    /// Items added at low priority while being processed: queued in the low lane when done.
    low_later: Set<T>,
    /// Items that need processing: queued, or added again while being processed.
    dirty: Set<T>,
    /// Items handed to a worker and not yet done, with the group they were handed out from.
    processing: Map<T, GroupId>,
    shutting_down: bool,
    /// A `shut_down_with_drain` is waiting (until a plain `shut_down` forces it to return).
    draining: bool,
    #[cfg(feature = "metrics")]
    metrics: Option<super::metrics::Recorder<T>>,
}

impl<T: QueueItem> Shared<T> {
    pub(super) fn new(config: QueueConfig<T>) -> Arc<Self> {
        #[cfg(feature = "metrics")]
        let metrics = match (&config.metrics, &config.name) {
            (Some(metrics), Some(name)) => Some(metrics.recorder(name)),
            _ => None,
        };
        #[cfg(feature = "metrics")]
        let timed = metrics.is_some();
        #[cfg(not(feature = "metrics"))]
        let timed = false;
        let shared = Arc::new(Self {
            state: Mutex::new(State {
                lines: Lines::new(config.group_of, config.group_limit, timed),
                low_later: Set::default(),
                dirty: Set::default(),
                processing: Map::default(),
                shutting_down: false,
                draining: false,
                #[cfg(feature = "metrics")]
                metrics,
            }),
            item_ready: Notify::new(),
            idle: Notify::new(),
            closing: CancellationToken::new(),
            delays: Delays::new(),
            limiter: config
                .rate_limiter
                .unwrap_or_else(|| Box::new(default_controller_rate_limiter())),
            name: config.name,
        });
        #[cfg(feature = "metrics")]
        if let (Some(metrics), Some(name)) = (&config.metrics, &shared.name) {
            metrics.track_in_flight(name, Arc::downgrade(&shared) as _);
        }
        shared
    }

    pub(super) fn add(&self, item: T) {
        let mut state = self.state.lock();
        if state.shutting_down {
            return;
        }
        if state.dirty.contains(&item) {
            // (The emptiness checks keep a queue that never uses low priority from hashing
            // the item again.)
            if state.lines.promote(&item) {
                // Waiting at low priority: it moves to the front lane.
                drop(state);
                self.item_ready.notify_one();
            } else if !state.low_later.is_empty() {
                // If it was to come back at low priority when done, it comes back in front.
                state.low_later.remove(&item);
            }
            return;
        }
        if state.mark_dirty(&item) {
            // Queued again when the worker holding it is done.
            return;
        }
        state.lines.push(item, FRONT);
        drop(state);
        self.item_ready.notify_one();
    }

    fn add_low_priority(&self, item: T) {
        let mut state = self.state.lock();
        if state.shutting_down || state.dirty.contains(&item) {
            return;
        }
        if state.mark_dirty(&item) {
            // Queued again, at low priority, when the worker holding it is done.
            state.low_later.insert(item);
            return;
        }
        state.lines.push(item, LOW);
        drop(state);
        self.item_ready.notify_one();
    }

    async fn get(self: &Arc<Self>) -> Option<WorkItem<T>> {
        loop {
            let notified = self.item_ready.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.state.lock();
                if let Some((item, group)) = state.lines.pop() {
                    #[cfg(feature = "metrics")]
                    if let Some(m) = &mut state.metrics {
                        m.taken(&item);
                    }
                    state.dirty.remove(&item);
                    state.processing.insert(item.clone(), group);
                    let more = state.lines.may_pop();
                    let last = state.shutting_down && state.lines.len() == 0;
                    drop(state);
                    if more {
                        // Several adds may have left a single wake-up: pass it on.
                        self.item_ready.notify_one();
                    } else if last {
                        // The last item after shutdown: `get`s that waited for a capped
                        // group's items return `None` now.
                        self.item_ready.notify_waiters();
                    }
                    return Some(WorkItem::new(self.clone(), item));
                }
                // (Items of groups at their in-flight cap wait for a `done`, even now.)
                if state.shutting_down && state.lines.len() == 0 {
                    return None;
                }
            }
            notified.await;
        }
    }

    pub(super) fn done(&self, item: &T) {
        let mut state = self.state.lock();
        #[cfg(feature = "metrics")]
        if let Some(m) = &mut state.metrics {
            m.done(item);
        }
        let unparked = match state.processing.remove(item) {
            Some(group) => state.lines.done(group),
            None => false,
        };
        let requeued = state.dirty.contains(item);
        if requeued {
            let low = !state.low_later.is_empty() && state.low_later.remove(item);
            state
                .lines
                .push(item.clone(), if low { LOW } else { FRONT });
        }
        // Queued again, or its group was at its cap: a worker can take an item now.
        if requeued || unparked {
            drop(state);
            self.item_ready.notify_one();
        } else if state.processing.is_empty() {
            drop(state);
            self.idle.notify_waiters();
        }
    }

    /// How many fairness groups are kept (in use or idle).
    #[cfg(test)]
    pub(super) fn group_count(&self) -> usize {
        self.state.lock().lines.group_count()
    }

    pub(super) fn is_shutting_down(&self) -> bool {
        self.state.lock().shutting_down
    }

    fn shut_down(&self, drain: bool) {
        {
            let mut state = self.state.lock();
            state.shutting_down = true;
            state.draining = drain;
        }
        self.item_ready.notify_waiters();
        self.idle.notify_waiters();
        self.closing.cancel();
        self.delays.stop();
    }

    /// Resolves once the queue is shut down.
    pub(super) async fn closed(&self) {
        self.closing.cancelled().await;
    }

    /// From now on, queued items carry the time they were queued (for [`Self::load`]).
    pub(super) fn time_waits(&self) {
        self.state
            .lock()
            .lines
            .time_from(tokio::time::Instant::now());
    }

    /// How long the oldest item a worker could take has waited (once
    /// [timed](Self::time_waits)), how many such items are queued, and how many are held:
    /// the items of a fairness group at its in-flight limit are not counted, since more
    /// workers could not take them.
    pub(super) fn load(&self, now: tokio::time::Instant) -> (Option<Duration>, usize, usize) {
        let state = self.state.lock();
        let lines = &state.lines;
        (
            lines.longest_wait(now),
            lines.takeable(),
            state.processing.len(),
        )
    }

    /// Records the number of workers in the metrics: after a change up or down
    /// (`Some(up)`), or as they start (`None`).
    #[cfg(feature = "metrics")]
    pub(super) fn scaled(&self, workers: usize, up: Option<bool>) {
        if let Some(m) = &self.state.lock().metrics {
            m.scaled(workers, up);
        }
    }

    #[cfg(not(feature = "metrics"))]
    pub(super) fn scaled(&self, _workers: usize, _up: Option<bool>) {}

    #[cfg(feature = "metrics")]
    pub(super) fn retried(&self) {
        if let Some(m) = &self.state.lock().metrics {
            m.retried();
        }
    }

    #[cfg(not(feature = "metrics"))]
    pub(super) fn retried(&self) {}

    /// The fairness groups with items queued or held (none when the queue is not fair).
    #[cfg(feature = "metrics")]
    pub(super) fn group_stats(&self) -> Vec<super::fair::GroupStats> {
        let state = self.state.lock();
        if !state.lines.is_fair() {
            return Vec::new();
        }
        state.lines.stats(tokio::time::Instant::now())
    }

    /// Items queued in the live lane and in the backlog lane.
    #[cfg(feature = "metrics")]
    pub(super) fn lanes(&self) -> [usize; 2] {
        let state = self.state.lock();
        let low = state.lines.low_len();
        [state.lines.len() - low, low]
    }

    /// Seconds each in-flight item has been processed for (for the unfinished-work metrics).
    #[cfg(feature = "metrics")]
    pub(super) fn in_flight_seconds(&self) -> Vec<f64> {
        let state = self.state.lock();
        state
            .metrics
            .as_ref()
            .map(|m| m.in_flight_seconds())
            .unwrap_or_default()
    }
}

impl<T: QueueItem> State<T> {
    /// Records a new add of `item` (not dirty yet); whether a worker holds it now.
    fn mark_dirty(&mut self, item: &T) -> bool {
        #[cfg(feature = "metrics")]
        if let Some(m) = &mut self.metrics {
            m.added(item);
        }
        self.dirty.insert(item.clone());
        self.processing.contains_key(item)
    }
}

impl<T: QueueItem> Drop for Shared<T> {
    fn drop(&mut self) {
        // Let the delay timer task (which holds only a weak reference) exit.
        self.delays.stop();
    }
}

impl<T: QueueItem> Queue<T> {
    /// A new, empty queue.
    pub fn new(config: QueueConfig<T>) -> Self {
        Self {
            shared: Shared::new(config),
        }
    }

    /// Queues `item` unless it is already queued (or the queue is shutting down). An item
    /// added while a worker holds it is queued again once that worker is done.
    pub fn add(&self, item: T) {
        self.shared.add(item);
    }

    /// Queues `item` behind every item [`add`](Self::add)ed, unless it is already queued:
    /// for work that can wait, such as an informer's initial list or a resync, so that live
    /// changes are handled first (controller-runtime's priority queue). An `add` of an item
    /// waiting here moves it to the front line.
    ///
    /// ```
    /// use kube_informer::workqueue::{Queue, QueueConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue: Queue<&str> = Queue::new(QueueConfig::default());
    /// queue.add_low_priority("listed-1");
    /// queue.add_low_priority("listed-2");
    /// queue.add("changed");
    /// queue.add("listed-2"); // changed too: no longer waits
    /// let order: Vec<&str> = [queue.get().await, queue.get().await, queue.get().await]
    ///     .into_iter()
    ///     .map(|item| *item.unwrap().item())
    ///     .collect();
    /// assert_eq!(order, ["changed", "listed-2", "listed-1"]);
    /// # }
    /// ```
    pub fn add_low_priority(&self, item: T) {
        self.shared.add_low_priority(item);
    }

    /// Waits for an item and hands it out, marking it as being processed. Returns `None`
    /// once the queue is shut down and empty.
    ///
    /// Many workers may wait at once; each item goes to exactly one of them.
    pub async fn get(&self) -> Option<WorkItem<T>> {
        self.shared.get().await
    }

    /// How many items are queued (not counting those being processed).
    pub fn len(&self) -> usize {
        self.shared.state.lock().lines.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting items. Items already queued are still handed out by [`get`](Self::get),
    /// which returns `None` once they are gone. Waiting `get`s are woken.
    ///
    /// Called while a [`shut_down_with_drain`](Self::shut_down_with_drain) waits, it makes
    /// that drain return at once, without waiting for the items still held ("a second
    /// SIGTERM", as client-go documents).
    pub fn shut_down(&self) {
        self.shared.shut_down(false);
    }

    /// Shuts down like [`shut_down`](Self::shut_down), then waits until every item handed
    /// out so far is done — or until [`shut_down`](Self::shut_down) is called, which ends the
    /// wait at once. Keep the workers running while it waits.
    #[doc(alias = "ShutDownWithDrain")]
    pub async fn shut_down_with_drain(&self) {
        self.shared.shut_down(true);
        loop {
            let idle = self.shared.idle.notified();
            let mut idle = std::pin::pin!(idle);
            idle.as_mut().enable();
            {
                let state = self.shared.state.lock();
                if state.processing.is_empty() || !state.draining {
                    return;
                }
            }
            idle.await;
        }
    }

    /// Whether [`shut_down`](Self::shut_down) was called.
    #[doc(alias = "ShuttingDown")]
    pub fn is_shutting_down(&self) -> bool {
        self.shared.is_shutting_down()
    }

    /// The queue's name, if it has one.
    pub(crate) fn name(&self) -> Option<&str> {
        self.shared.name.as_deref()
    }
}

impl<T: QueueItem> Default for Queue<T> {
    fn default() -> Self {
        Self::new(QueueConfig::default())
    }
}

impl<T: QueueItem> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T: QueueItem> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("Queue")
            .field("name", &self.shared.name)
            .field("queued", &(state.lines.len() - state.lines.low_len()))
            .field("low_priority", &state.lines.low_len())
            .field("processing", &state.processing.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}

// `WorkItem` stays in this file, beside the queue it releases into: moved to a module of
// its own, the `workqueue` benchmark with 8 workers on 2 threads went from 19.3 to 35.8 ms
// (its drop, which calls `done`, was compiled apart from it), measured back to back.

/// An item handed to a worker. It stays "processing" (no other worker gets it) until the
/// guard is dropped or consumed; dropping it marks the item done.
///
/// The consuming methods decide what happens next: [`forget`](Self::forget) after success,
/// [`requeue_rate_limited`](Self::requeue_rate_limited) after a failure,
/// [`requeue_after`](Self::requeue_after) to look again later.
#[must_use = "dropping a WorkItem at once marks it done; hold it while processing"]
pub struct WorkItem<T: QueueItem> {
    shared: Arc<Shared<T>>,
    /// `None` only once done.
    item: Option<T>,
}

impl<T: QueueItem> WorkItem<T> {
    pub(super) fn new(shared: Arc<Shared<T>>, item: T) -> Self {
        Self {
            shared,
            item: Some(item),
        }
    }

    /// The item.
    pub fn item(&self) -> &T {
        self.item
            .as_ref()
            .expect("a WorkItem holds its item until done")
    }

    /// Marks the item done (the same as dropping the guard).
    #[doc(alias = "Done")]
    pub fn done(self) {}

    /// Success: resets the item's rate-limiter history (its backoff starts over), then marks
    /// it done.
    #[doc(alias = "Forget")]
    pub fn forget(self) {
        self.shared.limiter.forget(self.item());
    }

    /// Failure: queues the item again after the rate limiter's delay for it (growing with
    /// each failure), then marks it done.
    #[doc(alias = "AddRateLimited")]
    pub fn requeue_rate_limited(self) {
        let delay = self.shared.limiter.when(self.item());
        super::delaying::add_after(&self.shared, self.item().clone(), delay);
    }

    /// Queues the item again after `delay`, then marks it done. The rate limiter's history
    /// is left as it is.
    #[doc(alias = "AddAfter")]
    pub fn requeue_after(self, delay: Duration) {
        super::delaying::add_after(&self.shared, self.item().clone(), delay);
    }

    /// How many times the rate limiter has seen this item fail since it was last forgotten.
    #[doc(alias = "NumRequeues")]
    pub fn num_requeues(&self) -> u32 {
        self.shared.limiter.num_requeues(self.item())
    }
}

impl<T: QueueItem> Deref for WorkItem<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.item()
    }
}

impl<T: QueueItem> Drop for WorkItem<T> {
    fn drop(&mut self) {
        if let Some(item) = self.item.take() {
            self.shared.done(&item);
        }
    }
}

impl<T: QueueItem + fmt::Debug> fmt::Debug for WorkItem<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WorkItem").field(&self.item).finish()
    }
}
