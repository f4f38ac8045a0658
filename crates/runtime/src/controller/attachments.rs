//! The handlers a running controller has attached to informers: attached when it starts
//! (not when it is built: a standby, or a controller never run, fills no queue), removed
//! when it stops, and closed, with its queue shut down, if its future is dropped.

use futures_util::future::BoxFuture;
use kube::Resource;
use kube_informer::informer::{
    HandlerFuncs, HandlerOptions, HandlerRegistration, SharedIndexInformer,
};

use super::enqueue::Queue;

/// A handler attached to an informer for as long as a controller runs.
pub(crate) trait Attached: Send + Sync {
    /// Detaches it without waiting (for `Drop`).
    fn close(&self);
    /// Detaches it and waits until it is no longer called.
    fn remove(self: Box<Self>) -> BoxFuture<'static, ()>;
}

struct Registered<T> {
    informer: SharedIndexInformer<T>,
    registration: HandlerRegistration<T>,
}

impl<T: Resource + Clone + Send + Sync + 'static> Attached for Registered<T> {
    fn close(&self) {
        self.registration.close();
    }

    fn remove(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = self.informer.remove_event_handler(&self.registration).await;
        })
    }
}

/// A relation's handler, attached when the controller starts (not when it is built: a
/// standby replica, or a controller never run, fills no queue).
pub(crate) type Attach = Box<dyn FnOnce() -> Box<dyn Attached> + Send + Sync>;

/// Attaches `handler` to `informer` now.
pub(crate) fn attach_now<T: Resource + Clone + Send + Sync + 'static>(
    informer: SharedIndexInformer<T>,
    handler: HandlerFuncs<T>,
    options: HandlerOptions,
) -> Box<dyn Attached> {
    let registration = informer.add_event_handler(handler, options);
    Box::new(Registered {
        informer,
        registration,
    })
}

/// Attaches `handler` to `informer` when called.
pub(crate) fn attach_later<T: Resource + Clone + Send + Sync + 'static>(
    informer: SharedIndexInformer<T>,
    handler: HandlerFuncs<T>,
    options: HandlerOptions,
) -> Attach {
    Box::new(move || attach_now(informer, handler, options))
}

/// The handlers of a running controller and its queue: [`remove`](Self::remove)d when it
/// stops, closed (and the queue shut down) if its future is dropped instead.
pub(crate) struct Attachments {
    queue: Queue,
    handlers: Vec<Box<dyn Attached>>,
}

impl Attachments {
    pub(crate) fn new(queue: Queue) -> Self {
        Self {
            queue,
            handlers: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, handler: Box<dyn Attached>) {
        self.handlers.push(handler);
    }

    /// Detaches every handler, waiting until none is called any more, and shuts the queue
    /// down.
    pub(crate) async fn remove(mut self) {
        self.queue.shut_down();
        for handler in std::mem::take(&mut self.handlers) {
            handler.remove().await;
        }
    }
}

impl Drop for Attachments {
    fn drop(&mut self) {
        self.queue.shut_down();
        for handler in &self.handlers {
            handler.close();
        }
    }
}
