//! A listener: one handler's buffer and the task that delivers it, in order.
//!
//! The informer pushes without ever waiting (so one slow handler cannot hold up the
//! informer or the others); the task pops and calls the handler. A handler that panics is
//! caught, the panic is logged with the object's key and the handler's name, and the next
//! notification is delivered as usual.

use std::{
    collections::VecDeque,
    panic::{AssertUnwindSafe, catch_unwind},
    sync::Arc,
    time::{Duration, Instant},
};

use kube::Resource;
use parking_lot::Mutex;
use tokio::{sync::Notify, task::JoinHandle};

use super::{Notification, ResourceEventHandler};
use crate::meta_namespace_key;

/// A handler call slower than this, while the backlog is long, is logged.
const SLOW_CALL: Duration = Duration::from_millis(100);
/// The backlog above which slow calls are logged (client-go's initial buffer size).
const LONG_BACKLOG: usize = 1024;

struct Buffer<K> {
    pending: VecDeque<Notification<K>>,
    /// Initial-list notifications queued but not yet delivered.
    initial_pending: usize,
    closed: bool,
}

/// The informer's side of a listener.
pub(crate) struct Listener<K> {
    shared: Arc<Shared<K>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

struct Shared<K> {
    name: String,
    buffer: Mutex<Buffer<K>>,
    wake: Notify,
}

impl<K: Resource + Send + Sync + 'static> Listener<K> {
    /// Starts the delivery task of `handler` (needs a tokio runtime).
    pub(crate) fn spawn(name: String, handler: Arc<dyn ResourceEventHandler<K>>) -> Self {
        let shared = Arc::new(Shared {
            name,
            buffer: Mutex::new(Buffer {
                pending: VecDeque::new(),
                initial_pending: 0,
                closed: false,
            }),
            wake: Notify::new(),
        });
        let task = tokio::spawn(deliver(shared.clone(), handler));
        Self {
            shared,
            task: Mutex::new(Some(task)),
        }
    }

    /// Queues a notification; never waits.
    pub(crate) fn push(&self, notification: Notification<K>) {
        let mut buffer = self.shared.buffer.lock();
        if buffer.closed {
            return;
        }
        if matches!(
            notification,
            Notification::Add {
                is_in_initial_list: true,
                ..
            }
        ) {
            buffer.initial_pending += 1;
        }
        buffer.pending.push_back(notification);
        drop(buffer);
        self.shared.wake.notify_one();
    }

    /// How many notifications wait for the handler.
    pub(crate) fn backlog(&self) -> usize {
        self.shared.buffer.lock().pending.len()
    }

    /// Whether every initial-list notification queued so far has been handled.
    pub(crate) fn initial_delivered(&self) -> bool {
        self.shared.buffer.lock().initial_pending == 0
    }

    /// Stops delivery (what is queued is dropped) and waits for the task to end, so the
    /// handler is not called any more once this returns.
    pub(crate) async fn stop(&self) {
        {
            let mut buffer = self.shared.buffer.lock();
            buffer.closed = true;
            buffer.pending.clear();
        }
        self.shared.wake.notify_one();
        let task = self.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

async fn deliver<K: Resource + Send + Sync + 'static>(
    shared: Arc<Shared<K>>,
    handler: Arc<dyn ResourceEventHandler<K>>,
) {
    loop {
        let wake = shared.wake.notified();
        let mut wake = std::pin::pin!(wake);
        wake.as_mut().enable();
        let next = {
            let mut buffer = shared.buffer.lock();
            if buffer.closed {
                return;
            }
            buffer
                .pending
                .pop_front()
                .map(|n| (n, buffer.pending.len()))
        };
        let Some((notification, backlog)) = next else {
            wake.await;
            continue;
        };
        let initial = matches!(
            notification,
            Notification::Add {
                is_in_initial_list: true,
                ..
            }
        );
        let key = meta_namespace_key(notification.object().as_ref())
            .map(|k| k.to_string())
            .unwrap_or_default();
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| notification.dispatch(handler.as_ref())));
        let took = started.elapsed();
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic".to_owned());
            tracing::error!(handler = %shared.name, object = %key, "event handler panicked: {message}");
        }
        if took > SLOW_CALL && backlog > LONG_BACKLOG {
            tracing::warn!(handler = %shared.name, object = %key, ?took, backlog, "slow event handler with a long backlog");
        }
        if initial {
            let mut buffer = shared.buffer.lock();
            buffer.initial_pending = buffer.initial_pending.saturating_sub(1);
        }
        // Let other tasks run between calls even when the backlog never empties.
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::ObjectMeta;

    use super::*;
    use crate::informer::HandlerFuncs;

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

    async fn until(mut done: impl FnMut() -> bool) {
        for _ in 0..10_000 {
            if done() {
                return;
            }
            tokio::task::yield_now().await;
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
        let listener = Listener::spawn("test".into(), Arc::new(handler));
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
        let listener = Listener::spawn("slow".into(), Arc::new(handler));
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

    #[tokio::test]
    async fn stop_waits_for_the_task_and_drops_what_is_queued() {
        let calls = Arc::new(Mutex::new(0usize));
        let c = calls.clone();
        let handler = HandlerFuncs::new().on_add(move |_: Arc<ConfigMap>, _| *c.lock() += 1);
        let listener = Listener::spawn("stopped".into(), Arc::new(handler));
        listener.stop().await;
        listener.push(add("late", false));
        tokio::task::yield_now().await;
        assert_eq!(*calls.lock(), 0, "no call after stop");
    }
}
