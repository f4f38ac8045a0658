//! What an informer reports to its error handlers: every failure it recovered from, and
//! the one it could not (a task that died).

use std::sync::Arc;

use parking_lot::Mutex;

use crate::{ObjectKey, fifo::DeltaType, index::IndexFailure, reflector::ReflectorError};

/// A failure an informer met, given to the handlers added with
/// [`SharedIndexInformer::on_error`](super::SharedIndexInformer::on_error) (and logged).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Failure {
    /// Listing or watching failed; the reflector retries (see [`ReflectorError`]).
    #[error(transparent)]
    Reflector(#[from] ReflectorError),
    /// An event older than the cached object was not applied: the cache keeps the newer
    /// object (client-go applies it and goes back in time).
    #[error(
        "{key}: skipped a {delta:?} at resourceVersion {event}, older than the cached {cached}"
    )]
    StaleEvent {
        /// The object's key.
        key: ObjectKey,
        /// What the event was.
        delta: DeltaType,
        /// The cached object's resourceVersion.
        cached: String,
        /// The event's resourceVersion.
        event: String,
    },
    /// An index function panicked; the object is cached but in no bucket of that index.
    #[error(transparent)]
    IndexPanicked(IndexFailure),
    /// The transform panicked on an object. The cache keeps what it had for that key
    /// (a delete still removes it); nothing is lost that was cached.
    #[error("the transform panicked on {key}; the cache keeps its previous state: {message}")]
    TransformPanicked {
        /// The object's key (empty if it had none).
        key: String,
        /// The panic's message.
        message: String,
    },
    /// An event handler panicked; it keeps receiving the next notifications.
    #[error("event handler {handler} panicked on {key}: {message}")]
    HandlerPanicked {
        /// The handler's name.
        handler: String,
        /// The object's key.
        key: String,
        /// The panic's message.
        message: String,
    },
    /// A task of the informer ended unexpectedly (a bug): the cache no longer follows the
    /// server. The informer reports itself unhealthy and not synced from then on.
    #[error("the informer's {task} task died: {message}")]
    TaskDied {
        /// Which task: `"reflector"` or `"informer"`.
        task: &'static str,
        /// The panic's message, or why it ended.
        message: String,
    },
}

type Handler = Arc<dyn Fn(&Failure) + Send + Sync>;

/// Logs failures and hands them to the informer's error handlers.
pub(crate) struct Reporter {
    name: String,
    handlers: Mutex<Vec<Handler>>,
}

impl Reporter {
    pub(crate) fn new(name: String) -> Self {
        Self {
            name,
            handlers: Mutex::default(),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn add(&self, handler: Handler) {
        self.handlers.lock().push(handler);
    }

    /// Logs `failure` (reflector failures are logged by the reflector) and calls every
    /// handler, catching a panic in one of them.
    pub(crate) fn report(&self, failure: Failure) {
        match &failure {
            Failure::Reflector(_) => {}
            Failure::TaskDied { .. } => tracing::error!(informer = %self.name, "{failure}"),
            _ => tracing::warn!(informer = %self.name, "{failure}"),
        }
        let handlers = self.handlers.lock().clone();
        for handler in handlers {
            let called =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&failure)));
            if let Err(panic) = called {
                let message = crate::panic_message(panic.as_ref());
                tracing::error!(informer = %self.name, "an error handler panicked: {message}");
            }
        }
    }
}
