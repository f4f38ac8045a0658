//! Compact objects: an object kept as its JSON bytes and its parsed metadata, decoded in full
//! only when asked.
//!
//! A typed `Pod` decoded by serde holds about 39 KB of heap for about 5.7 KB of JSON (every
//! string, map and `managedFields` entry is its own allocation), and decoding it is most of
//! an informer's CPU. Most controllers read only keys, labels, owners and a few fields of the
//! objects in their caches. [`Compact<K>`] is usable wherever `K` is (`Api<Compact<Pod>>`,
//! `SharedIndexInformer<Compact<Pod>>`, factories, listers, index functions) and keeps:
//!
//! - the object's JSON exactly as the server sent it (full fidelity: unknown fields,
//!   everything), or its protobuf message (see below) — without the object's own
//!   `metadata.managedFields` when its informer leaves them out (a factory's default; cut
//!   from the JSON, every other byte kept), and
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
//! **Storage**: `Compact<K>` keeps the JSON as received. `Compact<K, Zstd>` (feature `zstd`)
//! keeps it compressed: on the benchmark's 5.7 KB pods, 5.0 instead of 8.9 KiB per cached
//! pod (BENCHMARKS.md, "Against the peers, on identical bytes"), for a compression of each
//! arriving object (on the decoding threads) and a decompression on each
//! `json()`/`decode()`.
//!
//! **Protobuf**: read by an informer that asks for protobuf
//! ([`ClientListerWatcher::protobuf`](crate::list_watch::ClientListerWatcher::protobuf), or
//! a factory, by default), a `Compact` keeps the protobuf message instead (31% fewer bytes
//! than the JSON for a Pod, BENCHMARKS.md, "Protobuf"; without its managedFields when they
//! are stripped), with the same parsed metadata; [`Compact::decode`] reads the message, and [`Compact::json`] renders the JSON the JSON encoding gives the object. The
//! message is checked whole when it arrives, so a malformed body is refused then, and
//! `json()` cannot fail later. Fields the schema does not know (a newer server's) are kept
//! in the bytes but not shown by `json()`.
//!
//! From JSON, decoding needs serde_json's own deserializer (as kube uses for every response); a
//! `Compact` inside a format that buffers values first (e.g. an internally tagged enum) is
//! refused with an error rather than silently losing fidelity.

mod meta;
mod storage;

pub(crate) use self::meta::without_managed_fields;

use std::{borrow::Cow, fmt, marker::PhantomData};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{
    Deserialize, Deserializer, Serialize, Serializer,
    de::{DeserializeOwned, SeqAccess, Visitor},
};
use serde_json::value::RawValue;

#[cfg(feature = "zstd")]
pub use self::storage::Zstd;
pub use self::storage::{JsonStorage, Plain};

/// An object of type `K` kept as its JSON (stored as `S` says: as is by default, or
/// `Zstd`-compressed, feature `zstd`) and its parsed metadata (without `managedFields`); see the
/// [module docs](self).
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::ResourceExt;
/// use kube_informer::compact::Compact;
///
/// let json = r#"{"metadata":{"name":"web-1","namespace":"shop","labels":{"app":"web"}},
///                "spec":{"containers":[{"name":"main","image":"nginx"}]}}"#;
/// let pod: Compact<Pod> = serde_json::from_str(json).unwrap();
/// assert_eq!(pod.name_any(), "web-1"); // metadata: parsed once, no decoding
/// let full: Pod = pod.decode().unwrap(); // the rest: decoded when needed
/// assert_eq!(full.spec.unwrap().containers[0].image.as_deref(), Some("nginx"));
/// ```
pub struct Compact<K, S: JsonStorage = Plain> {
    meta: ObjectMeta,
    stored: Box<[u8]>,
    encoding: Encoding,
    kind: PhantomData<fn() -> (K, S)>,
}

/// What a compact object's stored bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Json,
    /// A protobuf message: its index in the schema.
    Protobuf(u16),
}

impl<K, S: JsonStorage> Compact<K, S> {
    /// Keeps `json` (one JSON object) and parses its metadata.
    pub(crate) fn from_json(json: Box<RawValue>) -> serde_json::Result<Self> {
        Ok(Self {
            meta: meta::parse_metadata(json.get())?,
            stored: S::store(json),
            encoding: Encoding::Json,
            kind: PhantomData,
        })
    }

    /// Keeps `json`, one JSON object this crate has already read whole (see
    /// [`JSON_HAND_OFF`]), and parses its metadata.
    fn from_checked_json(json: String) -> serde_json::Result<Self> {
        Ok(Self {
            meta: meta::parse_metadata(&json)?,
            stored: storage::store_checked::<S>(json)?,
            encoding: Encoding::Json,
            kind: PhantomData,
        })
    }

