//! Compact objects: an object kept as its JSON bytes and its parsed metadata, decoded in full
//! only when asked.
//!
//! A typed `Pod` decoded by serde holds about 39 KB of heap for about 5.7 KB of JSON (every
//! string, map and `managedFields` entry is its own allocation), and decoding it is most of
//! an informer's CPU. Most controllers read only keys, labels, owners and a few fields of the
//! objects in their caches. [`Compact<K>`] is usable wherever `K` is (`Api<Compact<Pod>>`,
//! `SharedIndexInformer<Compact<Pod>>`, factories, listers, index functions) and keeps:
//!
//! - the object's JSON exactly as the server sent it (full fidelity: `managedFields`, unknown
//!   fields, everything), and
//! - its `metadata` parsed into an [`ObjectMeta`], without `managedFields` (the most
//!   allocation-heavy part, which controllers rarely read).
//!
//! Keys, namespaces, labels, annotations, owner references, finalizers, resourceVersions and
//! uids are therefore read without decoding, so listers, label selectors and index functions
//! on metadata cost what they cost on typed objects. **The trade-off**: reading anything else
//! pays a full decode ([`Compact::decode`], about as costly as the typed informer's decode
//! per event, which the compact informer skipped); decode once per reconcile, not in a hot
//! loop over the cache.
//!
//! ```
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::Resource;
//! use kube_informer::compact::Compact;
//!
//! let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"prod",
//!     "labels":{"app":"web"},"managedFields":[{"manager":"kubectl","operation":"Update"}]},
//!     "spec":{"nodeName":"node-7","containers":[{"name":"web","image":"nginx"}]}}"#;
//! let compact: Compact<Pod> = serde_json::from_str(json)?;
//!
//! // Metadata without decoding (managedFields are not parsed, but kept in the JSON).
//! assert_eq!(compact.meta().name.as_deref(), Some("web-1"));
//! assert_eq!(compact.meta().labels.as_ref().unwrap()["app"], "web");
//! assert!(compact.meta().managed_fields.is_none());
//!
//! // Everything else on demand, with full fidelity.
//! let pod: Pod = compact.decode()?;
//! assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some("node-7"));
//! assert_eq!(pod.metadata.managed_fields.unwrap()[0].manager.as_deref(), Some("kubectl"));
//! # Ok::<(), serde_json::Error>(())
//! ```
//!
//! Decoding needs serde_json's own deserializer (as kube uses for every response); a
//! `Compact` inside a format that buffers values first (e.g. an internally tagged enum) is
//! refused with an error rather than silently losing fidelity.

use std::{borrow::Cow, collections::BTreeMap, fmt, marker::PhantomData};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de::DeserializeOwned};
use serde_json::value::RawValue;

/// An object of type `K` kept as its JSON and its parsed metadata (without `managedFields`);
/// see the [module docs](self).
pub struct Compact<K> {
    meta: ObjectMeta,
    json: Box<RawValue>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Compact<K> {
    /// Keeps `json` (one JSON object) and parses its metadata.
    pub fn from_json(json: Box<RawValue>) -> serde_json::Result<Self> {
        let Envelope { metadata } = serde_json::from_str(json.get())?;
        Ok(Self {
            meta: metadata.into(),
            json,
            kind: PhantomData,
        })
    }

    /// The object's JSON, exactly as received.
    pub fn json(&self) -> &str {
        self.json.get()
    }
}

impl<K: DeserializeOwned + Resource> Compact<K> {
    /// Decodes the whole object. Changes made through `meta_mut` (e.g. by a transform) are
    /// applied over the decoded metadata; `managedFields` come from the JSON.
    pub fn decode(&self) -> serde_json::Result<K> {
        let mut object: K = serde_json::from_str(self.json.get())?;
        let managed = object.meta_mut().managed_fields.take();
        let meta = object.meta_mut();
        *meta = self.meta.clone();
        meta.managed_fields = managed;
        Ok(object)
    }
}

impl<K> Clone for Compact<K> {
    fn clone(&self) -> Self {
        Self {
            meta: self.meta.clone(),
            json: self.json.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> fmt::Debug for Compact<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compact")
            .field("namespace", &self.meta.namespace)
            .field("name", &self.meta.name)
            .field("resource_version", &self.meta.resource_version)
            .field("json_bytes", &self.json.get().len())
            .finish()
    }
}

impl<K> PartialEq for Compact<K> {
    /// Same JSON and same metadata.
    fn eq(&self, other: &Self) -> bool {
        self.json.get() == other.json.get() && self.meta == other.meta
    }
}

impl<'de, K> Deserialize<'de> for Compact<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = Box::<RawValue>::deserialize(deserializer)?;
        Self::from_json(json).map_err(serde::de::Error::custom)
    }
}

