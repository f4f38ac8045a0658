//! Deletes: preconditions, finalizers and grace periods defer them; a namespace goes
//! `Terminating` and is emptied and removed as kube-controller-manager's namespace
//! controller would do it (a bare kube-apiserver, as in envtest, leaves it `Terminating`).

use std::{
    sync::{Arc, Weak},
    time::{Duration, SystemTime},
};

use serde_json::json;

use super::{DeleteOptions, Deleted, current, stamped};
use crate::{
    Inner,
    registry::{Gvr, ResourceType},
    status::{ApiError, delete_success},
    storage::{EventType, ObjKey, Storage, StoredObject},
    util::rfc3339,
};

fn namespaces() -> Gvr {
    Gvr::core("namespaces")
}

/// Setting `deletionTimestamp` for the first time bumps a tracked `generation` (`> 0`;
/// objects without one keep none), as the real server does: `markAsDeleting` in
/// k8s.io/apiserver's registry store for finalizer-held objects, `rest.BeforeDelete` for
/// graceful deletes. Callers only get here when the object was not already terminating, so
/// a second DELETE never bumps it again.
fn bump_generation(value: &mut serde_json::Value) {
    let generation = value["metadata"]["generation"].as_i64().unwrap_or(0);
    if generation > 0 {
        value["metadata"]["generation"] = json!(generation + 1);
    }
}

impl Inner {
    pub(crate) fn delete(
        self: &Arc<Self>,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let mut storage = self.storage.lock();
        let (ty, key, current) = current(&storage, gvr, namespace, name)?;
        let precondition_failed = options
            .precondition_uid
            .as_ref()
            .is_some_and(|uid| *uid != current.meta.uid)
            || options
                .precondition_resource_version
                .as_ref()
                .is_some_and(|rv| *rv != current.resource_version.to_string());
        if precondition_failed {
            return Err(ApiError::conflict(gvr, name));
        }
        if *gvr == namespaces() {
            return Ok(self.terminate_namespace(&mut storage, &ty, &current));
        }
        Ok(self.delete_in(&mut storage, gvr, &ty, key, &current, options))
    }

    /// Deletes `current` (already checked) inside the storage lock.
    fn delete_in(
        self: &Arc<Self>,
        storage: &mut Storage,
        gvr: &Gvr,
        ty: &ResourceType,
        key: ObjKey,
        current: &Arc<StoredObject>,
        options: &DeleteOptions,
    ) -> Deleted {
        let grace = options.grace_period_seconds.unwrap_or(0);
        let revision = storage.next_revision();
        let mut value = stamped(current, ty, revision);
        if current.meta.has_finalizers || grace > 0 {
            if current.meta.deleting {
                return Deleted::Deferred(current.clone()); // already on its way out
            }
            let at = SystemTime::now() + Duration::from_secs(grace);
            value["metadata"]["deletionTimestamp"] = rfc3339(at).into();
            value["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            bump_generation(&mut value);
            let object = Arc::new(StoredObject::new(value, revision));
            storage.commit(gvr, EventType::Modified, object.clone());
            if grace > 0 {
                self.finish_after_grace(gvr.clone(), key, Duration::from_secs(grace));
            }
            return Deleted::Deferred(object);
        }
        let object = Arc::new(StoredObject::new(value, revision));
        let uid = object.meta.uid.clone();
        storage.commit(gvr, EventType::Deleted, object.clone());
        self.finish_namespace_if_empty(storage, &object);
        Deleted::Now(delete_success(&gvr.resource, &key.name, &uid))
    }

    /// Marks the namespace `Terminating`, deletes everything in it (objects with
    /// finalizers stay until those are removed) and removes it once it is empty.
    fn terminate_namespace(
        self: &Arc<Self>,
        storage: &mut Storage,
        ty: &ResourceType,
        current: &Arc<StoredObject>,
    ) -> Deleted {
        if current.meta.deleting {
            return Deleted::Deferred(current.clone());
        }
        let name = current.meta.name.clone();
        let revision = storage.next_revision();
        let mut value = stamped(current, ty, revision);
        value["metadata"]["deletionTimestamp"] = rfc3339(SystemTime::now()).into();
        value["status"]["phase"] = json!("Terminating");
        let terminating = Arc::new(StoredObject::new(value, revision));
        storage.commit(&namespaces(), EventType::Modified, terminating.clone());

        let contents: Vec<(Gvr, Arc<ResourceType>, ObjKey, Arc<StoredObject>)> = storage
            .types()
            .filter(|t| t.namespaced)
            .cloned()
            .collect::<Vec<_>>()
            .into_iter()
            .flat_map(|t| {
                let store = storage.resource(&t.gvr).expect("registered");
                let at = storage.revision();
                store
                    .scan(at, Some(&name), None, |_| true)
                    .map(|(k, o)| (t.gvr.clone(), t.clone(), k.clone(), o.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (gvr, ty, key, object) in contents {
            self.delete_in(storage, &gvr, &ty, key, &object, &DeleteOptions::default());
        }
        self.finish_namespace_if_empty(storage, &terminating);
        Deleted::Deferred(terminating)
    }

    /// After `gone` was deleted: when it was the last object of a terminating namespace
    /// (or the namespace itself was just emptied), the namespace goes too.
    pub(super) fn finish_namespace_if_empty(&self, storage: &mut Storage, gone: &StoredObject) {
        let Some(ns) = gone
            .meta
            .namespace
            .clone()
            .or_else(|| gone.meta.deleting.then(|| gone.meta.name.clone()))
        else {
            return;
        };
        let key = ObjKey::new(None, &ns);
        let Some(namespace) = storage
            .resource(&namespaces())
            .and_then(|r| r.get(&key))
            .cloned()
        else {
            return;
        };
        if !namespace.meta.deleting {
            return;
        }
        let at = storage.revision();
        let empty = storage.types().filter(|t| t.namespaced).all(|t| {
            storage
                .resource(&t.gvr)
                .is_none_or(|r| r.scan(at, Some(&ns), None, |_| true).next().is_none())
        });
        if !empty {
            return;
        }
        let ty = storage
            .resource(&namespaces())
            .expect("namespaces are built in")
            .ty
            .clone();
        let revision = storage.next_revision();
        let mut value = stamped(&namespace, &ty, revision);
        value["spec"]["finalizers"] = json!([]);
        storage.commit(
            &namespaces(),
            EventType::Deleted,
            Arc::new(StoredObject::new(value, revision)),
        );
    }

    /// After a grace period, removes the object unless finalizers still hold it (the job
    /// the kubelet does for pods on a real cluster).
    fn finish_after_grace(self: &Arc<Self>, gvr: Gvr, key: ObjKey, grace: Duration) {
        let weak: Weak<Inner> = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let Some(inner) = weak.upgrade() else { return };
            let mut storage = inner.storage.lock();
            let Some(store) = storage.resource(&gvr) else {
                return;
            };
            let Some(current) = store.get(&key).cloned() else {
                return;
            };
            if !current.meta.deleting || current.meta.has_finalizers {
                return;
            }
            let ty = store.ty.clone();
            let revision = storage.next_revision();
            let value = stamped(&current, &ty, revision);
            let object = Arc::new(StoredObject::new(value, revision));
            storage.commit(&gvr, EventType::Deleted, object.clone());
            inner.finish_namespace_if_empty(&mut storage, &object);
        });
    }
}
