//! [`DelayingQueue`]: `add_after`, with every waiting item in one timer heap served by one
//! task per queue (not a task or timer per item).

use std::{
    cmp::Ordering,
    collections::{BinaryHeap, HashMap},
    ops::Deref,
    sync::{Arc, Weak},
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{sync::Notify, time::Instant};

use super::{
    QueueConfig, QueueItem,
    queue::{Queue, Shared},
};

/// A [`Queue`] that can also add an item after a delay (client-go's
/// `DelayingInterface`). Derefs to [`Queue`].
#[doc(alias = "DelayingInterface")]
///
/// ```
/// use std::time::Duration;
/// use kube_informer::workqueue::{DelayingQueue, QueueConfig};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let queue: DelayingQueue<&'static str> = DelayingQueue::new(QueueConfig::default());
/// queue.add_after("shop/web-1", Duration::from_secs(30));
/// assert!(queue.is_empty(), "not before its time");
/// let item = queue.get().await.unwrap(); // (the paused clock jumps ahead)
/// assert_eq!(*item.item(), "shop/web-1");
/// # }
/// ```
pub struct DelayingQueue<T: QueueItem> {
    queue: Queue<T>,
}

impl<T: QueueItem> DelayingQueue<T> {
    /// A new, empty queue.
    pub fn new(config: QueueConfig<T>) -> Self {
        Self {
            queue: Queue::new(config),
        }
    }

    /// Adds `item` once `delay` has passed. An item already waiting keeps the earlier of its
    /// two ready times; a zero delay adds at once. Ignored after shutdown.
    ///
    /// Must be called within a tokio runtime (the queue's timer task is started on first
    /// use); outside one, the item is added at once and an error is logged.
    #[doc(alias = "AddAfter")]
    pub fn add_after(&self, item: T, delay: Duration) {
        add_after(&self.queue.shared, item, delay);
    }

    /// How many items wait for their delay to pass.
    pub fn waiting(&self) -> usize {
        self.queue.shared.delays.waiting.lock().ready_at.len()
    }
}

impl<T: QueueItem> Deref for DelayingQueue<T> {
    type Target = Queue<T>;

    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

impl<T: QueueItem> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<T: QueueItem> Default for DelayingQueue<T> {
    fn default() -> Self {
        Self::new(QueueConfig::default())
    }
}

impl<T: QueueItem> std::fmt::Debug for DelayingQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelayingQueue")
            .field("queue", &self.queue)
            .field("waiting", &self.waiting())
            .finish()
    }
}

pub(super) fn add_after<T: QueueItem>(shared: &Arc<Shared<T>>, item: T, delay: Duration) {
    if shared.is_shutting_down() {
        return;
    }
    shared.retried();
    if delay.is_zero() {
        shared.add(item);
        return;
    }
    // A delay too large to represent is as good as "never"; cap it at a century.
    let at = Instant::now()
        .checked_add(delay)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
    let mut waiting = shared.delays.waiting.lock();
    if waiting.ready_at.get(&item).is_some_and(|&(t, _)| t <= at) {
        return; // already due no later than that
    }
    waiting.seq += 1;
    let seq = waiting.seq;
    waiting.ready_at.insert(item.clone(), (at, seq));
    waiting.heap.push(Entry { at, seq, item });
    let is_earliest = waiting.heap.peek().is_some_and(|e| e.seq == seq);
    let start = !std::mem::replace(&mut waiting.timer_started, true);
    drop(waiting);
    if start {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(run_timer(
                    Arc::downgrade(shared),
                    shared.delays.timer.clone(),
                ));
            }
            Err(_) => {
                tracing::error!(
                    queue = shared.name.as_deref().unwrap_or(""),
                    "add_after called outside a tokio runtime: adding the item now"
                );
                shared.delays.waiting.lock().timer_started = false;
                let ready = shared.delays.take_all();
                ready.into_iter().for_each(|item| shared.add(item));
                return;
            }
        }
    }
    if is_earliest {
        shared.delays.timer.notify_one();
    }
}

/// The queue's timer: adds items as they become ready, sleeping until the earliest.
/// Holds only a weak reference, so it ends when the queue is dropped or shut down.
async fn run_timer<T: QueueItem>(shared: Weak<Shared<T>>, timer: Arc<Notify>) {
    loop {
        let notified = timer.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        let next = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            if shared.delays.stopped() {
                return;
            }
            let (ready, next) = shared.delays.take_ready(Instant::now());
            ready.into_iter().for_each(|item| shared.add(item));
            next
        };
        match next {
            Some(at) => {
                let _ = tokio::time::timeout_at(at, notified).await;
            }
            None => notified.await,
        }
    }
}

/// The items waiting for their delay.
pub(super) struct Delays<T> {
    waiting: Mutex<Waiting<T>>,
    timer: Arc<Notify>,
}

struct Waiting<T> {
    heap: BinaryHeap<Entry<T>>,
    /// The current ready time of each waiting item; heap entries that disagree are stale.
    ready_at: HashMap<T, (Instant, u64), foldhash::fast::RandomState>,
    seq: u64,
    timer_started: bool,
    stopped: bool,
}

impl<T: QueueItem> Delays<T> {
    pub(super) fn new() -> Self {
        Self {
            waiting: Mutex::new(Waiting {
                heap: BinaryHeap::new(),
                ready_at: HashMap::default(),
                seq: 0,
                timer_started: false,
                stopped: false,
            }),
            timer: Arc::new(Notify::new()),
        }
    }

    /// Drops every waiting item and ends the timer task.
    pub(super) fn stop(&self) {
        let mut waiting = self.waiting.lock();
        waiting.stopped = true;
        waiting.heap.clear();
        waiting.ready_at.clear();
        drop(waiting);
        self.timer.notify_one();
    }

    fn stopped(&self) -> bool {
        self.waiting.lock().stopped
    }

    /// Removes the items ready at `now`; returns them and the next ready time.
    fn take_ready(&self, now: Instant) -> (Vec<T>, Option<Instant>) {
        let mut waiting = self.waiting.lock();
        let mut ready = Vec::new();
        while let Some(entry) = waiting.heap.peek() {
            if entry.at > now {
                return (ready, Some(entry.at));
            }
            let entry = waiting.heap.pop().expect("peeked");
            if waiting.ready_at.get(&entry.item) == Some(&(entry.at, entry.seq)) {
                waiting.ready_at.remove(&entry.item);
                ready.push(entry.item);
            }
        }
        (ready, None)
    }

    fn take_all(&self) -> Vec<T> {
        let mut waiting = self.waiting.lock();
        waiting.heap.clear();
        waiting.ready_at.drain().map(|(item, _)| item).collect()
    }
}

/// A heap entry, ordered so the earliest ready time (then the oldest add) pops first.
struct Entry<T> {
    at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse, so the smallest (at, seq) is on top.
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}
