//! The patch metadata of every built-in type: which lists merge, by which key, and which maps
//! retain only the keys a patch names. It is the real server's OpenAPI v3
//! (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key` on each property), reduced
//! to what a strategic merge patch reads and committed as `data/patch-schema.json`; nothing
//! here is written by hand. `crates/e2e/tests/capture_openapi.rs` regenerates it from a real
//! kube-apiserver with [`strategic_patch_table`].

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::LazyLock,
};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The committed table (about 45 KB, read once).
static TABLE: LazyLock<PatchTable> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../data/patch-schema.json"))
        .expect("data/patch-schema.json is the generator's own output")
});

/// What a strategic merge patch knows of one property.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FieldMeta {
    /// The schema of the property's object, or of its list's items, when that schema has
    /// patch metadata somewhere below it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) schema: Option<String>,
    /// `merge`, `replace`, `retainKeys` or `merge,retainKeys`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) strategy: Option<String>,
    /// The key that identifies the items of a merging list of objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) key: Option<String>,
    /// The property's object is one value to server-side apply (`x-kubernetes-map-type:
    /// atomic`, as a label selector): one manager owns all of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) atomic: bool,
}

/// Kinds to root schemas, and schemas to the properties that carry patch metadata.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct PatchTable {
    /// Where the table came from (server version).
    #[serde(default)]
    source: String,
    /// `apps/v1 Deployment` → `io.k8s.api.apps.v1.Deployment`.
    kinds: BTreeMap<String, String>,
    schemas: BTreeMap<String, BTreeMap<String, FieldMeta>>,
}

/// A position in the table: the schema of the map being merged. `None` fields mean a schema
/// without patch metadata (or a property the table does not know, which the fake keeps and the
/// real server would have pruned): its maps merge and its lists are replaced.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Schema {
    fields: Option<&'static BTreeMap<String, FieldMeta>>,
}

static NO_META: FieldMeta = FieldMeta {
    schema: None,
    strategy: None,
    key: None,
    atomic: false,
};

/// The table's name for `metadata`'s schema, which every kind shares.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

impl Schema {
    /// The root schema of a built-in kind (`api_version` as objects spell it), or `None` for
    /// a kind the real server has no OpenAPI for: a custom resource, which refuses strategic
    /// merge patches.
    pub(crate) fn for_kind(api_version: &str, kind: &str) -> Option<Self> {
        let table = &*TABLE;
        let name = table.kinds.get(&format!("{api_version} {kind}"))?;
        Some(Self {
            fields: table.schemas.get(name),
        })
    }

    /// A schema without patch metadata (a custom resource's): maps merge, lists are atomic.
    pub(crate) fn untyped() -> Self {
        Self { fields: None }
    }

    /// The schema of `metadata`, which custom resources share with built-in kinds.
    pub(crate) fn object_meta() -> Self {
        Self {
            fields: TABLE.schemas.get(OBJECT_META),
        }
    }

    /// The metadata of property `key`, and the schema below it.
    pub(crate) fn field(&self, key: &str) -> (Self, &'static FieldMeta) {
        let meta = self.fields.and_then(|f| f.get(key)).unwrap_or(&NO_META);
        let below = meta
            .schema
            .as_ref()
            .and_then(|name| TABLE.schemas.get(name));
        (Self { fields: below }, meta)
    }
}

