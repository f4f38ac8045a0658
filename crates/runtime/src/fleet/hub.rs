//! Objects in the hub that map to keys in every member: a template, a policy, a
//! placement. Each change of a hub object queues the keys `map` gives in every engaged
//! member, and a member engaged later gets the keys of every hub object at once — so an
//! object the hub asks for converges in each member, also one that joins afterwards.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use kube_informer::{
    ObjectKey,
    fifo::DeletedObject,
    informer::{HandlerFuncs, HandlerOptions, SharedIndexInformer},
};
use parking_lot::Mutex;

use super::inbox::Inbox;
use crate::controller::KeySink as _;

/// Queues keys in every member followed now (through its inbox: held until it syncs).
#[derive(Clone, Default)]
pub(super) struct Fanout {
    members: Arc<Mutex<Vec<Arc<Inbox>>>>,
}

impl Fanout {
    /// The members followed now.
    pub(super) fn set(&self, members: Vec<Arc<Inbox>>) {
        *self.members.lock() = members;
    }

    fn add(&self, keys: Vec<ObjectKey>) {
        let members = self.members.lock().clone();
        for key in keys {
            for inbox in &members {
                inbox.add(key.clone());
            }
        }
    }
}

/// A relation's handler on its hub informer, for as long as the fleet controller runs:
/// [removed](Self::remove) (awaited) when it stops, closed at once if it is dropped — a
/// dropped `FleetController::run` leaves no handler behind.
pub(super) struct Detach {
    close: Box<dyn Fn() + Send + Sync>,
    remove: Option<Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>>,
}

impl Detach {
    /// Detaches the handler and waits until it is no longer called.
    pub(super) async fn remove(mut self) {
        if let Some(remove) = self.remove.take() {
            remove().await;
        }
    }
}

impl Drop for Detach {
    fn drop(&mut self) {
        if self.remove.is_some() {
            (self.close)();
        }
    }
}

/// One hub relation: every key its hub objects map to now, and how to attach its handler.
pub(super) struct HubRelation {
    pub(super) all_keys: Arc<dyn Fn() -> Vec<ObjectKey> + Send + Sync>,
    pub(super) attach: Box<dyn FnOnce(Fanout) -> Detach + Send + Sync>,
}

/// The relation of the hub objects `hub` caches, through `map`.
pub(super) fn relation<O>(
    hub: &SharedIndexInformer<O>,
    map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
) -> HubRelation
where
    O: kube::Resource + Clone + Send + Sync + 'static,
{
    let map = Arc::new(map);
    let store = hub.store();
    let all_keys = {
        let map = map.clone();
        Arc::new(move || store.list().iter().flat_map(|o| map(o)).collect())
    };
    let informer = hub.clone();
    let attach = Box::new(move |fanout: Fanout| -> Detach {
        let (on_add, on_update, on_delete) = (fanout.clone(), fanout.clone(), fanout);
        let (add_map, update_map, delete_map) = (map.clone(), map.clone(), map);
        let handler = HandlerFuncs::new()
            .on_add(move |o: Arc<O>, _| on_add.add(add_map(&o)))
            .on_update(move |old: Arc<O>, new: Arc<O>| {
                let mut keys = update_map(&new);
                keys.extend(update_map(&old));
                keys.sort();
                keys.dedup();
                on_update.add(keys);
            })
            .on_delete(move |gone: DeletedObject<O>| on_delete.add(delete_map(gone.object())));
        let registration = Arc::new(
            informer.add_event_handler(handler, HandlerOptions::default().name("fleet hub")),
        );
        let closing = registration.clone();
        Detach {
            close: Box::new(move || closing.close()),
            remove: Some(Box::new(move || {
                Box::pin(async move {
                    let _ = informer.remove_event_handler(&registration).await;
                })
            })),
        }
    });
    HubRelation { all_keys, attach }
}
