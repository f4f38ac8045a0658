//! A listener: one handler's buffer and the task that delivers it, in order — or, for a
//! [`NotificationStream`](super::NotificationStream), the buffer the stream pulls from.
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

use crate::{FastMap as HashMap, ObjectKey, deletion_handling_meta_namespace_key};
use tokio::{sync::Notify, task::JoinHandle};

use super::{Failure, Notification, ResourceEventHandler, failure::Reporter};
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
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::ObjectMeta;

    use super::*;
    use crate::informer::HandlerFuncs;

    fn context() -> ListenerContext {
        ListenerContext {
            progress: Arc::new(Notify::new()),
            reporter: Arc::new(Reporter::new("test".into())),
        }
    }

    fn cm(name: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn add(name: &str, initial: bool) -> Notification<ConfigMap> {
        Notification::Add {
            object: cm(name),
            is_in_initial_list: initial,
        }
    }

    /// Waits for `done` (the bound only turns a hang into a failure).
    async fn until(mut done: impl FnMut() -> bool) {
        for _ in 0..30_000 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("condition never held");
    }

    #[tokio::test]
    async fn delivers_in_order_and_survives_a_panicking_call() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let handler = HandlerFuncs::new().on_add(move |o: Arc<ConfigMap>, _| {
            let name = o.metadata.name.clone().unwrap();
            if name == "boom" {
                panic!("handler bug on {name}");
            }
            log.lock().push(name);
        });
        let listener = Listener::spawn("test".into(), Arc::new(handler), false, context());
        for name in ["a", "b", "boom", "c", "d"] {
            listener.push(add(name, false));
        }
        until(|| seen.lock().len() == 4).await;
        assert_eq!(
            *seen.lock(),
            ["a", "b", "c", "d"],
            "in order, and on after the panic"
        );
        listener.stop().await;
    }

    #[tokio::test]
    async fn initial_notifications_are_tracked_until_delivered() {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let g = gate.clone();
        let handler = HandlerFuncs::new().on_add(move |_: Arc<ConfigMap>, _| {
            // Block the handler until the test lets it go.
            while g.try_acquire().is_err() {
                std::thread::yield_now();
            }
        });
        let listener = Listener::spawn("slow".into(), Arc::new(handler), false, context());
        listener.push(add("x", true));
        listener.push(add("y", true));
        listener.push(add("z", false));
        assert!(!listener.initial_delivered());
        gate.add_permits(2);
        until(|| listener.initial_delivered()).await;
        gate.add_permits(1);
        until(|| listener.backlog() == 0).await;
        listener.stop().await;
    }

    fn versioned(name: &str, rv: u32) -> Arc<ConfigMap> {
        let mut obj = (*cm(name)).clone();
        obj.metadata.resource_version = Some(rv.to_string());
        Arc::new(obj)
    }

    /// A stuck handler while 50 objects change 100 times each: the default buffer grows to
    /// every notification, the coalescing one stays at one per object and then hands over
    /// the latest state of each.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn coalescing_bounds_the_backlog_of_a_stuck_handler() {
        for coalesce in [false, true] {
            // The first call blocks until released (bounded, so a failure cannot hang).
            let (release, gate) = std::sync::mpsc::channel::<()>();
            let gate = Mutex::new(Some(gate));
            let seen = Arc::new(Mutex::new(
                std::collections::BTreeMap::<String, String>::new(),
            ));
            let s = seen.clone();
            let record = move |o: Arc<ConfigMap>| {
                let rv = o.metadata.resource_version.clone().unwrap_or_default();
                s.lock()
                    .insert(o.metadata.name.clone().unwrap_or_default(), rv);
            };
            let record2 = record.clone();
            let handler = HandlerFuncs::new()
                .on_add(move |o: Arc<ConfigMap>, _| {
                    if let Some(gate) = gate.lock().take() {
                        let _ = gate.recv_timeout(Duration::from_secs(30));
                    }
                    record(o);
                })
                .on_update(move |_, n: Arc<ConfigMap>| record2(n));
            let listener = Listener::spawn("stuck".into(), Arc::new(handler), coalesce, context());
            listener.push(add("block", false)); // the handler sticks on this one
            until(|| listener.backlog() == 0).await;
            for round in 1..=100u32 {
                for i in 0..50 {
                    let name = format!("o{i}");
                    let n = if round == 1 {
                        Notification::Add {
                            object: versioned(&name, round),
                            is_in_initial_list: false,
                        }
                    } else {
                        Notification::Update {
                            old: versioned(&name, round - 1),
                            new: versioned(&name, round),
                        }
                    };
                    listener.push(n);
                }
            }
            let backlog = listener.backlog();
            if coalesce {
                assert_eq!(backlog, 50, "one pending notification per object");
            } else {
                assert_eq!(backlog, 5000, "every notification, in order");
            }
            release.send(()).unwrap();
            for _ in 0..60_000 {
                if listener.backlog() == 0 && seen.lock().len() == 51 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert_eq!(seen.lock().len(), 51, "every object delivered");
            let latest: Vec<_> = seen
                .lock()
                .iter()
                .filter(|(k, _)| k.starts_with('o'))
                .map(|(_, v)| v.clone())
                .collect();
            assert!(
                latest.iter().all(|rv| rv == "100"),
                "the latest state of every object"
            );
            listener.stop().await;
        }
    }

    #[test]
    fn merging_keeps_what_the_handler_must_know() {
        let (a1, a2) = (versioned("a", 1), versioned("a", 2));
        let rv =
            |n: &Notification<ConfigMap>| n.object().metadata.resource_version.clone().unwrap();
        let add = |o: &Arc<ConfigMap>| Notification::Add {
            object: o.clone(),
            is_in_initial_list: true,
        };
        let update = |o: &Arc<ConfigMap>, n: &Arc<ConfigMap>| Notification::Update {
            old: o.clone(),
            new: n.clone(),
        };
        let delete =
            |o: &Arc<ConfigMap>| Notification::Delete(crate::DeletedObject::Known(o.clone()));
        let m = merge(add(&a1), update(&a1, &a2));
        assert!(
            matches!(
                m,
                Notification::Add {
                    is_in_initial_list: true,
                    ..
                }
            ) && rv(&m) == "2"
        );
        let m = merge(update(&a1, &a2), delete(&a2));
        assert!(matches!(m, Notification::Delete(_)));
        let m = merge(delete(&a1), add(&a2));
        assert!(
            matches!(&m, Notification::Update { old, .. } if old.metadata.resource_version.as_deref() == Some("1"))
                && rv(&m) == "2"
        );
    }

    #[tokio::test]
    async fn stop_waits_for_the_task_and_drops_what_is_queued() {
        let calls = Arc::new(Mutex::new(0usize));
        let c = calls.clone();
        let handler = HandlerFuncs::new().on_add(move |_: Arc<ConfigMap>, _| *c.lock() += 1);
        let listener = Listener::spawn("stopped".into(), Arc::new(handler), false, context());
        listener.stop().await;
        listener.push(add("late", false));
        tokio::task::yield_now().await;
        assert_eq!(*calls.lock(), 0, "no call after stop");
    }
}