/// Builds the table this server embeds (`data/patch-schema.json`) from a server's OpenAPI v3
/// group-version documents (`GET /openapi/v3/<gv>`), as JSON. Both layouts a server may use
/// are read: the standard one, and the Go-struct one (`SchemaProps`, `ArbitraryKeys`) that the
/// envtest build of kube-apiserver 1.36 serves.
///
/// ```
/// use serde_json::json;
///
/// let doc = json!({"components": {"schemas": {
///     "io.k8s.api.core.v1.PodSpec": {"properties": {"containers": {
///         "type": "array",
///         "items": {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"},
///         "x-kubernetes-patch-merge-key": "name",
///         "x-kubernetes-patch-strategy": "merge"}}},
///     "io.k8s.api.core.v1.Pod": {
///         "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Pod"}],
///         "properties": {"spec": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}]}}},
/// }}});
/// let table = fake_apiserver::strategic_patch_table("test", &[doc]);
/// assert_eq!(table["kinds"]["v1 Pod"], "io.k8s.api.core.v1.Pod");
/// assert_eq!(table["schemas"]["io.k8s.api.core.v1.PodSpec"]["containers"]["key"], "name");
/// ```
pub fn strategic_patch_table(source: &str, documents: &[Value]) -> Value {
    let mut kinds = BTreeMap::new();
    let mut schemas: BTreeMap<String, BTreeMap<String, FieldMeta>> = BTreeMap::new();
    let atomic_maps: BTreeSet<String> = documents
        .iter()
        .filter_map(|doc| doc["components"]["schemas"].as_object())
        .flatten()
        .filter(|(_, schema)| flatten(schema)["x-kubernetes-map-type"] == "atomic")
        .map(|(name, _)| name.clone())
        .collect();
    for doc in documents {
        let Some(components) = doc["components"]["schemas"].as_object() else {
            continue;
        };
        for (name, schema) in components {
            let schema = flatten(schema);
            for gvk in schema["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let (group, version) = (gvk["group"].as_str(), gvk["version"].as_str());
                let (Some(group), Some(version), Some(kind)) =
                    (group, version, gvk["kind"].as_str())
                else {
                    continue;
                };
                let gv = if group.is_empty() {
                    version.to_owned()
                } else {
                    format!("{group}/{version}")
                };
                kinds.insert(format!("{gv} {kind}"), name.clone());
            }
            let mut fields = BTreeMap::new();
            for (property, value) in schema["properties"].as_object().into_iter().flatten() {
                let value = flatten(value);
                let meta = FieldMeta {
                    schema: reference(&value).or_else(|| reference(&flatten(&value["items"]))),
                    strategy: value["x-kubernetes-patch-strategy"]
                        .as_str()
                        .map(Into::into),
                    key: value["x-kubernetes-patch-merge-key"]
                        .as_str()
                        .map(Into::into),
                    atomic: value["x-kubernetes-map-type"] == "atomic"
                        || reference(&value).is_some_and(|r| atomic_maps.contains(&r)),
                };
                if meta != FieldMeta::default() {
                    fields.insert(property.clone(), meta);
                }
            }
            schemas.insert(name.clone(), fields);
        }
    }
    // Keep only schemas with metadata somewhere below them: the rest merge like unknown ones.
    let mut useful = BTreeSet::new();
    loop {
        let before = useful.len();
        for (name, fields) in &schemas {
            let has = fields.values().any(|f| {
                f.strategy.is_some()
                    || f.key.is_some()
                    || f.atomic
                    || f.schema.as_ref().is_some_and(|s| useful.contains(s))
            });
            if has {
                useful.insert(name.clone());
            }
        }
        if useful.len() == before {
            break;
        }
    }
    let schemas: BTreeMap<_, _> = schemas
        .into_iter()
        .filter(|(name, _)| useful.contains(name))
        .map(|(name, fields)| {
            let fields: BTreeMap<_, _> = fields
                .into_iter()
                .filter_map(|(property, mut meta)| {
                    meta.schema = meta.schema.filter(|s| useful.contains(s));
                    (meta != FieldMeta::default()).then_some((property, meta))
                })
                .collect();
            (name, fields)
        })
        .collect();
    serde_json::to_value(PatchTable {
        source: source.to_owned(),
        kinds,
        schemas,
    })
    .expect("plain maps and strings")
}

/// One schema node with the Go-struct layout folded into the standard one.
fn flatten(node: &Value) -> Value {
    let Some(map) = node.as_object() else {
        return Value::Null;
    };
    let mut flat = serde_json::Map::new();
    for (k, v) in map {
        match k.as_str() {
            "SchemaProps" | "ArbitraryKeys" => {
                flat.extend(
                    v.as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.clone())),
                );
            }
            "SwaggerSchemaProps" => {}
            _ => {
                flat.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(flat)
}

/// The schema a node refers to, directly or through `allOf`.
fn reference(node: &Value) -> Option<String> {
    if let Some(r) = node["$ref"].as_str() {
        return r.rsplit('/').next().map(Into::into);
    }
    node["allOf"]
        .as_array()
        .and_then(|all| all.first())
        .and_then(|first| reference(&flatten(first)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_table_knows_the_merge_lists_kubectl_relies_on() {
        let (pod_spec, _) = Schema::for_kind("v1", "Pod").unwrap().field("spec");
        let (container, containers) = pod_spec.field("containers");
        assert_eq!(containers.key.as_deref(), Some("name"));
        assert_eq!(containers.strategy.as_deref(), Some("merge"));
        assert_eq!(
            container.field("ports").1.key.as_deref(),
            Some("containerPort")
        );
        assert_eq!(
            pod_spec.field("volumes").1.strategy.as_deref(),
            Some("merge,retainKeys")
        );
        assert_eq!(pod_spec.field("tolerations").1.strategy, None);
        let (spec, _) = Schema::for_kind("apps/v1", "Deployment")
            .unwrap()
            .field("spec");
        assert_eq!(
            spec.field("strategy").1.strategy.as_deref(),
            Some("retainKeys")
        );
        let (meta, _) = Schema::for_kind("v1", "ConfigMap")
            .unwrap()
            .field("metadata");
        assert_eq!(
            meta.field("finalizers").1.strategy.as_deref(),
            Some("merge")
        );
        assert_eq!(meta.field("ownerReferences").1.key.as_deref(), Some("uid"));
        assert!(Schema::for_kind("apps/v1", "StatefulSet").is_some());
        assert!(Schema::for_kind("autoscaling/v1", "Scale").is_some());
        assert!(Schema::for_kind("example.com/v1", "Widget").is_none());
    }
}
