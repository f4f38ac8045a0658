//! Where an object stands for one shard ([`Standing`]), and a shard letting go of a
//! drained object ([`acknowledge_drain`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    Resource,
    api::{Api, ApiResource, DynamicObject, Patch, PatchParams},
};

use super::{drain_label, holder_annotation, shard_label};

/// Where an object stands for one shard of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Labelled for this shard and held by it: reconcile it.
    Mine,
    /// Labelled for and held by this shard, which is asked to let go of it: reconcile it
    /// no more and
    /// [`acknowledge_drain`] once no reconcile of it runs.
    Draining,
    /// Not this shard's (another's, or none yet): leave it alone. An object that an
    /// informer reports deleted with this standing has *moved* away, it was not deleted.
    Elsewhere,
}

/// Where `meta`'s object stands for `shard` of `ring`.
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use kube_informer_runtime::sharding::{Standing, holder_annotation, shard_label, standing};
///
/// let mut meta = ObjectMeta::default();
/// assert_eq!(standing(&meta, "web", "a"), Standing::Elsewhere);
/// meta.labels = Some([(shard_label("web"), "a".to_owned())].into());
/// assert_eq!(standing(&meta, "web", "a"), Standing::Elsewhere, "labelled, not held yet");
/// meta.annotations = Some([(holder_annotation("web"), "a".to_owned())].into());
/// assert_eq!(standing(&meta, "web", "a"), Standing::Mine);
/// assert_eq!(standing(&meta, "web", "b"), Standing::Elsewhere);
/// // Someone else moves the label to b: b does not take it while a holds it.
/// meta.labels = Some([(shard_label("web"), "b".to_owned())].into());
/// assert_eq!(standing(&meta, "web", "b"), Standing::Elsewhere);
/// ```
pub fn standing(meta: &ObjectMeta, ring: &str, shard: &str) -> Standing {
    let labels = meta.labels.as_ref();
    let holder = meta.annotations.as_ref();
    let holder = holder.and_then(|a| a.get(&holder_annotation(ring)));
    match labels.and_then(|l| l.get(&shard_label(ring))) {
        Some(owner) if owner == shard && holder.is_some_and(|h| h == shard) => {
            if labels.is_some_and(|l| l.contains_key(&drain_label(ring))) {
                Standing::Draining
            } else {
                Standing::Mine
            }
        }
        _ => Standing::Elsewhere,
    }
}

/// The old shard's half of a handover: removes the shard and drain labels (and the holder
/// annotation) of `object`
/// (guarded by its resourceVersion), which lets the sharder assign it elsewhere. Call it
/// only once no reconcile of the object runs on this shard. `Ok(false)`: the object
/// changed or went away meanwhile (look again when it comes back).
pub async fn acknowledge_drain<K: Resource>(
    client: &kube::Client,
    dynamic_type: &K::DynamicType,
    ring: &str,
    object: &K,
) -> Result<bool, kube::Error> {
    let meta = object.meta();
    let resource = ApiResource::erase::<K>(dynamic_type);
    let api: Api<DynamicObject> = match &meta.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": meta.resource_version,
            "labels": { shard_label(ring): null, drain_label(ring): null },
            "annotations": { holder_annotation(ring): null },
        }
    });
    let name = meta.name.as_deref().unwrap_or_default();
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::debug!(%ring, %name, "let go of a drained object");
            Ok(true)
        }
        Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => Ok(false),
        Err(error) => Err(error),
    }
}
