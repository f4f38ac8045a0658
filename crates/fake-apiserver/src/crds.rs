//! CustomResourceDefinitions written through the API, as kube-apiserver's apiextensions
//! server takes them: a stored CRD serves each of its served versions as a resource type
//! (in discovery, for every verb), and deleting it deletes its objects (watchers see each
//! DELETED) and stops serving them. So `kubectl apply -f crd.yaml` and then the custom
//! resources work against the standalone server, as they do against a cluster.
//!
//! What the fake leaves out: each served version is its own store (no conversion between
//! versions: an object written in one is not read in another, and a version no longer
//! served loses its objects), schemas are not enforced, custom resources with finalizers
//! are deleted with their CRD at once (the real server waits for them), and the CRD is
//! Established at once (the real server needs a moment). A CRD whose resource a built-in
//! kind (or a type registered in code) serves already leaves that type alone.

use std::{collections::HashMap, sync::Arc};

use serde_json::{Value, json};

use crate::{
    registry::{Gvr, PrinterColumn, ResourceType},
    status::ApiError,
    storage::{EventType, Follower, Storage, StoredObject},
    util::rfc3339,
};

const KIND: &str = "CustomResourceDefinition";

/// Where CRDs are served.
pub(crate) fn gvr() -> Gvr {
    Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The real server's checks that clients meet in practice (a subset of its validation):
/// the name is `<plural>.<group>`, names and scope are set, and exactly one version is the
/// storage version. A 422 naming the field, as the real server's.
pub(crate) fn validate(crd: &Value) -> Result<(), ApiError> {
    let name = text(crd, "/metadata/name");
    let (group, plural) = (text(crd, "/spec/group"), text(crd, "/spec/names/plural"));
    let invalid = |field: &str, reason: &str, detail: String| {
        Err(ApiError::invalid(KIND, name, field, reason, &detail))
    };
    for (field, value) in [
        ("spec.group", group),
        ("spec.names.plural", plural),
        ("spec.names.kind", text(crd, "/spec/names/kind")),
    ] {
        if value.is_empty() {
            return invalid(field, "FieldValueRequired", "Required value".into());
        }
    }
    if name != format!("{plural}.{group}") {
        return invalid(
            "metadata.name",
            "FieldValueInvalid",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        );
    }
    let scope = text(crd, "/spec/scope");
    if scope != "Namespaced" && scope != "Cluster" {
        return invalid(
            "spec.scope",
            "FieldValueNotSupported",
            format!(
                "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
            ),
        );
    }
    let versions = crd["spec"]["versions"].as_array().map_or(&[][..], |v| v);
    let storage = versions.iter().filter(|v| v["storage"] == true).count();
    if storage != 1 {
        return invalid(
            "spec.versions",
            "FieldValueInvalid",
            format!(
                "Invalid value: {}: must have exactly one version marked as storage version",
                json!(versions)
            ),
        );
    }
    Ok(())
}

/// The resource type each served version of `crd` is.
/// A version's `additionalPrinterColumns`.
fn printer_columns(columns: &Value) -> Vec<PrinterColumn> {
    let field = |column: &Value, name: &str| column[name].as_str().unwrap_or_default().to_owned();
    columns
        .as_array()
        .map_or(&[][..], |c| c)
        .iter()
        .map(|column| PrinterColumn {
            name: field(column, "name"),
            type_: field(column, "type"),
            format: field(column, "format"),
            priority: column["priority"].as_i64().unwrap_or(0),
            json_path: field(column, "jsonPath"),
        })
        .collect()
}

pub(crate) fn served(crd: &Value) -> Vec<ResourceType> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = spec["versions"].as_array().map_or(&[][..], |v| v);
    versions
        .iter()
        .filter(|v| v["served"] == true)
        .map(|version| {
            let gvr = Gvr::new(
                text(spec, "/group"),
                text(version, "/name"),
                text(names, "/plural"),
            );
            let kind = text(names, "/kind");
            let mut ty = if spec["scope"] == "Cluster" {
                ResourceType::cluster_scoped(gvr, kind)
            } else {
                ResourceType::namespaced(gvr, kind)
            };
            ty.short_names = strings(&names["shortNames"]);
            ty.categories = strings(&names["categories"]);
            let subresources = &version["subresources"];
            ty.status_subresource = subresources.get("status").is_some();
            // The fake's scale reads and writes `spec.replicas`: other paths are not served.
            ty.scale_subresource =
                subresources["scale"]["specReplicasPath"].as_str() == Some(".spec.replicas");
            ty.printer_columns = printer_columns(&version["additionalPrinterColumns"]);
            ty
        })
        .collect()
}

/// The status the real server gives a new CRD once its names are accepted: Established,
/// its names, its storage version.
pub(crate) fn initial_status(crd: &Value) -> Value {
    let names = &crd["spec"]["names"];
    let kind = text(names, "/kind");
    let singular = match text(names, "/singular") {
        "" => kind.to_lowercase(),
        s => s.to_owned(),
    };
    let list_kind = match text(names, "/listKind") {
        "" => format!("{kind}List"),
        s => s.to_owned(),
    };
    let mut accepted = json!({
        "kind": kind,
        "listKind": list_kind,
        "plural": text(names, "/plural"),
        "singular": singular,
    });
    for optional in ["shortNames", "categories"] {
        if let Some(list) = names.get(optional) {
            accepted[optional] = list.clone();
        }
    }
    let storage: Vec<&Value> = crd["spec"]["versions"]
        .as_array()
        .map_or(&[][..], |v| v)
        .iter()
        .filter(|v| v["storage"] == true)
        .map(|v| &v["name"])
        .collect();
    let now = rfc3339(std::time::SystemTime::now());
    json!({
        "acceptedNames": accepted,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": storage,
    })
}

