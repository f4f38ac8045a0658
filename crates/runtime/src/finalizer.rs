//! Finalizers: clean up what an object owns outside Kubernetes before it goes away.
//!
//! [`finalizer`] wraps a reconcile: the finalizer is added before the first
//! [`Event::Apply`], and once the object is being deleted, [`Event::Cleanup`] runs and the
//! finalizer is removed after it succeeds. Both writes are merge patches carrying the
//! object's `resourceVersion`, so a concurrent change gets a 409 Conflict instead of being
//! overwritten (the reconcile is retried with the fresh object). Every step is idempotent:
//! adding a finalizer that is there, or removing one that is not, writes nothing, and a
//! cleanup that failed runs again on the retry (so it must be idempotent too).

use std::{future::Future, sync::Arc};

use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use kube_informer::controller::Action;
use serde::de::DeserializeOwned;
use serde_json::json;

/// What the wrapped reconcile is asked to do.
#[derive(Debug)]
pub enum Event<K> {
    /// Bring the world in line with the object (it carries the finalizer).
    Apply(Arc<K>),
    /// The object is being deleted: release what it owns outside Kubernetes.
    Cleanup(Arc<K>),
}

/// Why [`finalizer`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FinalizerError<E> {
    /// The apply or cleanup failed.
    #[error("{0}")]
    Reconcile(E),
    /// Adding the finalizer failed (a 409 means the object changed meanwhile: retry).
    #[error("adding finalizer {finalizer:?} failed: {source}")]
    Add {
        /// The finalizer.
        finalizer: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Removing the finalizer failed (a 409 means the object changed meanwhile: retry).
    #[error("removing finalizer {finalizer:?} failed: {source}")]
    Remove {
        /// The finalizer.
        finalizer: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The object has no name (it cannot be patched).
    #[error("the object has no name")]
    Unnamed,
}

impl<E> FinalizerError<E> {
    /// Whether this is a 409 Conflict: the object changed meanwhile, and a retry with the
    /// fresh object will do.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Add { source: kube::Error::Api(s), .. } | Self::Remove { source: kube::Error::Api(s), .. } if s.code == 409)
    }
}

/// Runs `reconcile` for `obj` under the finalizer `name` (e.g. `"example.com/cleanup"`),
/// patching through `api` (an `Api` for the object's namespace, or cluster-wide).
///
/// - Not being deleted, no finalizer yet: adds it, then [`Event::Apply`] with the patched
///   object.
/// - Not being deleted, finalizer present: [`Event::Apply`].
/// - Being deleted, finalizer present: [`Event::Cleanup`], then removes the finalizer (the
///   API server then completes the delete).
/// - Being deleted, finalizer absent: nothing to do ([`Action::Done`]).
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::Api;
/// use kube_informer::controller::Action;
/// use kube_informer_runtime::finalizer::{finalizer, Event, FinalizerError};
///
/// async fn reconcile(cm: Arc<ConfigMap>, api: Api<ConfigMap>) -> Result<Action, FinalizerError<kube::Error>> {
///     finalizer(&api, "example.com/backup", cm, |event| async move {
///         match event {
///             Event::Apply(cm) => { /* back it up */ let _ = cm; Ok(Action::Done) }
///             Event::Cleanup(cm) => { /* delete the backup */ let _ = cm; Ok(Action::Done) }
///         }
///     })
///     .await
/// }
/// ```
pub async fn finalizer<K, E, F, Fut>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    reconcile: F,
) -> Result<Action, FinalizerError<E>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    F: FnOnce(Event<K>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
{
    let object_name = obj.meta().name.clone().ok_or(FinalizerError::Unnamed)?;
    let has = obj.finalizers().iter().any(|f| f == name);
    let deleting = obj.meta().deletion_timestamp.is_some();
    match (deleting, has) {
        (true, false) => Ok(Action::Done),
        (false, true) => reconcile(Event::Apply(obj))
            .await
            .map_err(FinalizerError::Reconcile),
        (false, false) => {
            let mut finalizers = obj.finalizers().to_vec();
            finalizers.push(name.to_owned());
            let patched = patch_finalizers(api, &object_name, obj.as_ref(), finalizers)
                .await
                .map_err(|source| FinalizerError::Add {
                    finalizer: name.to_owned(),
                    source,
                })?;
            let event = Event::Apply(Arc::new(patched));
            reconcile(event).await.map_err(FinalizerError::Reconcile)
        }
        (true, true) => {
            let action = reconcile(Event::Cleanup(obj.clone()))
                .await
                .map_err(FinalizerError::Reconcile)?;
            let remaining: Vec<String> = obj
                .finalizers()
                .iter()
                .filter(|f| *f != name)
                .cloned()
                .collect();
            patch_finalizers(api, &object_name, obj.as_ref(), remaining)
                .await
                .map_err(|source| FinalizerError::Remove {
                    finalizer: name.to_owned(),
                    source,
                })?;
            Ok(action)
        }
    }
}

/// Sets the finalizers to `finalizers`, if the object is still at its resourceVersion.
async fn patch_finalizers<K>(
    api: &Api<K>,
    name: &str,
    obj: &K,
    finalizers: Vec<String>,
) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": obj.meta().resource_version,
        }
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}
