//! [`Controller::watches_fleet`]: a controller of hub objects that follows objects in every
//! member of a [`Fleet`] — the way back from member clusters to the hub (a placement's
//! status gathered from the members, a cluster inventory).

use std::{collections::HashMap, sync::Arc};

use kube::Resource;
use kube_informer::{ObjectKey, ReadOnlyStore, informer::HandlerOptions, meta_namespace_key};

use super::{
    Controller, Watchable,
    relations::{self, Attached, Enqueue, Updates},
    trigger::{self, Trigger},
};
use crate::fleet::{Cluster, Fleet};

/// One member as the relation follows it.
struct Followed<O> {
    generation: u64,
    store: ReadOnlyStore<O>,
    attached: Box<dyn Attached>,
}

/// The members followed, by name: their handlers closed when dropped (the controller
/// stopped, or its future dropped).
struct PerMember<O>(HashMap<String, Followed<O>>);

impl<O> Drop for PerMember<O> {
    fn drop(&mut self) {
        for followed in self.0.values() {
            followed.attached.close();
        }
    }
}

impl<K> Controller<K>
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
{
    /// Reconcile the keys (of this controller's own, hub-side kind) that `map` gives for
    /// every `O` that changes in any member of `fleet`; `map` is told the member's name. A
    /// member engaged later is followed from then on (its objects arrive as adds); when a
    /// member is disengaged, the keys its cached objects mapped to are reconciled once more
    /// (so a status gathered from members can drop it). Members' caches are not waited for:
    /// an unreachable member never holds the hub controller back. Read a member's objects in
    /// the reconcile from [`Fleet::cluster`]'s factory (the same informer, already synced
    /// or syncing).
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager, fleet: &kube_informer_runtime::fleet::Fleet) {
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    /// use kube::ResourceExt;
    /// use kube_informer::ObjectKey;
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// // A Deployment in any member labelled `placement=<name>` reconciles the hub's
    /// // placement ConfigMap `placements/<name>`.
    /// let controller = manager
    ///     .controller::<ConfigMap>(ControllerOptions::default().name("placement-status"))
    ///     .watches_fleet(fleet, |_cluster: &str, deploy: &Deployment| {
    ///         deploy.labels().get("placement")
    ///             .map(|name| ObjectKey::new(Some("placements"), name))
    ///             .into_iter()
    ///             .collect()
    ///     });
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn watches_fleet<O: Watchable>(
        mut self,
        fleet: &Fleet,
        map: impl Fn(&str, &O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let enqueue = self.enqueue.via("watches", trigger::short_type_name::<O>());
        let filter = self.event_filter.clone();
        let (fleet, map) = (fleet.clone(), Arc::new(map));
        let name = format!("{} fleet relation", self.name);
        self.triggers
            .push(parking_lot::Mutex::new(Box::pin(async move {
                let mut changes = fleet.changes();
                let mut followed = PerMember::<O>(HashMap::new());
                loop {
                    let clusters = changes.borrow_and_update().clone();
                    let gone: Vec<String> = followed
                        .0
                        .iter()
                        .filter(|(n, f)| {
                            clusters.get(*n).map(Cluster::generation) != Some(f.generation)
                        })
                        .map(|(n, _)| n.clone())
                        .collect();
                    for member in gone {
                        if let Some(gone) = followed.0.remove(&member) {
                            gone.attached.remove().await;
                            requeue_gone(&enqueue, &member, &gone.store, &*map);
                        }
                    }
                    for (member, cluster) in &clusters {
                        if followed.0.contains_key(member) {
                            continue;
                        }
                        let informer = cluster.factory().informer::<O>();
                        let store = informer.store();
                        let in_member = {
                            let (map, member) = (map.clone(), member.clone());
                            move |object: &O| map(&member, object)
                        };
                        let updates = Updates {
                            predicate: None,
                            filter: filter.clone(),
                        };
                        let handler = relations::mapped(enqueue.clone(), in_member, updates);
                        let options = HandlerOptions::default().name(name.clone());
                        let attached = relations::attach_now(informer, handler, options);
                        cluster.factory().start();
                        let generation = cluster.generation();
                        let member_state = Followed {
                            generation,
                            store,
                            attached,
                        };
                        followed.0.insert(member.clone(), member_state);
                    }
                    if changes.changed().await.is_err() {
                        // The fleet is gone: what is attached stays until the controller stops.
                        std::future::pending::<()>().await;
                    }
                }
            })));
        self
    }
}

/// Queues once more the keys the objects of a member just disengaged mapped to (its cache
/// as it last was).
fn requeue_gone<O: Watchable>(
    enqueue: &Enqueue,
    member: &str,
    store: &ReadOnlyStore<O>,
    map: &(impl Fn(&str, &O) -> Vec<ObjectKey> + ?Sized),
) {
    for object in store.list() {
        for key in map(member, &object) {
            enqueue.triggers.note(&key, || Trigger {
                event: "disengaged",
                relation: "watches",
                kind: trigger::short_type_name::<O>(),
                object: meta_namespace_key(object.as_ref()).ok(),
            });
            enqueue.add(key);
        }
    }
}
