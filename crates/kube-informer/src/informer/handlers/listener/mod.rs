//! A listener: one handler's buffer and the task that delivers it, in order — or, for a
//! [`NotificationStream`](crate::informer::NotificationStream), the buffer the stream pulls from.
//!
//! The informer pushes without ever waiting (so one slow handler cannot hold up the
//! informer or the others); the task pops and calls the handler. A handler that panics is
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

use super::handler::{Notification, ResourceEventHandler};
use crate::informer::{Failure, failure::Reporter};
use crate::meta_namespace_key;

/// A handler call slower than this, while the backlog is long, is logged.
const SLOW_CALL: Duration = Duration::from_millis(100);
/// The backlog above which slow calls are logged (client-go's initial buffer size).
const LONG_BACKLOG: usize = 1024;
/// Notifications a delivery task takes from its buffer under one lock.
const DELIVERY_BATCH: usize = 64;

struct Buffer<K> {
    pending: Pending<K>,
    /// Initial-list notifications queued but not yet delivered.
    initial_pending: usize,
    closed: bool,
    /// The stream waiting for a notification (pull mode).
    waker: Option<Waker>,
}

/// How a listener keeps what its handler has not taken yet.
enum Pending<K> {
    /// Every notification, in order (client-go's semantics; unbounded).
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
    fn shared(name: String, coalesce: bool, context: ListenerContext) -> Arc<Shared<K>> {
        let pending = if coalesce {
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
                initial_pending: 0,
                closed: false,
                waker: None,
            }),
            closed: AtomicBool::new(false),
            wake: Notify::new(),
            progress: context.progress,
            reporter: context.reporter,
        })
    }

    /// Starts the delivery task of `handler` (needs a tokio runtime); `coalesce` picks the
    /// bounded, per-object buffer.
    pub(crate) fn spawn(
        name: String,
        handler: Arc<dyn ResourceEventHandler<K>>,
        coalesce: bool,
        context: ListenerContext,
    ) -> Self {
        let shared = Self::shared(name, coalesce, context);
        let task = tokio::spawn(deliver(shared.clone(), handler));
        Self {
            shared,
            task: Mutex::new(Some(task)),
        }
    }

    /// A listener without a task, pulled by [`poll_next`](Self::poll_next).
    pub(crate) fn pulled(name: String, coalesce: bool, context: ListenerContext) -> Self {
        Self {
            shared: Self::shared(name, coalesce, context),
            task: Mutex::new(None),
        }
    }

    /// The next notification for a pulled listener; `None` once it is stopped.
    pub(crate) fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Notification<K>>> {
        let mut buffer = self.shared.buffer.lock();
        match buffer.pending.pop() {
            Some(n) => {
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
        self.shared.progress.notify_waiters();
        if let Some(waker) = waker {
            waker.wake();
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
            while batch.len() < DELIVERY_BATCH {
                match buffer.pending.pop() {
                    Some(n) => batch.push(n),
                    None => break,
                }
            }
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
