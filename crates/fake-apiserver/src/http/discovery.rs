//! Discovery documents (`/version`, `/api`, `/api/v1`, `/apis`, `/apis/GROUP/VERSION`), enough
//! for kubectl and kube's discovery to find every registered resource, and the answers to
//! every other request that is no resource verb (health, metrics, 404s and 405s).

use std::{collections::BTreeMap, sync::Arc};

use bytes::Bytes;
use serde_json::{Value, json};

use super::{metrics::metrics, response::Reply, route::Route};
use crate::{Inner, registry::ResourceType, status::ApiError};

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "36",
        "emulationMajor": "1",
        "emulationMinor": "36",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "35",
        "gitVersion": "v1.36.0-fake",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "none (fake-apiserver, Rust)",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

pub(crate) fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

/// `/apis`: every non-core group and its versions.
pub(crate) fn groups(types: &[Arc<ResourceType>]) -> Value {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for ty in types.iter().filter(|t| !t.gvr.group.is_empty()) {
        let versions = groups.entry(&ty.gvr.group).or_default();
        if !versions.contains(&ty.gvr.version.as_str()) {
            versions.push(&ty.gvr.version);
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(g, mut vs)| {
            vs.sort_by_key(|v| version_priority(v));
            group_doc(g, &vs)
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn group(types: &[Arc<ResourceType>], group: &str) -> Option<Value> {
    let mut versions: Vec<&str> = Vec::new();
    for ty in types.iter().filter(|t| t.gvr.group == group) {
        if !versions.contains(&ty.gvr.version.as_str()) {
            versions.push(&ty.gvr.version);
        }
    }
    if versions.is_empty() {
        return None;
    }
    versions.sort_by_key(|v| version_priority(v));
    let mut doc = group_doc(group, &versions);
    doc["kind"] = "APIGroup".into();
    doc["apiVersion"] = "v1".into();
    Some(doc)
}

/// Kubernetes' version order, highest first (the first is the preferred version): GA
/// before beta before alpha, then the higher major, then the higher minor (`v2` before
/// `v1` before `v1beta2` before `v1beta1` before `v1alpha1`); other names after, by name.
fn version_priority(version: &str) -> (u8, std::cmp::Reverse<u64>, std::cmp::Reverse<u64>, String) {
    let other = (
        3,
        std::cmp::Reverse(0),
        std::cmp::Reverse(0),
        version.to_owned(),
    );
    let Some(rest) = version.strip_prefix('v') else {
        return other;
    };
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let Ok(major) = rest[..digits].parse::<u64>() else {
        return other;
    };
    let (stability, minor) = match &rest[digits..] {
        "" => (0, Some(0)),
        tail => match (tail.strip_prefix("beta"), tail.strip_prefix("alpha")) {
            (Some(n), _) => (1, n.parse().ok()),
            (_, Some(n)) => (2, n.parse().ok()),
            _ => (3, None),
        },
    };
    match minor {
        Some(minor) => (
            stability,
            std::cmp::Reverse(major),
            std::cmp::Reverse(minor),
            String::new(),
        ),
        None => other,
    }
}

fn group_doc(group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": versions, "preferredVersion": versions[0]})
}

/// `/api/v1` or `/apis/GROUP/VERSION`.
pub(crate) fn resources(types: &[Arc<ResourceType>], group: &str, version: &str) -> Option<Value> {
    let mut in_gv: Vec<&Arc<ResourceType>> = types
        .iter()
        .filter(|t| t.gvr.group == group && t.gvr.version == version)
        .collect();
    if in_gv.is_empty() {
        return None;
    }
    in_gv.sort_by(|a, b| a.gvr.resource.cmp(&b.gvr.resource));
    let resources: Vec<Value> = in_gv
        .iter()
        .flat_map(|t| {
            let mut main = json!({
                "name": t.gvr.resource,
                "singularName": t.singular(),
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": VERBS,
                "shortNames": t.short_names,
            });
            if !t.categories.is_empty() {
                main["categories"] = json!(t.categories);
            }
            // Subresources are listed as `<resource>/<name>`, as the real server lists them.
            let status = t.status_subresource.then(|| {
                json!({
                    "name": format!("{}/status", t.gvr.resource),
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": ["get", "patch", "update"],
                })
            });
            let scale = t.scale_subresource.then(|| {
                json!({
                    "name": format!("{}/scale", t.gvr.resource),
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                })
            });
            std::iter::once(main).chain(status).chain(scale)
        })
        .collect();
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the index of per-group-version documents.
pub(crate) fn openapi_index(types: &[Arc<ResourceType>]) -> Value {
    let mut paths = serde_json::Map::new();
    for ty in types {
        let gv = gv_path(&ty.gvr.group, &ty.gvr.version);
        let url = format!("/openapi/v3/{gv}?hash=fake");
        paths.insert(gv, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1` etc.: no schemas, but every write operation tagged with its kind and
/// declaring the `fieldValidation` parameter, which tells kubectl that the server validates
/// (so it sends `fieldValidation=Strict` instead of validating against schemas itself).
pub(crate) fn openapi_group_version(types: &[Arc<ResourceType>], gv: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    for ty in types
        .iter()
        .filter(|t| gv_path(&t.gvr.group, &t.gvr.version) == gv)
    {
        let gvk = json!({"group": ty.gvr.group, "version": ty.gvr.version, "kind": ty.kind});
        let params = json!([{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}]);
        let op = |action: &str| {
            json!({
                "operationId": format!("{action}{}", ty.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let base = if ty.namespaced {
            format!("/{gv}/namespaces/{{namespace}}/{}", ty.gvr.resource)
        } else {
            format!("/{gv}/{}", ty.gvr.resource)
        };
        paths.insert(base.clone(), json!({"post": op("post")}));
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"put": op("put"), "patch": op("patch")}),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (fake-apiserver)", "version": "v1.36.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

/// The answer to a request that is no resource verb: a discovery document, health, the
/// metrics, or an error.
pub(super) fn discovery_reply(inner: &Inner, route: Route, types: &[Arc<ResourceType>]) -> Reply {
    let found = match route {
        Route::Metrics => return metrics(inner),
        Route::Version => Some(version()),
        Route::Health => return Reply::bytes(200, Bytes::from_static(b"ok")),
        Route::CoreVersions => Some(core_versions()),
        Route::Groups => Some(groups(types)),
        Route::Group(g) => group(types, &g),
        Route::Resources(g, v) => resources(types, &g, &v),
        Route::OpenApiIndex => Some(openapi_index(types)),
        Route::OpenApi(gv) => openapi_group_version(types, &gv),
        Route::Resource { .. } => return Reply::error(&ApiError::method_not_allowed()),
        Route::NotFound => None,
        Route::NoHandler => return Reply::error(&ApiError::no_handler()),
    };
    match found {
        Some(doc) => Reply::json(200, &doc),
        None => Reply::error(&ApiError::not_found_path()),
    }
}

#[cfg(test)]
mod tests {
    use super::version_priority;

    #[test]
    fn versions_are_in_kubernetes_order() {
        let mut versions = ["v1alpha1", "v1beta1", "foo", "v1", "v1beta2", "v2", "v10"];
        versions.sort_by_key(|v| version_priority(v));
        assert_eq!(
            versions,
            ["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }
}