impl<K> Serialize for Compact<K> {
    /// Writes the JSON as received (metadata edits made through `meta_mut` are not included;
    /// serialize [`Compact::decode`]'s result to include them).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(serializer)
    }
}

impl<K: Resource> Resource for Compact<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn metadata_api() -> bool {
        K::metadata_api()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// The top level of an object: only `metadata` is parsed, the rest is skipped.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    metadata: LeanMeta,
}

/// `ObjectMeta` without `managedFields` (skipped unparsed).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LeanMeta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<LeanMeta> for ObjectMeta {
    fn from(m: LeanMeta) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n","uid":"u-1","resourceVersion":"7","generation":2,"labels":{"a":"b"},"annotations":{"x":"y"},"finalizers":["f"],"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u-0","controller":true}],"creationTimestamp":"2026-11-20T10:00:00Z","managedFields":[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},"spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Running"},"futureField":{"kept":true}}"#;

    #[test]
    fn metadata_is_parsed_without_managed_fields_and_the_json_kept_whole() {
        let compact: Compact<Pod> = serde_json::from_str(POD).unwrap();
        let typed: Pod = serde_json::from_str(POD).unwrap();
        let mut expected = typed.metadata.clone();
        expected.managed_fields = None;
        assert_eq!(compact.meta(), &expected);
        assert_eq!(compact.json(), POD, "byte for byte");
        assert_eq!(
            compact.decode().unwrap(),
            typed,
            "decode gives the typed object"
        );
        assert_eq!(serde_json::to_string(&compact).unwrap(), POD);
    }

    #[test]
    fn metadata_edits_show_in_the_decoded_object() {
        let mut compact: Compact<Pod> = serde_json::from_str(POD).unwrap();
        compact
            .meta_mut()
            .labels
            .get_or_insert_default()
            .insert("added".into(), "yes".into());
        let pod = compact.decode().unwrap();
        assert_eq!(pod.metadata.labels.unwrap()["added"], "yes");
        assert_eq!(pod.metadata.managed_fields.unwrap().len(), 1);
    }

    #[test]
    fn compact_objects_are_resources_of_their_type() {
        assert_eq!(Compact::<Pod>::kind(&()), "Pod");
        assert_eq!(Compact::<Pod>::plural(&()), "pods");
        assert_eq!(
            Compact::<Pod>::url_path(&(), Some("n")),
            Pod::url_path(&(), Some("n"))
        );
        let list = format!(r#"{{"metadata":{{}},"items":[{POD},{POD}]}}"#);
        let list: kube::api::ObjectList<Compact<Pod>> = serde_json::from_str(&list).unwrap();
        assert_eq!(list.items.len(), 2);
        let from_value: Compact<Pod> =
            serde_json::from_value(serde_json::from_str(POD).unwrap()).unwrap();
        assert_eq!(from_value.meta().name.as_deref(), Some("p"));
    }

    #[test]
    fn bad_objects_are_refused_with_an_error() {
        for bad in [
            r#"{"metadata":{"name":5}}"#,
            r#"{"metadata":{"labels":{"a":1}}}"#,
            r#"[1,2]"#,
            r#"{"metadata":{"name":"p"}"#,
        ] {
            assert!(serde_json::from_str::<Compact<Pod>>(bad).is_err(), "{bad}");
        }
        let empty: Compact<Pod> = serde_json::from_str("{}").unwrap();
        assert_eq!(empty.meta(), &ObjectMeta::default());
        // Buffered formats lose the raw bytes: refused rather than silently re-encoded.
        #[derive(Deserialize)]
        #[serde(tag = "t")]
        #[allow(dead_code)]
        enum Tagged {
            A { object: Compact<Pod> },
        }
        let tagged = format!(r#"{{"object":{POD},"t":"A"}}"#);
        assert!(serde_json::from_str::<Tagged>(&tagged).is_err());
    }
}
