//! [`Cached`]: what a reconcile is given — the object from the cache, or word that it is
//! gone.

use std::sync::Arc;

use kube_informer::ObjectKey;

/// The object a reconcile is for, as the cache has it now: present, or gone (deleted, or
/// never created). An enum, not an `Option`: the deleted case cannot be forgotten, and it
/// still carries the key (for cleaning up what the object owned outside Kubernetes).
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kube_informer_runtime::controller::Cached;
///
/// fn describe(cached: &Cached<Deployment>) -> String {
///     match cached {
///         Cached::Present(deploy) => format!("{:?} wants {:?}", deploy.metadata.name, deploy.spec.as_ref().and_then(|s| s.replicas)),
///         Cached::Gone(key) => format!("{key} is gone"),
///     }
/// }
/// # let _ = describe;
/// ```
#[derive(Debug)]
pub enum Cached<K> {
    /// The object, as cached (shared, never copied).
    Present(Arc<K>),
    /// No such object in the cache: it was deleted (or never existed).
    Gone(ObjectKey),
}

impl<K> Clone for Cached<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Present(obj) => Self::Present(obj.clone()),
            Self::Gone(key) => Self::Gone(key.clone()),
        }
    }
}

impl<K> Cached<K> {
    /// The object, if present.
    pub fn present(&self) -> Option<&Arc<K>> {
        match self {
            Self::Present(obj) => Some(obj),
            Self::Gone(_) => None,
        }
    }

    /// Whether the object is gone.
    pub fn is_gone(&self) -> bool {
        matches!(self, Self::Gone(_))
    }
}
