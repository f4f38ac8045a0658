//! The event handlers that turn changes into keys to reconcile: the primary object's own
//! changes (through the predicate), its owned children (through ownerReferences), and any
//! other object mapped by a function.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use kube_informer::{DeletedObject, ObjectKey, informer::HandlerFuncs, meta_namespace_key};

use super::{Expectations, enqueue::Enqueue, predicate::Predicate};

/// A test of an update's metadata (old, new) that every watch of a controller applies.
pub(crate) type MetaFilter = Arc<dyn Fn(&ObjectMeta, &ObjectMeta) -> bool + Send + Sync>;

/// The controller's event filter, shared by its handlers (set any time before it runs).
pub(crate) type EventFilter = Arc<parking_lot::RwLock<Option<MetaFilter>>>;

/// Which updates of `T` a handler passes on: a resync always; a real update when the
/// relation's predicate and the controller's event filter both pass it.
pub(crate) struct Updates<T> {
    pub(crate) predicate: Option<Predicate<T>>,
    pub(crate) filter: EventFilter,
}

impl<T: Resource + 'static> Updates<T> {
    fn pass(&self, old: &Arc<T>, new: &Arc<T>) -> bool {
        Arc::ptr_eq(old, new)
            || (self.predicate.as_ref().is_none_or(|p| p.changed(old, new))
                && self
                    .filter
                    .read()
                    .as_ref()
                    .is_none_or(|f| f(old.meta(), new.meta())))
    }
}

/// The primary object's handler: adds and deletes (tombstones included) always queue the
/// key; updates queue it when `predicate` says so, and resyncs (old and new the same
/// object) always.
pub(crate) fn primary<K: Resource + Send + Sync + 'static>(
    queue: Enqueue,
    updates: Updates<K>,
    expectations: Expectations,
) -> HandlerFuncs<K> {
    let (on_add, on_update, on_delete) = (queue.clone(), queue.clone(), queue);
    HandlerFuncs::new()
        .on_add(move |obj: Arc<K>, initial| enqueue(&on_add, obj.as_ref(), initial))
        .on_update(move |old: Arc<K>, new: Arc<K>| {
            if updates.pass(&old, &new)
                && let Ok(key) = meta_namespace_key(new.as_ref())
            {
                let resync = Arc::ptr_eq(&old, &new);
                on_update.note(&key, updated(resync), || None);
                on_update.add_update(key, resync);
            }
        })
        .on_delete(move |gone: DeletedObject<K>| {
            if let Ok(key) = kube_informer::fifo::deletion_handling_meta_namespace_key(&gone) {
                expectations.forget(&key);
                on_delete.note(&key, "deleted", || None);
                on_delete.add(key);
            }
        })
}

fn enqueue<K: Resource>(queue: &Enqueue, obj: &K, initial: bool) {
    if let Ok(key) = meta_namespace_key(obj) {
        queue.note(&key, added(initial), || None);
        queue.add_as(key, initial);
    }
}

/// The trigger's word for an add: of the initial list, or live.
fn added(initial: bool) -> &'static str {
    if initial { "listed" } else { "added" }
}

/// The trigger's word for an update: a resync (the same object), or a change.
fn updated(resync: bool) -> &'static str {
    if resync { "resync" } else { "updated" }
}

/// The kind a controller reconciles, as owner references name it: children are mapped to
/// their owner by API group and kind, and to the child's namespace when the owner is
/// namespaced.
#[derive(Clone, Debug)]
pub(crate) struct OwnerKind {
    pub(crate) kind: String,
    pub(crate) group: String,
    pub(crate) namespaced: bool,
}

impl OwnerKind {
    pub(crate) fn of<K: Resource>(dyntype: &K::DynamicType, namespaced: bool) -> Self {
        OwnerKind {
            kind: K::kind(dyntype).into_owned(),
            group: K::group(dyntype).into_owned(),
            namespaced,
        }
    }

