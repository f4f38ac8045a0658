//! Writes made off every reconcile's task (a task a reconcile spawned without
//! [`carry_writes`](super::carry_writes), a webhook, the application's own setup) through a
//! manager's client: each is given to the keys it concerns, as its watch event would be —
//! the object's own key where it is of a controller's kind, its controlling owner's key
//! where that owner is — so the next reconcile of those keys waits for it as for its own.

use std::sync::{Arc, Weak, atomic::Ordering};

use kube_informer::ObjectKey;
use parking_lot::Mutex;

use super::{
    OwnWrites,
    written::{GroupKind, Written},
};
use crate::controller::handlers::OwnerKind;

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

impl OwnWrites {
    /// Sets the controller's own kind (the one its `owns` relations map children to).
    pub(crate) fn primary(&self, kind: Arc<OwnerKind>) {
        *self.primary.write() = Some(kind);
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
        let Some(primary) = self.primary.read().clone() else {
            return;
        };
        let kind = self.kind_written(written);
        for key in keys_of(&primary, written, kind.as_ref()) {
            self.keep(&key, vec![written.clone()]);
        }
    }
}

/// The keys of a controller of `primary` that `written` (of `kind`) concerns: its own, and
/// its controller owner's, as an `owns` relation maps the object's events.
fn keys_of(primary: &OwnerKind, written: &Written, kind: Option<&GroupKind>) -> Vec<ObjectKey> {
    let own = kind
        .filter(|k| primary.is(&k.group, &k.kind))
        .map(|_| written.key.clone());
    let owner = primary.key_among(&written.controllers, written.namespace.as_deref());
    own.into_iter().chain(owner).collect()
}

#[cfg(test)]
mod tests {
    use std::any::TypeId;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::*;

    /// The write the API server answered with `object`.
    fn answered(object: Value) -> Written {
        let meta = ObjectMeta::deserialize(&object["metadata"]).unwrap();
        let kind = GroupKind::of(
            object["apiVersion"].as_str().unwrap(),
            object["kind"].as_str().unwrap(),
        );
        Written::new(&meta, Some(kind), TypeId::of::<Value>(), false).unwrap()
    }

    /// A controller's own kind: `kind` of `api_version`.
    fn owner_kind(api_version: &str, kind: &str, namespaced: bool) -> OwnerKind {
        let GroupKind { group, kind } = GroupKind::of(api_version, kind);
        OwnerKind {
            kind,
            group,
            namespaced,
        }
    }

    fn keys(primary: (&str, &str, bool), written: &Written) -> Vec<String> {
        let primary = owner_kind(primary.0, primary.1, primary.2);
        keys_of(&primary, written, written.kind.as_ref())
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
        let attribution = Attribution::default();
        let own_writes = Arc::new(OwnWrites::new(Some(std::time::Duration::from_secs(5))));
        attribution.add(&own_writes);
        // Its kind not set yet: given nothing.
        let reconciling = own_writes.reconciling();
        attribution.attribute(&written);
        assert!(own_writes.pending.lock().by_key.is_empty());
        drop(reconciling);
        own_writes.primary(Arc::new(owner_kind("v1", "Secret", true)));
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