    /// Keeps a protobuf message (of the schema's message `index`; without its
    /// managedFields when `skip_managed_fields`), checked whole (so that
    /// [`json`](Self::json) cannot fail later), and parses its metadata.
    fn from_protobuf(
        index: u16,
        skip_managed_fields: bool,
        bytes: &[u8],
    ) -> Result<Self, crate::protobuf::DecodeError> {
        let kept = match skip_managed_fields {
            true => Cow::Owned(crate::protobuf::without_managed_fields(index, bytes)?),
            false => Cow::Borrowed(bytes),
        };
        crate::protobuf::check_message(index, &kept)?;
        let meta = crate::protobuf::decode_metadata::<meta::LeanMeta>(index, &kept)?;
        Ok(Self {
            meta: meta.unwrap_or_default().into(),
            stored: S::store_bytes(&kept),
            encoding: Encoding::Protobuf(index),
            kind: PhantomData,
        })
    }

    /// The object's JSON: exactly as received (decompressed first with `Zstd`); for an
    /// object received in protobuf, the JSON the JSON encoding gives it: the same fields
    /// and values with its `kind` and `apiVersion`, keys perhaps in another order, and
    /// without fields this version's schema does not know (a newer server's).
    pub fn json(&self) -> Cow<'_, str> {
        match self.encoding {
            Encoding::Json => S::load(&self.stored),
            Encoding::Protobuf(index) => {
                let bytes = S::load_bytes(&self.stored);
                // Checked whole on arrival: decoding it again cannot fail.
                let mut value: serde_json::Value = crate::protobuf::decode_message(index, &bytes)
                    .expect("a message checked on arrival decodes");
                if let (Some(map), Some((api_version, kind))) =
                    (value.as_object_mut(), kube_protobuf_schema::kind_of(index))
                {
                    map.insert("apiVersion".into(), api_version.into());
                    map.insert("kind".into(), kind.into());
                }
                Cow::Owned(value.to_string())
            }
        }
    }

    /// Whether the object arrived in protobuf (and is kept as its protobuf message, 31%
    /// fewer bytes than its JSON for a Pod: BENCHMARKS.md, "Protobuf").
    pub fn is_protobuf(&self) -> bool {
        matches!(self.encoding, Encoding::Protobuf(_))
    }

    /// Bytes the object takes in memory: its JSON, or its protobuf message (compressed size
    /// with `Zstd`).
    pub fn stored_len(&self) -> usize {
        self.stored.len()
    }
}

impl<K: DeserializeOwned + Resource + 'static, S: JsonStorage> Compact<K, S> {
    /// Decodes the whole object. Changes made through `meta_mut` (e.g. by a transform) are
    /// applied over the decoded metadata; `managedFields` come from the JSON.
    pub fn decode(&self) -> serde_json::Result<K> {
        let mut object: K = match self.encoding {
            Encoding::Json => serde_json::from_str(&self.json())?,
            Encoding::Protobuf(index) => {
                let bytes = S::load_bytes(&self.stored);
                crate::protobuf::decode_message(index, &bytes)
                    .map_err(<serde_json::Error as serde::de::Error>::custom)?
            }
        };
        let managed = object.meta_mut().managed_fields.take();
        let meta = object.meta_mut();
        *meta = self.meta.clone();
        meta.managed_fields = managed;
        Ok(object)
    }
}

impl<K, S: JsonStorage> Clone for Compact<K, S> {
    fn clone(&self) -> Self {
        Self {
            meta: self.meta.clone(),
            stored: self.stored.clone(),
            encoding: self.encoding,
            kind: PhantomData,
        }
    }
}

impl<K, S: JsonStorage> fmt::Debug for Compact<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compact")
            .field("namespace", &self.meta.namespace)
            .field("name", &self.meta.name)
            .field("resource_version", &self.meta.resource_version)
            .field("stored_bytes", &self.stored.len())
            .field("protobuf", &self.is_protobuf())
            .finish()
    }
}

impl<K, S: JsonStorage> PartialEq for Compact<K, S> {
    /// Same metadata and same bytes (JSON, or protobuf message).
    fn eq(&self, other: &Self) -> bool {
        self.meta == other.meta
            && self.encoding == other.encoding
            && match self.encoding {
                Encoding::Json => self.json() == other.json(),
                Encoding::Protobuf(_) => {
                    S::load_bytes(&self.stored) == S::load_bytes(&other.stored)
                }
            }
    }
}

impl<'de, K, S: JsonStorage> Deserialize<'de> for Compact<K, S> {
    /// From JSON (serde_json's deserializer, as kube uses), or from protobuf (kube-informer's
    /// decoder hands over the message undecoded).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_newtype_struct(
            crate::protobuf::RAW_MESSAGE,
            CompactVisitor::<K, S>(PhantomData),
        )
    }
}

/// The first element of a JSON hand-off: the object's JSON follows, as text, without its
/// own managedFields (the JSON reader that leaves them out hands objects over this way, after
/// reading each object whole, so the text is kept without being read again; no protobuf
/// message has this index).
pub(crate) const JSON_HAND_OFF: u16 = u16::MAX;