    /// The key of the controller owner of this kind among `references`, those of a child
    /// in `namespace` (see [`controller_owner`]).
    pub(crate) fn key_among(
        &self,
        references: &[OwnerReference],
        namespace: Option<&str>,
    ) -> Option<ObjectKey> {
        let reference = references.iter().find(|r| {
            r.controller == Some(true)
                && r.kind == self.kind
                && group_of(&r.api_version) == self.group
        })?;
        let namespace = self.namespaced.then_some(namespace).flatten();
        Some(ObjectKey::new(namespace, &reference.name))
    }

    /// Whether objects of `group`'s `kind` are of this kind.
    pub(crate) fn is(&self, group: &str, kind: &str) -> bool {
        self.group == group && self.kind == kind
    }
}

/// The key of `child`'s controller owner of kind `owner` (ownerReference with
/// `controller: true`, the same kind and API group, whatever the version: a child made when
/// a custom resource was served as `v1beta1` still names its owner so after `v1` became
/// the stored version, and the garbage collector matches owners the same way).
pub(crate) fn controller_owner<C: Resource>(child: &C, owner: &OwnerKind) -> Option<ObjectKey> {
    owner.key_among(child.owner_references(), child.meta().namespace.as_deref())
}

/// The API group of `api_version` (`apps/v1`: `apps`; `v1`: the core group, `""`).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// The handler of an owned kind `C`: queues the controller owner of every added, updated
/// (old and new owner, if it changed) and deleted child, tombstones included, and marks the
/// creation or deletion as observed in `expectations`. Orphans (no controller owner of kind
/// `K`) queue nothing.
pub(crate) fn owned<C>(
    queue: Enqueue,
    owner: Arc<OwnerKind>,
    expectations: Expectations,
    updates: Updates<C>,
) -> HandlerFuncs<C>
where
    C: Resource + Send + Sync + 'static,
{
    let owner = move |child: &C| controller_owner(child, &owner);
    let (add_owner, update_owner, delete_owner) = (owner.clone(), owner.clone(), owner);
    let (on_add, on_update, on_delete) = (queue.clone(), queue.clone(), queue);
    let (created, deleted) = (expectations.clone(), expectations);
    HandlerFuncs::new()
        .on_add(move |child: Arc<C>, initial| {
            if let Some(key) = add_owner(&child) {
                created.creation_observed(&key);
                on_add.note(&key, added(initial), || {
                    meta_namespace_key(child.as_ref()).ok()
                });
                on_add.add_as(key, initial);
            }
        })
        .on_update(move |old: Arc<C>, new: Arc<C>| {
            if !updates.pass(&old, &new) {
                return;
            }
            let resync = Arc::ptr_eq(&old, &new);
            let child = || meta_namespace_key(new.as_ref()).ok();
            let (old, new_owner) = (update_owner(&old), update_owner(&new));
            if old != new_owner
                && let Some(old) = old
            {
                on_update.note(&old, "updated", child);
                on_update.add(old);
            }
            if let Some(new_owner) = new_owner {
                on_update.note(&new_owner, updated(resync), child);
                on_update.add_update(new_owner, resync);
            }
        })
        .on_delete(move |gone: DeletedObject<C>| {
            if let Some(key) = delete_owner(gone.object()) {
                deleted.deletion_observed(&key);
                let child = || meta_namespace_key(gone.object().as_ref()).ok();
                on_delete.note(&key, "deleted", child);
                on_delete.add(key);
            }
        })
}

/// The handler of a watched kind `O`: queues the keys `map` gives for every added, updated
/// (old and new) and deleted object, tombstones included.
pub(crate) fn mapped<O: Resource + Send + Sync + 'static>(
    queue: Enqueue,
    map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    updates: Updates<O>,
) -> HandlerFuncs<O> {
    let both = move |change: Change<'_, O>| match change {
        Change::Added(object) | Change::Deleted(object) => map(object),
        Change::Updated { old, new } => {
            let mut keys = map(new);
            if !std::ptr::eq(old, new) {
                keys.extend(map(old));
            }
            keys
        }
    };
    mapped_changes(queue, both, updates)
}

