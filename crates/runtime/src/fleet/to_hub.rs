//! [`Controller::watches_fleet`]: a controller of hub objects that follows objects in every
//! member of a [`Fleet`] — the way back from member clusters to the hub (a placement's
//! status gathered from the members, a cluster inventory).

use std::{collections::HashMap, sync::Arc};

use kube::Resource;
use kube_informer::{ObjectKey, ReadOnlyStore};

use super::{Fleet, let_go};
use crate::controller::{Attached, Controller, Foreign, Watchable};

/// One member as the relation follows it.
struct MemberWatch<O> {
    generation: u64,
    store: ReadOnlyStore<O>,
    attached: Box<dyn Attached>,
}

/// The members followed, by name: their handlers closed when dropped (the controller
/// stopped, or its future dropped).
struct PerMember<O>(HashMap<String, MemberWatch<O>>);

impl<O> Drop for PerMember<O> {
    fn drop(&mut self) {
        for followed in self.0.values() {
            followed.attached.close();
        }
    }
}

type MemberMap<O> = Arc<dyn Fn(&str, &O) -> Vec<ObjectKey> + Send + Sync>;

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
        self,
        fleet: &Fleet,
        map: impl Fn(&str, &O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let foreign = self.foreign::<O>("fleet relation");
        let following = follow_members(fleet.clone(), foreign, Arc::new(map));
        self.follow(following)
    }
}

/// Attaches `foreign`'s handler to each member's informer of `O` as members come, and
/// detaches it (requeueing what the member's objects mapped to) as they go.
async fn follow_members<O: Watchable>(fleet: Fleet, foreign: Arc<Foreign>, map: MemberMap<O>) {
    let mut changes = fleet.changes();
    let mut followed = PerMember::<O>(HashMap::new());
    loop {
        let clusters = changes.borrow_and_update().clone();
        let followed_now = followed.0.iter().map(|(n, f)| (n.as_str(), f.generation));
        for member in let_go(followed_now, &clusters) {
            if let Some(gone) = followed.0.remove(&member) {
                gone.attached.remove().await;
                foreign.requeue(&gone.store, |o| map(&member, o), "disengaged");
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
            let attached = foreign.attach(informer, in_member);
            cluster.factory().start();
            let generation = cluster.generation();
            let state = MemberWatch {
                generation,
                store,
                attached,
            };
            followed.0.insert(member.clone(), state);
        }
        if changes.changed().await.is_err() {
            // The fleet is gone: what is attached stays until the controller stops.
            std::future::pending::<()>().await;
        }
    }
}
