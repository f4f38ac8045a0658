//! A shard's half of the protocol, around an unchanged reconcile function.

use std::{collections::HashSet, sync::Arc};

use futures_util::future::BoxFuture;
use kube::{
    Resource,
    api::{Api, ApiResource, DynamicObject},
};
use kube_informer::ObjectKey;
use parking_lot::Mutex;

use super::{Standing, acknowledge_drain, standing};
use crate::reconcile::{Action, Cached, Reconciler};

/// Wraps `reconcile` for `shard` of `ring`, so the function itself does not change:
///
/// - an object labelled for this shard is reconciled as before;
/// - one being drained away is not: its labels are removed ([`acknowledge_drain`]) so the
///   sharder can hand it over — the controller's work queue never runs two reconciles of a
///   key at once, so none of it runs here any more;
/// - an object the shard's informer reports gone is looked up first: if it still exists
///   it has *moved* to another shard (its label changed), which is not a deletion, and the
///   reconcile is not called; only a real deletion reaches it as [`Cached::Gone`], and only
///   on the shard that held the object (reconciled it labelled for itself, and did not
///   let go of it since). A key queued by a child whose deleted owner another shard held
///   is not reconciled here: otherwise two shards could run the deleted owner's last
///   reconcile at once while its children move between them.
///
/// A request of its own that fails is logged and the key retried with backoff
/// ([`Action::Retry`]). The shard's informers must select its label
/// ([`shard_selectors`](super::shard_selectors)), and the replica should run its
/// controllers only while it holds its shard Lease
/// ([`ManagerOptions::leader_election`](crate::ManagerOptions::leader_election) with
/// [`shard_lease`](super::shard_lease)).
///
/// ```no_run
/// # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kube_informer::FactoryOptions;
/// use kube_informer_runtime::{
///     Action, Cached, ControllerOptions, Manager, ManagerOptions,
///     sharding::{reconcile_sharded, shard_lease, shard_selectors},
/// };
///
/// async fn reconcile(d: Cached<Deployment>, _ctx: Arc<()>) -> Result<Action, kube::Error> {
///     Ok(Action::Done)
/// }
///
/// let me = "replica-0";
/// let options = ManagerOptions::default()
///     .leader_election(shard_lease("web", me).namespace("operators"))
///     .factory(FactoryOptions::default().selectors(shard_selectors("web", me)));
/// let mut manager = Manager::new(client.clone(), options).await?;
/// let controller = manager.controller::<Deployment>(ControllerOptions::default().name("web"));
/// let sharded = reconcile_sharded("web", me, client, reconcile);
/// manager.add_controller(controller, sharded, |_, _, _| Action::Retry, Arc::new(()));
/// # Ok(()) }
/// ```
pub fn reconcile_sharded<K, Ctx, R>(
    ring: impl Into<String>,
    shard: impl Into<String>,
    client: kube::Client,
    reconcile: R,
) -> impl Fn(Cached<K>, Arc<Ctx>) -> BoxFuture<'static, Result<Action, R::Error>> + Send + Sync + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
    R: Reconciler<K, Ctx>,
{
    reconcile_sharded_with(ring, shard, client, (), reconcile)
}

/// [`reconcile_sharded`] for a `K` with runtime type information (a dynamic controller's
/// `ApiResource`).
pub(super) fn reconcile_sharded_with<K, Ctx, R>(
    ring: impl Into<String>,
    shard: impl Into<String>,
    client: kube::Client,
    dyntype: K::DynamicType,
    reconcile: R,
) -> impl Fn(Cached<K>, Arc<Ctx>) -> BoxFuture<'static, Result<Action, R::Error>> + Send + Sync + 'static
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
    R: Reconciler<K, Ctx>,
{
    let resource = ApiResource::erase::<K>(&dyntype);
    let (ring, shard): (Arc<str>, Arc<str>) = (ring.into().into(), shard.into().into());
    let reconcile = Arc::new(reconcile);
    // The keys this shard holds (it reconciled them labelled for it, and has not let go of
    // them since): only these get their deletion reconciled here.
    let held: Arc<Mutex<HashSet<ObjectKey>>> = Arc::default();
    move |cached: Cached<K>, ctx: Arc<Ctx>| {
        let (ring, shard, client, reconcile, held) = (
            ring.clone(),
            shard.clone(),
            client.clone(),
            reconcile.clone(),
            held.clone(),
        );
        let (resource, dyntype) = (resource.clone(), dyntype.clone());
        Box::pin(async move {
            let present = match &cached {
                Cached::Present(object) => object.clone(),
                Cached::Gone(key) => {
                    let key = key.clone();
                    return match still_there(&client, &resource, &key).await {
                        // Moved away (or back, and its informer is about to say so).
                        Ok(true) => {
                            held.lock().remove(&key);
                            Ok(Action::Done)
                        }
                        Ok(false) if held.lock().contains(&key) => {
                            let result = reconcile.reconcile(cached, ctx).await;
                            if matches!(result, Ok(Action::Done)) {
                                held.lock().remove(&key);
                            }
                            result
                        }
                        Ok(false) => {
                            tracing::debug!(%key, ring = %ring, "deleted while another shard held it: not reconciled here");
                            Ok(Action::Done)
                        }
                        Err(error) => {
                            tracing::warn!(%key, %error, ring = %ring, "cannot tell a deletion from a move; retrying");
                            Ok(Action::Retry)
                        }
                    };
                }
            };
            let meta = present.meta();
            let key = ObjectKey::new(
                meta.namespace.as_deref(),
                meta.name.as_deref().unwrap_or_default(),
            );
            match standing(meta, &ring, &shard) {
                Standing::Mine => {
                    held.lock().insert(key);
                    reconcile.reconcile(cached, ctx).await
                }
                Standing::Elsewhere => {
                    held.lock().remove(&key);
                    Ok(Action::Done)
                }
                Standing::Draining => {
                    match acknowledge_drain(&client, &dyntype, &ring, &*present).await {
                        Ok(acknowledged) => {
                            if acknowledged {
                                held.lock().remove(&key);
                            }
                            // Or it changed meanwhile: its next event brings it back.
                            Ok(Action::Done)
                        }
                        Err(error) => {
                            tracing::warn!(%key, %error, ring = %ring, "cannot let go of a drained object; retrying");
                            Ok(Action::Retry)
                        }
                    }
                }
            }
        })
    }
}

/// Whether the object `key` still exists on the server (labelled for whichever shard).
pub(super) async fn still_there(
    client: &kube::Client,
    resource: &ApiResource,
    key: &ObjectKey,
) -> Result<bool, kube::Error> {
    let api: Api<DynamicObject> = match key.namespace() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    };
    Ok(api.get_opt(key.name()).await?.is_some())
}
