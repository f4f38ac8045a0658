//! [`HandlerRegistration`]: a handler's place in an informer.

use std::{sync::Arc, sync::Weak, time::Duration};

use kube::Resource;

use super::listener::Listener;
use crate::informer::{SyncError, inner::Inner};

/// A handler's place in an informer: tells whether it has seen the initial state, waits for
/// that, and identifies it for [`remove_event_handler`](crate::informer::SharedIndexInformer::remove_event_handler).
pub struct HandlerRegistration<K> {
    pub(in crate::informer) id: u64,
    pub(in crate::informer) listener: Arc<Listener<K>>,
    pub(in crate::informer) informer: Weak<Inner<K>>,
}

impl<K> std::fmt::Debug for HandlerRegistration<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerRegistration")
            .field("id", &self.id)
            .finish()
    }
}

impl<K: Resource + Send + Sync + 'static> HandlerRegistration<K> {
    /// True once the informer has synced and this handler has been given every object of
    /// the initial state (for a late handler: of the cache when it was added).
    #[doc(alias = "HasSynced")]
    pub fn has_synced(&self) -> bool {
        self.informer
            .upgrade()
            .is_some_and(|inner| inner.has_synced())
            && self.listener.initial_delivered()
    }

    /// Waits until [`has_synced`](Self::has_synced), at most `timeout`; the error says which
    /// informer and why, as far as it is known.
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), SyncError> {
        let Some(inner) = self.informer.upgrade() else {
            return Err(SyncError {
                name: "a dropped informer".to_owned(),
                waited: Duration::ZERO,
                last_error: None,
                failed: None,
                stopped: true,
            });
        };
        let synced = inner
            .wait_until(timeout, || {
                inner.has_synced() && self.listener.initial_delivered()
            })
            .await;
        match synced {
            true => Ok(()),
            false => Err(inner.sync_error(inner.reporter.name().to_owned(), timeout)),
        }
    }

    /// How many notifications wait for this handler (or, for a stream, wait unread).
    pub fn backlog(&self) -> usize {
        self.listener.backlog()
    }

    /// Whether the handler stayed behind for longer than its grace period and was set
    /// aside: it no longer holds the informer back, and its buffer grows until it has caught
    /// up (see [`HandlerOptions`](crate::informer::HandlerOptions)).
    pub fn is_set_aside(&self) -> bool {
        self.listener.is_set_aside()
    }

    /// Takes the handler out of its informer without waiting for a call in progress to end
    /// (for code that cannot await, such as `Drop`; prefer
    /// [`SharedIndexInformer::remove_event_handler`](crate::informer::SharedIndexInformer::remove_event_handler),
    /// which waits): no notification is queued for it any more, and those queued are dropped.
    pub fn close(&self) {
        self.detach();
        self.listener.close();
    }

    /// Takes the handler out of its informer without waiting (for a dropped stream).
    pub(in crate::informer) fn detach(&self) {
        if let Some(inner) = self.informer.upgrade() {
            inner.remove(self.id);
        }
    }
}
