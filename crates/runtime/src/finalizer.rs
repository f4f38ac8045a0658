//! Finalizers: clean up what an object owns outside Kubernetes before it goes away.
//!
//! [`finalizer`] wraps a reconcile: the finalizer is added before the first
//! [`Event::Apply`], and once the object is being deleted, [`Event::Cleanup`] runs and the
//! finalizer is removed after it succeeds.
//!
//! - Adding is a merge patch carrying the object's `resourceVersion`: a concurrent change
//!   gets a 409 Conflict instead of being overwritten, and the reconcile is retried with the
//!   fresh object (nothing was done yet, so retrying is free).
//! - Removing happens only after a cleanup that returned [`Action::Done`], and **a cleanup
//!   that succeeded never runs again because of the removal**: the removal is a JSON patch
//!   that tests that this finalizer is still at its index and removes it there, so an
//!   unrelated concurrent write (a label, a status, another controller's annotation) does
//!   not make it fail; if it fails anyway (the finalizer list itself changed), the object
//!   is read again and only the removal is retried. The removal also tests the object's
//!   UID: an object deleted and made again under the same name meanwhile keeps its
//!   finalizer (its own cleanup has not run).
//! - Both patches are recorded as the reconcile's own writes
//!   ([`wrote`](crate::controller::wrote)): inside a [`Controller`](crate::controller::Controller)'s
//!   reconcile, the next reconcile of the key reads a cache that has seen them, so a
//!   concurrent write that queues the key again cannot make the cleanup run twice from a
//!   stale copy.
//! - A cleanup that failed, or that asked to be looked at again ([`Action::Retry`],
//!   [`Action::RequeueAfter`]), keeps the finalizer and runs again later: cleanups must be
//!   idempotent.

use std::{future::Future, sync::Arc};

use crate::controller::Action;
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
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
/// use kube_informer_runtime::controller::Action;
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
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
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
            crate::controller::wrote(&patched);
            let event = Event::Apply(Arc::new(patched));
            reconcile(event).await.map_err(FinalizerError::Reconcile)
        }
        (true, true) => {
            let action = reconcile(Event::Cleanup(obj.clone()))
                .await
                .map_err(FinalizerError::Reconcile)?;
            if action != Action::Done {
                return Ok(action); // not finished: keep the finalizer, look again
            }
            remove_finalizer(api, &object_name, obj.as_ref(), name)
                .await
                .map_err(|source| FinalizerError::Remove {
                    finalizer: name.to_owned(),
                    source,
                })?;
            Ok(Action::Done)
        }
    }
}

/// How often the removal is tried against a finalizer list that keeps changing.
const REMOVAL_ATTEMPTS: usize = 5;

/// Removes `finalizer` from the object, retrying only the removal (never the cleanup)
/// when the finalizer list changed meanwhile. Done when the finalizer, or the object, is
/// gone.
async fn remove_finalizer<K>(
    api: &Api<K>,
    name: &str,
    obj: &K,
    finalizer: &str,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let mut finalizers = obj.finalizers().to_vec();
    let mut attempt = 0;
    loop {
        let Some(index) = finalizers.iter().position(|f| f == finalizer) else {
            return Ok(());
        };
        let path = format!("/metadata/finalizers/{index}");
        let mut ops = vec![
            json!({"op": "test", "path": path, "value": finalizer}),
            json!({"op": "remove", "path": path}),
        ];
        // A name outlives an object: deleted and made again meanwhile, the new one's
        // finalizer is not ours to remove (its own cleanup has not run).
        if let Some(uid) = &obj.meta().uid {
            ops.insert(
                0,
                json!({"op": "test", "path": "/metadata/uid", "value": uid}),
            );
        }
        let ops = serde_json::Value::Array(ops);
        let patch: json_patch::Patch =
            serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
        let error = match api
            .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(removed) => {
                // The next reconcile of this key reads the cache from this version on: a
                // stale copy that still carries the finalizer would run the cleanup again.
                crate::controller::wrote(&removed);
                return Ok(());
            }
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(err @ kube::Error::Api(_)) if retryable(&err) => err,
            Err(err) => return Err(err),
        };
        attempt += 1;
        if attempt == REMOVAL_ATTEMPTS {
            return Err(error);
        }
        // The list changed under us (409, or 422: a test failed): read it again. Another
        // object of the name means ours is gone, with its finalizer.
        match api.get_opt(name).await? {
            Some(fresh) if fresh.meta().uid == obj.meta().uid => {
                finalizers = fresh.finalizers().to_vec();
            }
            _ => return Ok(()),
        }
    }
}

fn retryable(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 409 || status.code == 422)
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
