//! Writes made off every reconcile's task (a task a reconcile spawned without
//! [`carry_writes`](super::carry_writes), a webhook, the application's own setup) through a
//! manager's client: each is given to the keys it concerns, as its watch event would be —
//! the object's own key where it is of a controller's kind, its controlling owner's key
//! where that owner is — so the next reconcile of those keys waits for it as for its own.

use std::sync::{Arc, Weak, atomic::Ordering};

use kube_informer::ObjectKey;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use super::{
    OwnWrites,
    written::{AsWritten, GroupKind, Written},
};

/// The controllers of one manager, for the writes its client makes off their tasks.
#[derive(Default)]
pub(crate) struct Attribution {
    controllers: Mutex<Vec<Weak<OwnWrites>>>,
}

impl Attribution {
    /// Gives later writes to `own_writes`' keys too (held weakly: a controller dropped
    /// unrun is forgotten).
    pub(crate) fn add(&self, own_writes: &Arc<OwnWrites>) {
        let mut controllers = self.controllers.lock();
        controllers.retain(|c| c.strong_count() > 0);
        controllers.push(Arc::downgrade(own_writes));
    }

    /// Gives `written` to every controller it concerns.
    pub(super) fn attribute(&self, written: &Written) {
        let controllers: Vec<Arc<OwnWrites>> = self
            .controllers
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for controller in controllers {
            controller.attribute(written);
        }
    }
}

/// Its controller's workers run while this lives (see [`OwnWrites::reconciling`]).
pub(crate) struct Reconciling(Arc<OwnWrites>);

impl Drop for Reconciling {
    fn drop(&mut self) {
        self.0.reconciling.store(false, Ordering::SeqCst);
    }
}

/// A controller's own kind, as writes off its tasks are matched to its keys.
pub(super) struct Primary {
    pub(super) kind: GroupKind,
    pub(super) namespaced: bool,
}

impl OwnWrites {
    /// Sets the controller's own kind.
    pub(crate) fn primary(&self, kind: GroupKind, namespaced: bool) {
        *self.primary.write() = Some(Primary { kind, namespaced });
    }

    /// While the returned guard lives, the controller's workers run, and writes made off
    /// its reconciles' tasks are kept for its keys (a standby's controllers, which never
    /// reconcile, would keep them for nothing).
    pub(crate) fn reconciling(self: &Arc<Self>) -> Reconciling {
        self.reconciling.store(true, Ordering::SeqCst);
        Reconciling(Arc::clone(self))
    }

    /// Keeps `written`, made off every reconcile's task, for the next reconcile of each key
    /// it concerns: the object's own key (of this controller's kind), and its controlling
    /// owner's (of this controller's kind).
    fn attribute(&self, written: &Written) {
        if !self.reconciling.load(Ordering::SeqCst) {
            return;
        }
        let keys = keys_of(&self.primary, written, self.kind_written(written));
        for key in keys {
            self.keep(&key, vec![written.clone()]);
        }
    }
}

/// The keys of a controller of `primary` that `written` (of `kind`) concerns.
fn keys_of(
    primary: &RwLock<Option<Primary>>,
    written: &Written,
    kind: Option<GroupKind>,
) -> Vec<ObjectKey> {
    let primary = primary.read();
    let Some(primary) = primary.as_ref() else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    if kind.as_ref() == Some(&primary.kind) {
        keys.push(written.key.clone());
    }
    let Some(AsWritten::Json(object)) = &written.object else {
        return keys;
    };
    let owners = object["metadata"]["ownerReferences"].as_array();
    for owner in owners.into_iter().flatten() {
        let controls = owner["controller"] == Value::Bool(true);
        let (Some(api_version), Some(owner_kind), Some(name)) = (
            owner["apiVersion"].as_str(),
            owner["kind"].as_str(),
            owner["name"].as_str(),
        ) else {
            continue;
        };
        if controls && GroupKind::of(api_version, owner_kind) == primary.kind {
            let namespace = primary
                .namespaced
                .then_some(written.namespace.as_deref())
                .flatten();
            keys.push(ObjectKey::new(namespace, name));
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use std::any::TypeId;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// The write the API server answered with `object`.
    fn answered(object: Value) -> Written {
        let meta = ObjectMeta::deserialize(&object["metadata"]).unwrap();
        let kind = GroupKind::of(
            object["apiVersion"].as_str().unwrap(),
            object["kind"].as_str().unwrap(),
        );
        let mut written = Written::new(&meta, Some(kind), TypeId::of::<Value>(), false).unwrap();
        written.object = Some(AsWritten::Json(Arc::new(object)));
        written
    }

    fn keys(primary: (&str, &str, bool), written: &Written) -> Vec<String> {
        let primary = RwLock::new(Some(Primary {
            kind: GroupKind::of(primary.0, primary.1),
            namespaced: primary.2,
        }));
        keys_of(&primary, written, written.kind.clone())
            .iter()
            .map(|k| k.as_str().to_owned())
            .collect()
    }

    #[test]
    fn a_write_concerns_its_own_key_and_its_controlling_owners() {
        let child = answered(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "web-tls", "namespace": "shop", "resourceVersion": "7",
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u1",
             "controller": true},
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "other", "uid": "u2"},
        ]}}));
        // A Deployment controller: the owner that controls it, not the other one.
        assert_eq!(keys(("apps/v1", "Deployment", true), &child), ["shop/web"]);
        // Another version of the owner's kind is the same kind.
        assert_eq!(
            keys(("apps/v1beta1", "Deployment", true), &child),
            ["shop/web"]
        );
        // A Secret controller: the Secret itself.
        assert_eq!(keys(("v1", "Secret", true), &child), ["shop/web-tls"]);
        // A ConfigMap controller: nothing.
        assert!(keys(("v1", "ConfigMap", true), &child).is_empty());
        // A cluster-scoped owner's key has no namespace.
        let owned = answered(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "settings", "namespace": "shop", "resourceVersion": "8",
            "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Tenant",
                                 "name": "acme", "uid": "u3", "controller": true}]}}),
        );
        assert_eq!(keys(("example.com/v1", "Tenant", false), &owned), ["acme"]);
    }

    #[test]
    fn a_controller_without_a_kind_yet_or_dropped_is_given_nothing() {
        let written = answered(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "a", "namespace": "shop", "resourceVersion": "1"}}));
        assert!(keys_of(&RwLock::new(None), &written, written.kind.clone()).is_empty());
        let attribution = Attribution::default();
        let own_writes = Arc::new(OwnWrites::new(Some(std::time::Duration::from_secs(5))));
        own_writes.primary(GroupKind::of("v1", "Secret"), true);
        attribution.add(&own_writes);
        // Its workers do not run (a standby's controller): given nothing.
        attribution.attribute(&written);
        assert!(own_writes.pending.lock().by_key.is_empty());
        drop(own_writes);
        attribution.attribute(&written); // nothing to give it to, and no panic
        attribution.add(&Arc::new(OwnWrites::new(None)));
        assert_eq!(
            attribution.controllers.lock().len(),
            1,
            "the dropped one forgotten"
        );
    }
}