std::thread_local! {
    /// Set while this crate's JSON reader hands an object over on this thread: a hand-off
    /// is accepted only then. Any other deserializer could produce the same sequence, and
    /// the text of a hand-off is kept unread (it was read whole before).
    static HANDING_OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `hand_off` with this thread's hand-off open (see [`JSON_HAND_OFF`]).
pub(crate) fn handing_off<T>(hand_off: impl FnOnce() -> T) -> T {
    /// Closes the hand-off again, also when `hand_off` panics.
    struct Close(bool);
    impl Drop for Close {
        fn drop(&mut self) {
            HANDING_OFF.set(self.0);
        }
    }
    let _close = Close(HANDING_OFF.replace(true));
    hand_off()
}

struct CompactVisitor<K, S>(PhantomData<fn() -> (K, S)>);

impl<'de, K, S: JsonStorage> Visitor<'de> for CompactVisitor<K, S> {
    type Value = Compact<K, S>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    /// JSON: the raw text.
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let json = Box::<RawValue>::deserialize(d)?;
        Compact::from_json(json).map_err(serde::de::Error::custom)
    }

    /// Protobuf: the message's index in the schema, then its bytes. JSON without its
    /// managedFields: [`JSON_HAND_OFF`], then the text.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let missing = || serde::de::Error::custom("a protobuf hand-off without its message");
        let index: u16 = seq.next_element()?.ok_or_else(missing)?;
        if index == JSON_HAND_OFF {
            if !HANDING_OFF.get() {
                return Err(serde::de::Error::custom(
                    "not a JSON hand-off of this crate",
                ));
            }
            let json: String = seq.next_element()?.ok_or_else(missing)?;
            return Compact::from_checked_json(json).map_err(serde::de::Error::custom);
        }
        let skip_managed_fields: bool = seq.next_element()?.ok_or_else(missing)?;
        let bytes: &'de [u8] = seq.next_element()?.ok_or_else(missing)?;
        // Only kube-informer's decoder hands messages over; anything else is refused.
        if usize::from(index) >= kube_protobuf_schema::messages().len() {
            return Err(serde::de::Error::custom("not a protobuf hand-off"));
        }
        Compact::from_protobuf(index, skip_managed_fields, bytes).map_err(serde::de::Error::custom)
    }
}

impl<K, S: JsonStorage> Serialize for Compact<K, S> {
    /// Writes [`json`](Compact::json): as received, or rendered from protobuf (metadata
    /// edits made through `meta_mut` are not included; serialize [`Compact::decode`]'s
    /// result to include them).
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        let raw =
            RawValue::from_string(self.json().into_owned()).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<K: Resource, S: JsonStorage> Resource for Compact<K, S> {
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n","uid":"u-1","resourceVersion":"7","generation":2,"labels":{"a":"b"},"annotations":{"x":"y"},"finalizers":["f"],"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u-0","controller":true}],"creationTimestamp":"2026-11-20T10:00:00Z","managedFields":[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},"spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Running"},"futureField":{"kept":true}}"#;

    #[test]
    fn a_json_hand_off_from_another_deserializer_is_refused() {
        // The sequence this crate's JSON reader hands over, made by another deserializer:
        // its text would be kept unread, so it must not be taken.
        let forged = || {
            let parts = [serde_json::json!(JSON_HAND_OFF), serde_json::json!(POD)];
            serde::de::value::SeqDeserializer::<_, serde_json::Error>::new(parts.into_iter())
        };
        let refused = Compact::<Pod>::deserialize(forged()).unwrap_err();
        assert!(
            refused.to_string().contains("not a JSON hand-off"),
            "{refused}"
        );
        // The same sequence while this crate hands over is taken.
        let taken = handing_off(|| Compact::<Pod>::deserialize(forged())).unwrap();
        assert_eq!(taken.meta().name.as_deref(), Some("p"));
        assert!(!HANDING_OFF.get(), "closed again after the hand-off");
    }

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

    #[cfg(feature = "zstd")]
    #[test]
    fn zstd_storage_keeps_the_same_bytes_in_less_memory() {
        let big = POD.replace(
            "\"phase\":\"Running\"",
            &format!("\"message\":\"{}\"", "ab".repeat(2000)),
        );
        let plain: Compact<Pod> = serde_json::from_str(&big).unwrap();
        let packed: Compact<Pod, Zstd> = serde_json::from_str(&big).unwrap();
        assert_eq!(packed.json(), big.as_str());
        assert_eq!(packed.meta(), plain.meta());
        assert_eq!(packed.decode().unwrap(), plain.decode().unwrap());
        assert_eq!(serde_json::to_string(&packed).unwrap(), big);
        assert!(
            packed.stored_len() * 4 < plain.stored_len(),
            "{}",
            packed.stored_len()
        );
        // Tiny objects that do not compress are kept as they are.
        let tiny: Compact<Pod, Zstd> = serde_json::from_str("{}").unwrap();
        assert_eq!((tiny.json(), tiny.stored_len()), ("{}".into(), 6));
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