/// Serves the types of the stored CRDs: registered as storage's follower of the
/// `customresourcedefinitions` resource ([`install`]).
struct CrdFollower {
    gvr: Gvr,
    /// The types each CRD (by name) registered.
    types: HashMap<String, Vec<Gvr>>,
}

/// Makes `storage` serve the types of the CRDs stored in it, as they come and go.
pub(crate) fn install(storage: &mut Storage) {
    storage.follow(Box::new(CrdFollower {
        gvr: gvr(),
        types: HashMap::new(),
    }));
}

impl Follower for CrdFollower {
    fn follows(&self) -> &Gvr {
        &self.gvr
    }

    /// Follows a committed change of a CRD. A stored CRD serves its served versions (new
    /// ones as they are added, changed ones retyped, unserved ones no more); a version
    /// already served by a built-in kind or a type registered in code stays that one's.
    /// A deleted CRD's objects are deleted, each a DELETED event, and its versions are
    /// served no more (their watches end). Only what the CRD itself registered is touched.
    fn committed(&mut self, storage: &mut Storage, kind: EventType, crd: &StoredObject) {
        let value = crd.value(KIND, &gvr().api_version());
        let name = text(&value, "/metadata/name").to_owned();
        let had = self.types.remove(&name).unwrap_or_default();
        let wanted = match kind {
            EventType::Deleted => Vec::new(),
            _ => served(&value),
        };
        let mut kept = Vec::new();
        for ty in wanted {
            let gvr = ty.gvr.clone();
            if had.contains(&gvr) {
                storage.retype(ty);
            } else if storage.resource(&gvr).is_none() {
                storage.register(ty);
            } else {
                continue;
            }
            kept.push(gvr);
        }
        for gone in had.into_iter().filter(|g| !kept.contains(g)) {
            if kind == EventType::Deleted {
                delete_all(storage, &gone);
            }
            storage.unregister(&gone);
        }
        if !kept.is_empty() {
            self.types.insert(name, kept);
        }
    }
}

/// Deletes every object of `gvr`, each a DELETED event at its own revision.
fn delete_all(storage: &mut Storage, gvr: &Gvr) {
    let Some(store) = storage.resource(gvr) else {
        return;
    };
    let (kind, api_version) = (store.ty.kind.clone(), gvr.api_version());
    for object in store.live_objects() {
        let revision = storage.next_revision();
        let mut last = object.value(&kind, &api_version);
        last["metadata"]["resourceVersion"] = revision.to_string().into();
        storage.commit(
            gvr,
            EventType::Deleted,
            Arc::new(StoredObject::new(last, revision)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}},
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1alpha1", "served": false, "storage": false},
                ],
            },
        })
    }

    #[test]
    fn each_served_version_is_a_resource_type() {
        let types = served(&crd());
        let versions: Vec<&str> = types.iter().map(|t| t.gvr.version.as_str()).collect();
        assert_eq!(versions, ["v1", "v1beta1"]);
        let v1 = &types[0];
        assert_eq!(v1.gvr, Gvr::new("example.com", "v1", "widgets"));
        assert_eq!(v1.kind, "Widget");
        assert!(v1.namespaced);
        assert_eq!(v1.short_names, ["wd"]);
        assert_eq!(v1.categories, ["all"]);
        assert!(v1.status_subresource && v1.scale_subresource);
        assert!(!types[1].status_subresource && !types[1].scale_subresource);
    }

    #[test]
    fn a_new_crd_is_established_with_its_names() {
        let status = initial_status(&crd());
        assert_eq!(status["acceptedNames"]["singular"], "widget");
        assert_eq!(status["acceptedNames"]["listKind"], "WidgetList");
        assert_eq!(status["storedVersions"], json!(["v1"]));
        assert_eq!(status["conditions"][1]["type"], "Established");
        assert_eq!(status["conditions"][1]["status"], "True");
    }

    #[test]
    fn what_the_real_server_refuses_is_a_422_naming_the_field() {
        let mut wrong_name = crd();
        wrong_name["metadata"]["name"] = "gadgets.example.com".into();
        let error = validate(&wrong_name).unwrap_err();
        assert_eq!(error.code, 422);
        assert!(
            error.body["message"]
                .as_str()
                .unwrap()
                .contains("metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group"),
            "{}",
            error.body
        );
        let mut two_storage = crd();
        two_storage["spec"]["versions"][1]["storage"] = true.into();
        assert!(validate(&two_storage).is_err());
        let mut no_scope = crd();
        no_scope["spec"]["scope"] = "Galaxy".into();
        assert!(validate(&no_scope).is_err());
        assert!(validate(&crd()).is_ok());
    }
}
