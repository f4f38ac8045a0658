//! What queued a key, shown on its reconcile's span as `trigger` ("updated Pod shop/web-1
//! (owns)", "listed Deployment", "retry"), and the span's `reconcile_id`.
//!
//! The first trigger since the key was last taken is kept (later ones only found it
//! queued already). Triggers are noted only while the reconcile spans are recorded by some
//! subscriber: without one, queuing a key costs nothing more.

use std::{
    collections::HashMap,
    fmt,
    hash::{BuildHasher, RandomState},
    sync::{
        Arc, LazyLock,
        atomic::{AtomicU64, Ordering},
    },
};

use kube_informer::ObjectKey;
use parking_lot::Mutex;

/// One cause of a reconcile.
#[derive(Clone, Debug)]
pub(crate) struct Trigger {
    /// `added`, `listed`, `updated`, `deleted`, `resync`, `retry`, `requeue_after`, ...
    pub(crate) event: &'static str,
    /// `primary`, `owns`, `watches`, or `""` for the controller's own requeues.
    pub(crate) relation: &'static str,
    /// The kind of the object that changed.
    pub(crate) kind: Arc<str>,
    /// The object that changed, when it is not the reconciled one.
    pub(crate) object: Option<ObjectKey>,
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.event)?;
        if !self.kind.is_empty() {
            write!(f, " {}", self.kind)?;
        }
        if let Some(object) = &self.object {
            write!(f, " {object}")?;
        }
        match self.relation {
            "" | "primary" => Ok(()),
            relation => write!(f, " ({relation})"),
        }
    }
}

impl Trigger {
    /// The controller's own requeue of the key.
    pub(crate) fn own(event: &'static str) -> Self {
        Self {
            event,
            relation: "",
            kind: Arc::from(""),
            object: None,
        }
    }
}

/// The pending trigger of each queued key.
#[derive(Default)]
pub(crate) struct Triggers(Mutex<HashMap<ObjectKey, Trigger>>);

impl Triggers {
    /// Notes why `key` is queued, unless a trigger is pending for it already.
    pub(crate) fn note(&self, key: &ObjectKey, trigger: impl FnOnce() -> Trigger) {
        if !tracing::enabled!(tracing::Level::INFO) {
            return;
        }
        let mut pending = self.0.lock();
        if !pending.contains_key(key) {
            pending.insert(key.clone(), trigger());
        }
    }

    /// What queued `key` since it was last taken.
    pub(crate) fn take(&self, key: &ObjectKey) -> Option<Trigger> {
        self.0.lock().remove(key)
    }
}

/// A reconcile's id: 16 hex digits, unique in the process and unlikely to repeat across
/// replicas (a counter, hashed with a per-process random key).
pub(crate) fn reconcile_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static KEY: LazyLock<RandomState> = LazyLock::new(RandomState::new);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}", KEY.hash_one(n))
}

/// A type's name without its paths (`Pod`, `PartialObjectMeta<Secret>`).
pub(crate) fn short_type_name<T>() -> Arc<str> {
    let full = std::any::type_name::<T>();
    let (mut short, mut path) = (String::new(), String::new());
    for c in full.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            path.push(c);
        } else {
            short.push_str(path.rsplit("::").next().unwrap_or_default());
            path.clear();
            short.push(c);
        }
    }
    short.pop(); // the space added to end the last path
    // A compact object's default storage is not part of its name: `Compact<Pod>`.
    Arc::from(short.replace(", Plain>", ">"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers_read_as_a_sentence_and_ids_differ() {
        let owned = Trigger {
            event: "updated",
            relation: "owns",
            kind: Arc::from("Pod"),
            object: Some(ObjectKey::new(Some("shop"), "web-1")),
        };
        assert_eq!(owned.to_string(), "updated Pod shop/web-1 (owns)");
        let primary = Trigger {
            event: "listed",
            relation: "primary",
            kind: Arc::from("Deployment"),
            object: None,
        };
        assert_eq!(primary.to_string(), "listed Deployment");
        assert_eq!(Trigger::own("retry").to_string(), "retry");
        let (a, b) = (reconcile_id(), reconcile_id());
        assert_eq!(a.len(), 16);
        assert_ne!(a, b);
        assert_eq!(
            &*short_type_name::<k8s_openapi::api::core::v1::Pod>(),
            "Pod"
        );
        type Pods = Vec<k8s_openapi::api::core::v1::Pod>;
        assert_eq!(&*short_type_name::<Pods>(), "Vec<Pod>");
        type Compact = kube_informer::compact::Compact<k8s_openapi::api::core::v1::Pod>;
        assert_eq!(&*short_type_name::<Compact>(), "Compact<Pod>");
    }
}
