//! Ready-made [`Condition`](super::Condition)s: kube-runtime's, and a Deployment's rollout.

use k8s_openapi::{
    api::{apps::v1::Deployment, batch::v1::Job, core::v1::Pod},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::Resource;

/// The object is gone: absent from the cache, or (with `uid`) replaced by another object of
/// the same name.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer_runtime::wait::{Condition, conditions::is_deleted};
///
/// let mut cm = ConfigMap::default();
/// cm.metadata.uid = Some("first".into());
/// let gone = is_deleted(Some("first".into()));
/// assert!(!gone.matches(Some(&cm)));
/// assert!(gone.matches(None));
/// cm.metadata.uid = Some("second".into()); // deleted and made again
/// assert!(gone.matches(Some(&cm)));
/// ```
pub fn is_deleted<K: Resource>(uid: Option<String>) -> impl Fn(Option<&K>) -> bool {
    move |object| match (object, &uid) {
        (None, _) => true,
        (Some(object), Some(uid)) => object.meta().uid.as_ref() != Some(uid),
        (Some(_), None) => false,
    }
}

/// The Pod's phase is `Running`.
pub fn is_pod_running() -> impl Fn(Option<&Pod>) -> bool {
    |pod| {
        pod.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Running")
    }
}

/// The Job has the condition `Complete` set to `True`.
pub fn is_job_completed() -> impl Fn(Option<&Job>) -> bool {
    |job| {
        job.and_then(|j| j.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True")
            })
    }
}

/// The CustomResourceDefinition has the condition `Established` set to `True`: its API is
/// served.
pub fn is_crd_established() -> impl Fn(Option<&CustomResourceDefinition>) -> bool {
    |crd| {
        crd.and_then(|c| c.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            })
    }
}

/// The Deployment's rollout is done, as `kubectl rollout status` decides: its controller
/// saw the latest spec, and every wanted replica is updated and available, with no old one
/// left.
pub fn is_deployment_complete() -> impl Fn(Option<&Deployment>) -> bool {
    |deployment| {
        let Some(d) = deployment else { return false };
        let Some(status) = &d.status else {
            return false;
        };
        let wanted = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let seen = status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0);
        let updated = status.updated_replicas.unwrap_or(0);
        seen && updated == wanted
            && status.replicas.unwrap_or(0) == updated
            && status.available_replicas.unwrap_or(0) == updated
    }
}
