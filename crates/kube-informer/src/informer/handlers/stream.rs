//! Notifications as an async `Stream`, for code that prefers `while let Some(n) = s.next()`
//! to callbacks.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::Stream;
use kube::Resource;

use super::{handler::Notification, listener::Listener, registration::HandlerRegistration};

/// The notifications of one handler registration, in order (see
/// [`SharedIndexInformer::stream`](crate::informer::SharedIndexInformer::stream)).
///
/// The stream reads the registration's own buffer: with
/// [`HandlerOptions::coalescing`](crate::informer::HandlerOptions::coalescing) it holds at most one
/// pending notification per object however slowly it is read, and
/// [`backlog`](HandlerRegistration::backlog) is what waits unread. Dropping the stream
/// removes its registration from the informer.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use futures_util::StreamExt;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer::{
///     informer::{HandlerOptions, InformerOptions, Notification, SharedIndexInformer},
///     list_watch::MemorySource,
/// };
/// use tokio_util::sync::CancellationToken;
///
/// let source: MemorySource<ConfigMap> = MemorySource::default();
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("a".into());
/// source.add(cm);
/// let informer = SharedIndexInformer::new(source, InformerOptions::default());
/// let mut notifications = informer.stream(HandlerOptions::default().coalescing());
/// let cancel = CancellationToken::new();
/// tokio::spawn({ let i = informer.clone(); let c = cancel.clone(); async move { i.run(c).await } });
/// match notifications.next().await {
///     Some(Notification::Add { object, is_in_initial_list }) => {
///         assert_eq!(object.metadata.name.as_deref(), Some("a"));
///         assert!(is_in_initial_list);
///     }
///     other => panic!("{other:?}"),
/// }
/// cancel.cancel();
/// # }
/// ```
pub struct NotificationStream<K: Resource + Send + Sync + 'static> {
    pub(crate) listener: Arc<Listener<K>>,
    pub(crate) registration: HandlerRegistration<K>,
}

impl<K: Resource + Send + Sync + 'static> NotificationStream<K> {
    /// The registration behind the stream: its `has_synced`, its backlog.
    pub fn registration(&self) -> &HandlerRegistration<K> {
        &self.registration
    }
}

impl<K: Resource + Send + Sync + 'static> Stream for NotificationStream<K> {
    type Item = Notification<K>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.listener.poll_next(cx)
    }
}

impl<K: Resource + Send + Sync + 'static> Drop for NotificationStream<K> {
    fn drop(&mut self) {
        self.registration.detach();
        self.listener.close();
    }
}

impl<K: Resource + Send + Sync + 'static> std::fmt::Debug for NotificationStream<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotificationStream")
            .field("registration", &self.registration)
            .finish()
    }
}
