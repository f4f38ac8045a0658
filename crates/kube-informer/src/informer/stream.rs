//! Notifications as an async `Stream`, for code that prefers `while let Some(n) = s.next()`
//! to callbacks.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::Stream;
use tokio::sync::mpsc;

use super::{HandlerRegistration, Notification, ResourceEventHandler};
use crate::DeletedObject;

/// A handler forwarding every notification into a channel.
pub(crate) struct Forward<K>(pub(crate) mpsc::UnboundedSender<Notification<K>>);

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for Forward<K> {
    fn on_add(&self, object: Arc<K>, is_in_initial_list: bool) {
        let _ = self.0.send(Notification::Add {
            object,
            is_in_initial_list,
        });
    }
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        let _ = self.0.send(Notification::Update { old, new });
    }
    fn on_delete(&self, object: DeletedObject<K>) {
        let _ = self.0.send(Notification::Delete(object));
    }
}

/// The notifications of one handler registration, in order (see
/// [`SharedIndexInformer::stream`](super::SharedIndexInformer::stream)). The buffer is
/// unbounded, like a listener's: read it.
pub struct NotificationStream<K> {
    pub(crate) rx: mpsc::UnboundedReceiver<Notification<K>>,
    pub(crate) registration: HandlerRegistration<K>,
}

impl<K> NotificationStream<K> {
    /// The registration behind the stream: its `has_synced`, or to remove it.
    pub fn registration(&self) -> &HandlerRegistration<K> {
        &self.registration
    }
}

impl<K> Stream for NotificationStream<K> {
    type Item = Notification<K>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl<K> std::fmt::Debug for NotificationStream<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotificationStream")
            .field("registration", &self.registration)
            .finish()
    }
}
