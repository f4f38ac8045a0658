//! [`enqueue_keys`]: the handler that feeds a work queue from an informer.

use std::sync::Arc;

use kube::Resource;

use super::HandlerFuncs;
use crate::{
    DeletedObject, ObjectKey, fifo::deletion_handling_meta_namespace_key, meta_namespace_key,
    workqueue::RateLimitingQueue,
};

/// A handler that queues the key of every added, updated or deleted object (tombstones
/// included) into `queue`: the usual way to feed [`Workers`](crate::workqueue::Workers)
/// from an informer.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer::{ObjectKey, informer::{enqueue_keys, HandlerOptions, SharedIndexInformer}, workqueue::RateLimitingQueue};
///
/// fn feed(informer: &SharedIndexInformer<ConfigMap>, queue: &RateLimitingQueue<ObjectKey>) {
///     informer.add_event_handler(enqueue_keys(queue.clone()), HandlerOptions::default().name("configs"));
/// }
/// # let _ = feed;
/// ```
pub fn enqueue_keys<K: Resource + Send + Sync + 'static>(
    queue: RateLimitingQueue<ObjectKey>,
) -> HandlerFuncs<K> {
    let (on_add, on_update, on_delete) = (queue.clone(), queue.clone(), queue);
    HandlerFuncs::new()
        .on_add(move |obj: Arc<K>, _| {
            if let Ok(key) = meta_namespace_key(obj.as_ref()) {
                on_add.add(key);
            }
        })
        .on_update(move |_, obj: Arc<K>| {
            if let Ok(key) = meta_namespace_key(obj.as_ref()) {
                on_update.add(key);
            }
        })
        .on_delete(move |gone: DeletedObject<K>| {
            if let Ok(key) = deletion_handling_meta_namespace_key(&gone) {
                on_delete.add(key);
            }
        })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::ObjectMeta;

    use super::*;
    use crate::informer::ResourceEventHandler;

    #[test]
    fn queues_the_key_of_every_change_tombstones_included() {
        let queue: RateLimitingQueue<ObjectKey> = RateLimitingQueue::default();
        let handler = enqueue_keys::<ConfigMap>(queue.clone());
        let cm = |name: &str| {
            Arc::new(ConfigMap {
                metadata: ObjectMeta {
                    namespace: Some("ns".into()),
                    name: Some(name.into()),
                    ..Default::default()
                },
                ..Default::default()
            })
        };
        // Called through the trait: the inherent on_* of HandlerFuncs are its builder.
        ResourceEventHandler::on_add(&handler, cm("a"), true);
        ResourceEventHandler::on_update(&handler, cm("a"), cm("b"));
        let tombstone = DeletedObject::FinalStateUnknown {
            key: ObjectKey::new(Some("ns"), "c"),
            last_known: cm("c"),
        };
        ResourceEventHandler::on_delete(&handler, tombstone);
        ResourceEventHandler::on_add(&handler, cm("a"), false); // already queued: once
        assert_eq!(queue.len(), 3);
    }
}