/// One change of a watched object, as a [`watches_changes`](super::Controller::watches_changes)
/// map sees it.
#[derive(Debug)]
pub enum Change<'a, O> {
    /// Added (or listed).
    Added(&'a O),
    /// Updated: the object before and after. On a resync both are the same object.
    Updated {
        /// Before the update.
        old: &'a O,
        /// After it.
        new: &'a O,
    },
    /// Deleted: its last known state.
    Deleted(&'a O),
}

/// The handler of a watched kind `O` whose map sees each change whole.
pub(crate) fn mapped_changes<O: Resource + Send + Sync + 'static>(
    queue: Enqueue,
    map: impl Fn(Change<'_, O>) -> Vec<ObjectKey> + Send + Sync + 'static,
    updates: Updates<O>,
) -> HandlerFuncs<O> {
    let map = Arc::new(map);
    let (add_map, update_map, delete_map) = (map.clone(), map.clone(), map);
    let (on_add, on_update, on_delete) = (queue.clone(), queue.clone(), queue);
    HandlerFuncs::new()
        .on_add(move |obj: Arc<O>, initial| {
            for key in add_map(Change::Added(&obj)) {
                on_add.note(&key, added(initial), || {
                    meta_namespace_key(obj.as_ref()).ok()
                });
                on_add.add_as(key, initial);
            }
        })
        .on_update(move |old: Arc<O>, new: Arc<O>| {
            if !updates.pass(&old, &new) {
                return;
            }
            let resync = Arc::ptr_eq(&old, &new);
            let keys = update_map(Change::Updated {
                old: &old,
                new: &new,
            });
            for key in keys {
                on_update.note(&key, updated(resync), || {
                    meta_namespace_key(new.as_ref()).ok()
                });
                on_update.add_update(key, resync);
            }
        })
        .on_delete(move |gone: DeletedObject<O>| {
            for key in delete_map(Change::Deleted(gone.object())) {
                on_delete.note(&key, "deleted", || {
                    meta_namespace_key(gone.object().as_ref()).ok()
                });
                on_delete.add(key);
            }
        })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};

    use super::*;

    fn pod(owners: Vec<OwnerReference>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.namespace = Some("shop".into());
        pod.metadata.owner_references = Some(owners);
        pod
    }

    fn owner(kind: &str, name: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            controller: Some(controller),
            block_owner_deletion: None,
        }
    }

    #[test]
    fn only_the_controller_owner_of_the_kind_counts() {
        let replica_sets = OwnerKind::of::<ReplicaSet>(&(), true);
        let found = |owners| controller_owner::<Pod>(&pod(owners), &replica_sets);
        assert_eq!(
            found(vec![owner("ReplicaSet", "rs", true)])
                .unwrap()
                .as_str(),
            "shop/rs"
        );
        assert!(
            found(vec![owner("ReplicaSet", "rs", false)]).is_none(),
            "not the controller"
        );
        assert!(
            found(vec![owner("StatefulSet", "ss", true)]).is_none(),
            "another kind"
        );
        assert!(found(vec![]).is_none(), "an orphan");
        let mut older = owner("ReplicaSet", "rs", true);
        older.api_version = "apps/v1beta2".into();
        assert_eq!(
            found(vec![older]).map(|k| k.to_string()).as_deref(),
            Some("shop/rs"),
            "another version of the same group and kind"
        );
        let mut elsewhere = owner("ReplicaSet", "rs", true);
        elsewhere.api_version = "example.com/v1".into();
        assert!(
            found(vec![elsewhere]).is_none(),
            "another group's ReplicaSet"
        );
    }
}
