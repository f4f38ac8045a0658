//! A replica's reconciles in range mode: a key is reconciled only while its slot is served
//! here, and counted as running in it (so a narrow waits for it).

use std::{collections::HashMap, sync::Arc};

use futures_util::future::BoxFuture;
use kube::{Resource, api::ApiResource};
use kube_informer::ObjectKey;
use parking_lot::Mutex;

use super::RangeShare;
use crate::reconcile::{Action, Cached, Reconciler};
use crate::sharding::reconcile::still_there;

/// Wraps `reconcile` for `share`: an object present in the cache is reconciled if its slot
/// is served here; a key reported gone only if its slot is served here (with uids hashed,
/// a deleted object's slot is known only from when it was reconciled here; with
/// namespaces, from its key) and the server says it is gone: a slot just gained is served
/// before its informers have listed it, so "not in the cache" is not yet "deleted" (its
/// object arrives with the list, and is reconciled then). Anything else is another
/// replica's: done.
pub(crate) fn reconcile_in_slots<K, Ctx, R>(
    share: Arc<RangeShare>,
    client: kube::Client,
    resource: ApiResource,
    reconcile: R,
) -> impl Fn(Cached<K>, Arc<Ctx>) -> BoxFuture<'static, Result<Action, R::Error>> + Send + Sync + 'static
where
    K: Resource + Clone + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
    R: Reconciler<K, Ctx>,
{
    let reconcile = Arc::new(reconcile);
    // The slot of each key reconciled here (its object was in the cache).
    let slots: Arc<Mutex<HashMap<ObjectKey, usize>>> = Arc::default();
    move |cached: Cached<K>, ctx: Arc<Ctx>| {
        let (share, reconcile, slots) = (share.clone(), reconcile.clone(), slots.clone());
        let (client, resource) = (client.clone(), resource.clone());
        Box::pin(async move {
            let (key, slot) = match &cached {
                Cached::Present(object) => {
                    let meta = object.meta();
                    let name = meta.name.as_deref().unwrap_or_default();
                    let key = ObjectKey::new(meta.namespace.as_deref(), name);
                    (key, Some(share.slot_of(meta)))
                }
                Cached::Gone(key) => {
                    let known = slots.lock().get(key).copied();
                    let slot = known.or_else(|| share.slot_of_namespace(key.namespace()));
                    (key.clone(), slot)
                }
            };
            let Some(running) = slot.and_then(|slot| share.enter(slot)) else {
                slots.lock().remove(&key);
                return Ok(Action::Done);
            };
            let gone = matches!(cached, Cached::Gone(_));
            if gone {
                match still_there(&client, &resource, &key).await {
                    Ok(false) => {}
                    // Not deleted: its informer has not listed it yet, and will.
                    Ok(true) => return Ok(Action::Done),
                    Err(error) => {
                        tracing::warn!(%key, %error, "cannot tell a deletion from a slot not listed yet; retrying");
                        return Ok(Action::Retry);
                    }
                }
            }
            if let Some(slot) = slot.filter(|_| !gone) {
                slots.lock().insert(key.clone(), slot);
            }
            let result = reconcile.reconcile(cached, ctx).await;
            drop(running);
            if gone && matches!(result, Ok(Action::Done)) {
                slots.lock().remove(&key);
            }
            result
        })
    }
}
