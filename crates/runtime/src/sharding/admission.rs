//! Labelling objects as they are created, from a mutating admission webhook: the new
//! object is stored already labelled for its shard, so its shard sees it with its first
//! event instead of a moment later, after the sharder's PATCH.

use kube::{
    api::{ApiResource, DynamicObject, GroupVersionKind},
    core::admission::{AdmissionRequest, AdmissionResponse, Operation},
};
use serde_json::json;

use super::{Placement, Ring, ShardKey, shard_label};

/// The answer to a mutating admission request for `ring`: a create of an object that has no
/// shard label yet gets a JSON patch adding the label of its shard on `ring` (its own key,
/// or its controller's for [`Placement::Controller`]). Everything else is allowed
/// unchanged, and so is a create this cannot place: an empty ring, an object named by
/// `generateName` (the API server names it after admission) or a child without a
/// controller. The sharder labels those a moment later, as it does without a webhook. It
/// never refuses a request, so register the webhook with `failurePolicy: Ignore`: an
/// outage of it only delays the label.
///
/// Labelling at creation is safe with any ring, even an outdated one: no replica holds a new
/// object yet. If the shard it names is dead, the sharder moves the object at once.
///
/// The library gives the function; serving it over HTTPS is the user's choice (any server
/// that reads an `AdmissionReview` and writes one back). Keep the ring current with
/// [`LiveShards::observe`](super::LiveShards::observe), once a second as the sharder does.
///
/// ```
/// use kube::core::admission::{AdmissionResponse, AdmissionReview};
/// use kube::api::DynamicObject;
/// use kube_informer_runtime::sharding::{Placement, Ring, label_at_creation};
///
/// let review: AdmissionReview<DynamicObject> = serde_json::from_value(serde_json::json!({
///     "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
///     "request": {
///         "uid": "1", "operation": "CREATE", "name": "web", "namespace": "shop",
///         "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
///         "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
///         "userInfo": {},
///         "object": {"apiVersion": "apps/v1", "kind": "Deployment",
///                    "metadata": {"name": "web", "namespace": "shop"}}
///     }
/// })).unwrap();
/// let request = review.try_into().unwrap();
/// let ring = Ring::new(["replica-0", "replica-1"]);
/// let response: AdmissionResponse = label_at_creation("web", &ring, Placement::Own, &request);
/// assert!(response.allowed && response.patch.is_some());
/// let answer = response.into_review(); // serialize this back to the API server
/// # let _ = answer;
/// ```
pub fn label_at_creation(
    ring_name: &str,
    ring: &Ring,
    placement: Placement,
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    let allowed = AdmissionResponse::from(request);
    if request.operation != Operation::Create {
        return allowed;
    }
    let Some(object) = &request.object else {
        return allowed;
    };
    let label = shard_label(ring_name);
    let labels = object.metadata.labels.as_ref();
    if labels.is_some_and(|l| l.contains_key(&label)) {
        return allowed;
    }
    let mut object = object.clone();
    // The API server fills the namespace in after admission for some clients' requests.
    if object.metadata.namespace.is_none() {
        object.metadata.namespace = request.namespace.clone();
    }
    let key = match placement {
        Placement::Own => {
            let kind = &request.kind;
            let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, &request.resource.resource);
            ShardKey::of(&object, &resource)
        }
        Placement::Controller => ShardKey::of_controller(&object.metadata),
    };
    let Some(shard) = key.and_then(|key| ring.shard_for(key.as_str()).map(str::to_owned)) else {
        return allowed;
    };
    let operation = match labels {
        // `/` in a label key is `~1` in a JSON pointer.
        Some(_) => {
            json!({"op": "add", "path": format!("/metadata/labels/{}", label.replace('~', "~0").replace('/', "~1")), "value": shard})
        }
        None => json!({"op": "add", "path": "/metadata/labels", "value": {label: shard}}),
    };
    let patch: json_patch::Patch =
        serde_json::from_value(json!([operation])).expect("a JSON patch of one add");
    match allowed.clone().with_patch(patch) {
        Ok(labelled) => labelled,
        Err(error) => {
            tracing::warn!(%error, "cannot write the shard label's patch; allowed unlabelled");
            allowed
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::core::admission::AdmissionReview;

    use super::*;

    fn request(operation: &str, object: serde_json::Value) -> AdmissionRequest<DynamicObject> {
        let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-1", "operation": operation, "name": "", "namespace": "shop",
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "userInfo": {}, "object": object
            }
        }))
        .unwrap();
        review.try_into().unwrap()
    }

    fn cm(metadata: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})
    }

    /// The object as the API server stores it after applying the response's patch.
    fn patched(response: &AdmissionResponse, object: serde_json::Value) -> serde_json::Value {
        let mut object = object;
        let patch: json_patch::Patch =
            serde_json::from_slice(response.patch.as_ref().expect("a patch")).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
        object
    }

    #[test]
    fn a_new_object_gets_the_label_of_its_shard_on_the_ring() {
        let ring = Ring::new(["a", "b", "c"]);
        let label = shard_label("web");
        for (name, labels) in [("cm-1", None), ("cm-2", Some(json!({"app": "x/y"})))] {
            let mut metadata = json!({"name": name});
            if let Some(labels) = labels {
                metadata["labels"] = labels;
            }
            let object = cm(metadata);
            let response = label_at_creation(
                "web",
                &ring,
                Placement::Own,
                &request("CREATE", object.clone()),
            );
            assert!(response.allowed);
            let stored = patched(&response, object);
            let want = ring.shard_for(&format!("/ConfigMap/shop/{name}")).unwrap();
            assert_eq!(stored["metadata"]["labels"][&label], want, "{name}");
            if name == "cm-2" {
                assert_eq!(
                    stored["metadata"]["labels"]["app"], "x/y",
                    "other labels kept"
                );
            }
        }
    }

    #[test]
    fn a_child_follows_its_controller_and_what_cannot_be_placed_passes_unchanged() {
        let ring = Ring::new(["a", "b", "c"]);
        let owner = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                            "uid": "d", "controller": true}]);
        let child = cm(json!({"name": "web-conf", "ownerReferences": owner}));
        let response = label_at_creation(
            "web",
            &ring,
            Placement::Controller,
            &request("CREATE", child.clone()),
        );
        let stored = patched(&response, child);
        let want = ring.shard_for("apps/Deployment/shop/web").unwrap();
        assert_eq!(stored["metadata"]["labels"][shard_label("web")], want);

        let unchanged = |response: AdmissionResponse| response.allowed && response.patch.is_none();
        let labelled = cm(json!({"name": "x", "labels": {shard_label("web"): "b"}}));
        let cases = [
            (
                "an update",
                request("UPDATE", cm(json!({"name": "x"}))),
                &ring,
                Placement::Own,
            ),
            (
                "already labelled",
                request("CREATE", labelled),
                &ring,
                Placement::Own,
            ),
            (
                "generateName",
                request("CREATE", cm(json!({"generateName": "x-"}))),
                &ring,
                Placement::Own,
            ),
            (
                "no controller",
                request("CREATE", cm(json!({"name": "x"}))),
                &ring,
                Placement::Controller,
            ),
        ];
        for (what, request, ring, placement) in cases {
            assert!(
                unchanged(label_at_creation("web", ring, placement, &request)),
                "{what}"
            );
        }
        let empty = Ring::default();
        let create = request("CREATE", cm(json!({"name": "x"})));
        assert!(
            unchanged(label_at_creation("web", &empty, Placement::Own, &create)),
            "no shard alive"
        );
    }
}
