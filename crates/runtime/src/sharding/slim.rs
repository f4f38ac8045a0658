//! What the sharder caches of an object: the metadata that placement reads, decoded
//! straight from the API server's `PartialObjectMetadata` without the rest.
//!
//! Decoding into `PartialObjectMeta` and trimming afterwards would first build every
//! object's managedFields, annotations and the like: for the initial LIST of 100k pods,
//! some 300 MB that the sharder's replica holds at once, and its allocator keeps. Here
//! serde skips what is not read, so a LIST costs about what the cache keeps.

use std::{borrow::Cow, collections::BTreeMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, api::ApiResource, core::DynamicResourceScope};
use serde::{Deserialize, Deserializer};

/// An object as the sharder knows it: name, namespace, resourceVersion, the ring's labels,
/// its holder annotations and the controller reference.
#[derive(Debug, Clone, Default)]
pub(super) struct Placed {
    metadata: ObjectMeta,
}

/// A wire object: only `metadata` is read.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<Holders>,
    owner_references: Option<Vec<WireOwner>>,
}

/// Of the annotations, the holders' only ([`holder_annotation`](super::holder_annotation)
/// of every ring): the others (a `last-applied-configuration` can be most of an object)
/// are skipped unread.
#[derive(Default)]
struct Holders(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for Holders {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Holders;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of annotations")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Holders, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key.starts_with(HOLDER) {
                        kept.insert(key, map.next_value::<String>()?);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(Holders(kept))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireOwner {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
    controller: Option<bool>,
}

/// The label prefixes kept: the shard and drain labels of every ring (the sharder of one
/// ring reads its own; a few others cost nothing).
const KEPT: [&str; 2] = ["shard.kube-informer.dev/", "drain.kube-informer.dev/"];

/// The annotation prefix kept: the holders of every ring.
const HOLDER: &str = "holder.kube-informer.dev/";

impl<'de> Deserialize<'de> for Placed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let meta = Wire::deserialize(deserializer)?.metadata;
        let labels = meta.labels.map(|labels| {
            labels
                .into_iter()
                .filter(|(k, _)| KEPT.iter().any(|p| k.starts_with(p)))
                .collect()
        });
        let owner_references = meta.owner_references.map(|owners| {
            owners
                .into_iter()
                .filter(|o| o.controller == Some(true))
                .map(|o| OwnerReference {
                    api_version: o.api_version,
                    kind: o.kind,
                    name: o.name,
                    uid: o.uid,
                    controller: Some(true),
                    block_owner_deletion: None,
                })
                .collect()
        });
        Ok(Self {
            metadata: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                resource_version: meta.resource_version,
                labels,
                annotations: meta.annotations.map(|h| h.0).filter(|h| !h.is_empty()),
                owner_references,
                ..ObjectMeta::default()
            },
        })
    }
}

impl Resource for Placed {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn metadata_api() -> bool {
        true
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.kind)
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.group)
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.version)
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.api_version)
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.plural)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_placement_reads_is_kept() {
        let item = serde_json::json!({
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": {
                "name": "web-0", "namespace": "shop", "resourceVersion": "42", "uid": "u",
                "labels": {"app": "web", "shard.kube-informer.dev/web": "a",
                           "drain.kube-informer.dev/web": "true"},
                "annotations": {"big": "x".repeat(1000)},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r", "controller": true},
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "c"}
                ]
            }
        });
        let placed: Placed = serde_json::from_value(item).unwrap();
        let meta = placed.meta();
        assert_eq!(meta.name.as_deref(), Some("web-0"));
        assert_eq!(meta.namespace.as_deref(), Some("shop"));
        assert_eq!(meta.resource_version.as_deref(), Some("42"));
        let labels: Vec<&str> = meta
            .labels
            .iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(
            labels,
            ["drain.kube-informer.dev/web", "shard.kube-informer.dev/web"]
        );
        let owners = meta.owner_references.as_ref().unwrap();
        assert_eq!((owners.len(), owners[0].kind.as_str()), (1, "ReplicaSet"));
        assert!(meta.annotations.is_none() && meta.managed_fields.is_none() && meta.uid.is_none());
    }

    #[test]
    fn the_holders_are_kept_of_the_annotations() {
        let item = serde_json::json!({"metadata": {"name": "web-0", "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": true}",
            "holder.kube-informer.dev/web": "a",
            "holder.kube-informer.dev/api": "b",
        }}});
        let placed: Placed = serde_json::from_value(item).unwrap();
        let annotations = placed.meta().annotations.clone().unwrap();
        assert_eq!(
            annotations.into_iter().collect::<Vec<_>>(),
            [
                ("holder.kube-informer.dev/api".to_owned(), "b".to_owned()),
                ("holder.kube-informer.dev/web".to_owned(), "a".to_owned())
            ]
        );
    }
}
