//! A listener: one handler's buffer and the task that delivers it, in order — or, for a
//! [`NotificationStream`](crate::informer::NotificationStream), the buffer the stream pulls from.
//!
//! The informer pushes without ever waiting; before it applies more, it waits for a
//! listener whose backlog is at its limit, within the handler's grace period (see
//! `backpressure`: a handler that stays behind is set aside and holds nobody back). The
//! task pops and calls the handler. A handler that panics is
//! caught, the panic is reported with the object's key and the handler's name, and the next
//! notification is delivered as usual.

use std::{
    collections::VecDeque,
    panic::{AssertUnwindSafe, catch_unwind},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use kube::Resource;
use parking_lot::Mutex;

use crate::{FastMap as HashMap, ObjectKey, fifo::deletion_handling_meta_namespace_key};
use tokio::{sync::Notify, task::JoinHandle};

use super::{
    backpressure::{Backpressure, Change, Hold, Standing},
    handler::{Notification, ResourceEventHandler},
};
use crate::informer::{Failure, HandlerOptions, failure::Reporter};
use crate::meta_namespace_key;

/// A handler call slower than this, while the backlog is long, is logged.
const SLOW_CALL: Duration = Duration::from_millis(100);
/// The backlog above which slow calls are logged (client-go's initial buffer size).
const LONG_BACKLOG: usize = 1024;
/// Notifications a delivery task takes from its buffer under one lock.
const DELIVERY_BATCH: usize = 64;

struct Buffer<K> {
    pending: Pending<K>,
    /// Whether the backlog holds the informer back, or was set aside.
    standing: Standing,
    /// Initial-list notifications queued but not yet delivered.
    initial_pending: usize,
    closed: bool,
    /// The stream waiting for a notification (pull mode).
    waker: Option<Waker>,
}

/// How a listener keeps what its handler has not taken yet.
enum Pending<K> {
    /// Every notification, in order (client-go's semantics; bounded by backpressure unless
    /// the handler opted out).
    Ordered(VecDeque<Notification<K>>),
    /// At most one notification per object: the changes a slow handler has not taken yet
    /// are merged, so memory stays within O(objects).
    Coalesced {
        order: VecDeque<ObjectKey>,
        latest: HashMap<ObjectKey, Notification<K>>,
    },
}

fn is_initial<K>(n: &Notification<K>) -> bool {
    matches!(
        n,
        Notification::Add {
            is_in_initial_list: true,
            ..
        }
    )
}

/// Merges `new` into the pending `old` of the same object: the handler will see the latest
/// state, and an add, update or delete that still tells it the truth.
fn merge<K>(old: Notification<K>, new: Notification<K>) -> Notification<K> {
    use Notification::{Add, Delete, Update};
    match (old, new) {
        // Not seen yet: still an add, of the latest state.
        (
            Add {
                is_in_initial_list, ..
            },
            Add { object, .. } | Update { new: object, .. },
        ) => Add {
            object,
            is_in_initial_list,
        },
        (Update { old, .. }, Add { object: new, .. } | Update { new, .. }) => Update { old, new },
        // Gone (or re-created while pending): what the handler last saw -> now.
        (Delete(gone), Add { object: new, .. } | Update { new, .. }) => Update {
            old: gone.into_object(),
            new,
        },
        (_, Delete(gone)) => Delete(gone),
    }
}

impl<K: Resource> Pending<K> {
    fn len(&self) -> usize {
        match self {
            Self::Ordered(queue) => queue.len(),
            Self::Coalesced { order, .. } => order.len(),
        }
    }

    fn clear(&mut self) {
        match self {
            Self::Ordered(queue) => queue.clear(),
            Self::Coalesced { order, latest } => {
                order.clear();
                latest.clear();
            }
        }
    }

    fn pop(&mut self) -> Option<Notification<K>> {
        match self {
            Self::Ordered(queue) => queue.pop_front(),
            Self::Coalesced { order, latest } => {
                let key = order.pop_front()?;
                latest.remove(&key)
            }
        }
    }

    /// Queues `n`; returns the change in the count of pending initial-list adds.
    fn push(&mut self, n: Notification<K>) -> isize {
        let added = isize::from(is_initial(&n));
        match self {
            Self::Ordered(queue) => {
                queue.push_back(n);
                added
            }
            Self::Coalesced { order, latest } => {
                let key = match &n {
                    Notification::Delete(gone) => deletion_handling_meta_namespace_key(gone),
                    other => meta_namespace_key(other.object().as_ref()),
                };
                let Ok(key) = key else {
                    return 0; // objects in the cache always have keys
                };
                match latest.remove(&key) {
                    None => {
                        order.push_back(key.clone());
                        latest.insert(key, n);
                        added
                    }
                    Some(old) => {
                        let before = isize::from(is_initial(&old));
                        let merged = merge(old, n);
                        let after = isize::from(is_initial(&merged));
                        latest.insert(key, merged);
                        after - before
                    }
                }
            }
        }
    }
}

/// The informer's side of a listener.
pub(crate) struct Listener<K> {
    shared: Arc<Shared<K>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

struct Shared<K> {
    name: String,
    buffer: Mutex<Buffer<K>>,
    /// `buffer.closed`, readable without the lock between the calls of a batch.
    closed: AtomicBool,
    wake: Notify,
    /// How far behind the handler may fall before the informer waits; `None`: never.
    pressure: Option<Backpressure>,
    /// Told when the backlog falls under the limit (the informer may be waiting).
    room: Notify,
    /// Told when the initial list has been delivered (sync waiters listen).
    progress: Arc<Notify>,
    reporter: Arc<Reporter>,
}

/// What a listener needs of its informer.
pub(crate) struct ListenerContext {
    pub(crate) progress: Arc<Notify>,
    pub(crate) reporter: Arc<Reporter>,
}

impl<K: Resource + Send + Sync + 'static> Listener<K> {
    fn shared(name: String, options: &HandlerOptions, context: ListenerContext) -> Arc<Shared<K>> {
        let pending = if options.coalesce {
            Pending::Coalesced {
                order: VecDeque::new(),
                latest: HashMap::default(),
            }
        } else {
            Pending::Ordered(VecDeque::new())
        };
        Arc::new(Shared {
            name,
            buffer: Mutex::new(Buffer {
                pending,
                standing: Standing::default(),
                initial_pending: 0,
                closed: false,
                waker: None,
            }),
            closed: AtomicBool::new(false),
            wake: Notify::new(),
            pressure: options.backpressure,
            room: Notify::new(),
            progress: context.progress,
            reporter: context.reporter,
        })
    }

    /// Starts the delivery task of `handler` (needs a tokio runtime), buffering as
    /// `options` say (every notification or one per object; how far behind it may fall).
    pub(crate) fn spawn(
        name: String,
        handler: Arc<dyn ResourceEventHandler<K>>,
        options: &HandlerOptions,
        context: ListenerContext,
    ) -> Self {
        let shared = Self::shared(name, options, context);
        let task = tokio::spawn(deliver(shared.clone(), handler));
        Self {
            shared,
            task: Mutex::new(Some(task)),
        }
    }

    /// A listener without a task, pulled by [`poll_next`](Self::poll_next).
    pub(crate) fn pulled(name: String, options: &HandlerOptions, context: ListenerContext) -> Self {
        Self {
            shared: Self::shared(name, options, context),
            task: Mutex::new(None),
        }
    }

    /// The next notification for a pulled listener; `None` once it is stopped.
    pub(crate) fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Notification<K>>> {
        let mut buffer = self.shared.buffer.lock();
        match buffer.pending.pop() {
            Some(n) => {
                self.shared
                    .made_room(buffer.pending.len() + 1, buffer.pending.len());
                if is_initial(&n) {
                    buffer.initial_pending = buffer.initial_pending.saturating_sub(1);
                    if buffer.initial_pending == 0 {
                        self.shared.progress.notify_waiters();
                    }
                }
                Poll::Ready(Some(n))
            }
            None if buffer.closed => Poll::Ready(None),
            None => {
                buffer.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// Queues a notification; never waits.
    pub(crate) fn push(&self, notification: Notification<K>) {
        let mut buffer = self.shared.buffer.lock();
        if buffer.closed {
            return;
        }
        let initial = buffer.pending.push(notification);
        buffer.initial_pending = buffer.initial_pending.saturating_add_signed(initial);
        let waker = buffer.waker.take();
        drop(buffer);
        self.shared.wake.notify_one();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// How many notifications wait for the handler.
    pub(crate) fn backlog(&self) -> usize {
        self.shared.buffer.lock().pending.len()
    }

    /// Whether the handler stayed behind past its grace period and no longer holds the
    /// informer back.
    pub(crate) fn is_set_aside(&self) -> bool {
        self.shared.buffer.lock().standing.is_set_aside()
    }

    /// Waits while the backlog is at the handler's limit, at most until its grace runs out
    /// (then it is set aside, with a warning). Returns at once when there is room, when the
    /// handler was set aside, or when it has no limit.
    pub(crate) async fn wait_for_room(&self, informer: &str) {
        let Some(pressure) = self.shared.pressure else {
            return;
        };
        loop {
            let room = self.shared.room.notified();
            let mut room = std::pin::pin!(room);
            room.as_mut().enable();
            let (hold, change, backlog) = {
                let mut buffer = self.shared.buffer.lock();
                if buffer.closed {
                    return;
                }
                let backlog = buffer.pending.len();
                let (hold, change) =
                    buffer
                        .standing
                        .check(pressure, backlog, tokio::time::Instant::now());
                (hold, change, backlog)
            };
            let name = &self.shared.name;
            match change {
                Change::SetAside => tracing::warn!(
                    informer,
                    handler = %name,
                    backlog,
                    grace = ?pressure.grace,
                    "a handler stayed behind for longer than its grace period and was set aside: it no longer holds the informer back, and its notifications are buffered without bound until it catches up"
                ),
                Change::CaughtUp => {
                    tracing::info!(informer, handler = %name, backlog, "a handler that was set aside has caught up");
                }
                Change::None => {}
            }
            match hold {
                Hold::Room => return,
                Hold::Until(None) => room.await,
                Hold::Until(Some(deadline)) => {
                    tokio::select! {
                        () = room => {}
                        () = tokio::time::sleep_until(deadline) => {}
                    }
                }
            }
        }
    }

    /// The handler's name.
    #[cfg(feature = "metrics")]
    pub(crate) fn name(&self) -> &str {
        &self.shared.name
    }

    /// Whether every initial-list notification queued so far has been handled.
    pub(crate) fn initial_delivered(&self) -> bool {
        self.shared.buffer.lock().initial_pending == 0
    }

    /// Stops delivery (what is queued is dropped) and waits for the task to end, so the
    /// handler is not called any more once this returns.
    pub(crate) async fn stop(&self) {
        self.close();
        let task = self.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Stops delivery without waiting (what is queued is dropped; a stream ends).
    pub(crate) fn close(&self) {
        let waker = {
            let mut buffer = self.shared.buffer.lock();
            buffer.closed = true;
            buffer.pending.clear();
            buffer.initial_pending = 0;
            self.shared.closed.store(true, Ordering::Release);
            buffer.waker.take()
        };
        self.shared.wake.notify_one();
        self.shared.room.notify_waiters();
        self.shared.progress.notify_waiters();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<K> Shared<K> {
    /// Wakes an informer waiting for room when the backlog went under the limit.
    fn made_room(&self, before: usize, after: usize) {
        if let Some(pressure) = self.pressure
            && before >= pressure.limit
            && after < pressure.limit
        {
            self.room.notify_waiters();
        }
    }
}

async fn deliver<K: Resource + Send + Sync + 'static>(
    shared: Arc<Shared<K>>,
    handler: Arc<dyn ResourceEventHandler<K>>,
) {
    let mut batch = Vec::with_capacity(DELIVERY_BATCH);
    loop {
        let wake = shared.wake.notified();
        let mut wake = std::pin::pin!(wake);
        wake.as_mut().enable();
        let backlog = {
            let mut buffer = shared.buffer.lock();
            if buffer.closed {
                return;
            }
            let before = buffer.pending.len();
            while batch.len() < DELIVERY_BATCH {
                match buffer.pending.pop() {
                    Some(n) => batch.push(n),
                    None => break,
                }
            }
            shared.made_room(before, buffer.pending.len());
            buffer.pending.len()
        };
        if batch.is_empty() {
            wake.await;
            continue;
        }
        let mut initial_delivered = 0;
        for notification in batch.drain(..) {
            if shared.closed.load(Ordering::Acquire) {
                return;
            }
            initial_delivered += usize::from(is_initial(&notification));
            call(&shared, handler.as_ref(), notification, backlog);
            // Yields only once the task's scheduling budget is spent: fair to the other
            // tasks without a trip through the scheduler per call.
            tokio::task::consume_budget().await;
        }
        if initial_delivered > 0 {
            let mut buffer = shared.buffer.lock();
            buffer.initial_pending = buffer.initial_pending.saturating_sub(initial_delivered);
            if buffer.initial_pending == 0 {
                shared.progress.notify_waiters();
            }
        }
    }
}

/// Calls the handler with one notification, catching and reporting a panic and logging a
/// slow call made while the backlog is long.
fn call<K: Resource + Send + Sync + 'static>(
    shared: &Shared<K>,
    handler: &dyn ResourceEventHandler<K>,
    notification: Notification<K>,
    backlog: usize,
) {
    // The key is formatted only if something is logged; keep the object for that.
    let object = notification.object().clone();
    let key = || {
        meta_namespace_key(object.as_ref())
            .map(|k| k.to_string())
            .unwrap_or_default()
    };
    let started = Instant::now();
    let outcome = catch_unwind(AssertUnwindSafe(|| notification.dispatch(handler)));
    let took = started.elapsed();
    let name = &shared.name;
    if let Err(panic) = outcome {
        shared.reporter.report(Failure::HandlerPanicked {
            handler: name.clone(),
            key: key(),
            message: crate::panic_message(panic.as_ref()),
        });
    }
    if took > SLOW_CALL && backlog > LONG_BACKLOG {
        tracing::warn!(handler = %name, object = %key(), ?took, backlog, "slow event handler with a long backlog");
    }
}

#[cfg(test)]
mod tests;
