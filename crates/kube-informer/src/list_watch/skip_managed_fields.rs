//! JSON read with `metadata.managedFields` passed over unbuilt: a serde `Deserializer`
//! wrapper ([`SkipManagedFields`]) that hides the key `managedFields` of the object's own
//! `metadata` from the type being built, and skips its value as serde_json skips (scanned,
//! nothing allocated). What protobuf's length prefix does for free, done for JSON: a
//! typical object's managed fields are a quarter of its bytes, and each entry's field set
//! would otherwise become a tree of `serde_json::Value`s only to be dropped.
//!
//! Only the objects' own metadata is touched: the document is an object, or an envelope
//! (a watch event's `object`, a list's `items`) around objects, and the wrapper follows
//! that path only. A `metadata` deeper down — a pod template's, a custom resource's data,
//! an embedded `RawExtension` — is user data and is read whole, as the protobuf path reads
//! it; everything off the path is handed to serde_json unwrapped.

use std::{borrow::Cow, fmt, marker::PhantomData};

use serde::{
    Deserialize,
    de::{
        self, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, SeqAccess,
        Visitor,
        value::{BorrowedStrDeserializer, StringDeserializer},
    },
};
use serde_json::value::RawValue;

use crate::compact::JSON_HAND_OFF;

/// What the document being read is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// One object.
    Object,
    /// A watch event (its `object`) or a list (its `items`).
    Envelope,
}

/// Where a value sits on the path to the objects' metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// An object: its `metadata` is on the path.
    Object,
    /// An event or a list: its `object` and each of its `items` are objects.
    Envelope,
    /// A list's `items`.
    Items,
    /// An object's own metadata: its `managedFields` are skipped.
    Metadata,
    /// Off the path: read as it is.
    Off,
}

impl At {
    /// Where the value of `key` in a map at `self` sits.
    fn field(self, key: &str) -> At {
        match (self, key) {
            (At::Object, "metadata") => At::Metadata,
            (At::Envelope, "object") => At::Object,
            (At::Envelope, "items") => At::Items,
            _ => At::Off,
        }
    }

    /// Where the elements of a sequence at `self` sit.
    fn element(self) -> At {
        match self {
            At::Items => At::Object,
            _ => At::Off,
        }
    }
}

/// `D`, with `managedFields` left out of the objects' own `metadata`.
pub(crate) struct SkipManagedFields<D> {
    inner: D,
    at: At,
}

impl<D> SkipManagedFields<D> {
    pub(crate) fn new(inner: D, shape: Shape) -> Self {
        let at = match shape {
            Shape::Object => At::Object,
            Shape::Envelope => At::Envelope,
        };
        SkipManagedFields { inner, at }
    }
}

/// Forwards `deserialize_*` methods, the visitor wrapped.
macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method($($arg,)* Wrap { visitor, at: self.at })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for SkipManagedFields<D> {
    type Error = D::Error;

    forward! {
        deserialize_any(); deserialize_bool(); deserialize_i8(); deserialize_i16();
        deserialize_i32(); deserialize_i64(); deserialize_i128(); deserialize_u8();
        deserialize_u16(); deserialize_u32(); deserialize_u64(); deserialize_u128();
        deserialize_f32(); deserialize_f64(); deserialize_char(); deserialize_str();
        deserialize_string(); deserialize_bytes(); deserialize_byte_buf();
        deserialize_option(); deserialize_unit(); deserialize_seq(); deserialize_map();
        deserialize_identifier(); deserialize_ignored_any();
        deserialize_unit_struct(name: &'static str);
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
    }

    /// A [`Compact`](crate::compact::Compact) object asks for its JSON whole: handed over
    /// without its own managedFields (as text, [`JSON_HAND_OFF`] first).
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        if name == crate::protobuf::RAW_MESSAGE && self.at == At::Object {
            let json: Box<str> = Box::<RawValue>::deserialize(self.inner)?.into();
            let kept = crate::compact::without_managed_fields(&json)
                .map_err(de::Error::custom)?
                .unwrap_or_else(|| json.into());
            return crate::compact::handing_off(|| {
                visitor.visit_seq(JsonHandOff {
                    marker: true,
                    json: Some(kept),
                    error: PhantomData,
                })
            });
        }
        let at = self.at;
        self.inner
            .deserialize_newtype_struct(name, Wrap { visitor, at })
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A compact object's JSON handed over: [`JSON_HAND_OFF`], then the text.
struct JsonHandOff<E> {
    marker: bool,
    json: Option<String>,
    error: PhantomData<E>,
}

impl<'de, E: de::Error> SeqAccess<'de> for JsonHandOff<E> {
    type Error = E;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, E> {
        if std::mem::take(&mut self.marker) {
            return seed
                .deserialize(JSON_HAND_OFF.into_deserializer())
                .map(Some);
        }
        match self.json.take() {
            Some(json) => seed.deserialize(StringDeserializer::new(json)).map(Some),
            None => Ok(None),
        }
    }
}

/// A visitor whose maps, sequences and nested values are wrapped in turn.
struct Wrap<V> {
    visitor: V,
    at: At,
}

/// Forwards `visit_*` methods of plain values.
macro_rules! plain {
    ($($method:ident($ty:ty);)*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.visitor.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.visitor.expecting(f)
    }

    plain! {
        visit_bool(bool); visit_i8(i8); visit_i16(i16); visit_i32(i32); visit_i64(i64);
        visit_i128(i128); visit_u8(u8); visit_u16(u16); visit_u32(u32); visit_u64(u64);
        visit_u128(u128); visit_f32(f32); visit_f64(f64); visit_char(char);
        visit_str(&str); visit_borrowed_str(&'de str); visit_string(String);
        visit_bytes(&[u8]); visit_borrowed_bytes(&'de [u8]); visit_byte_buf(Vec<u8>);
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<V::Value, D::Error> {
        let at = self.at;
        self.visitor.visit_some(SkipManagedFields { inner, at })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, inner: D) -> Result<V::Value, D::Error> {
        let at = self.at;
        self.visitor
            .visit_newtype_struct(SkipManagedFields { inner, at })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_seq(Seq {
            seq,
            at: self.at.element(),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(Map {
            map,
            at: self.at,
            next: At::Off,
        })
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_enum(data)
    }
}

/// A seed whose deserializer is wrapped while on the path (off it, handed over as it is).
struct Seed<S> {
    seed: S,
    at: At,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, inner: D) -> Result<S::Value, D::Error> {
        match self.at {
            At::Off => self.seed.deserialize(inner),
            at => self.seed.deserialize(SkipManagedFields { inner, at }),
        }
    }
}

struct Seq<A> {
    seq: A,
    /// Where this sequence's elements sit.
    at: At,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Seq<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.seq.next_element_seed(Seed { seed, at: self.at })
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

struct Map<A> {
    map: A,
    /// Where this map sits (`At::Metadata`: its `managedFields` are skipped).
    at: At,
    /// Where the value about to be read sits.
    next: At,
}

/// A key, borrowed from the input where it can be.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(Key)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Map<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.map.next_key_seed(Key)? else {
                return Ok(None);
            };
            if self.at == At::Metadata && key == "managedFields" {
                self.map.next_value::<IgnoredAny>()?;
                continue;
            }
            self.next = self.at.field(&key);
            return match key {
                Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
                Cow::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        let at = std::mem::replace(&mut self.next, At::Off);
        self.map.next_value_seed(Seed { seed, at })
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::api::{ObjectList, WatchEvent};
    use serde::Deserialize;

    use super::{Shape, SkipManagedFields};

    fn read<T: for<'de> Deserialize<'de>>(json: &str) -> T {
        read_as(json, Shape::Envelope)
    }

    fn read_as<T: for<'de> Deserialize<'de>>(json: &str, shape: Shape) -> T {
        let mut de = serde_json::Deserializer::from_str(json);
        let value = T::deserialize(SkipManagedFields::new(&mut de, shape)).unwrap();
        de.end().unwrap();
        value
    }

    const MANAGED: &str = r#"[{"manager":"kubectl","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}}]"#;

    #[test]
    fn managed_fields_are_left_out_of_events_and_lists_and_nothing_else_is() {
        let pod = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","managedFields":{MANAGED},"labels":{{"managedFields":"a label"}}}},"spec":{{"containers":[{{"name":"c"}}]}}}}"#
        );
        let event: WatchEvent<Pod> = read(&format!(r#"{{"type":"ADDED","object":{pod}}}"#));
        let WatchEvent::Added(read_pod) = event else {
            panic!("an ADDED event")
        };
        let mut expected: Pod = serde_json::from_str(&pod).unwrap();
        assert!(expected.metadata.managed_fields.is_some());
        expected.metadata.managed_fields = None;
        // Everything else is as serde_json reads it — a label named managedFields too.
        assert_eq!(read_pod, expected);
        assert_eq!(
            read_pod.metadata.labels.unwrap()["managedFields"],
            "a label"
        );

        let list: ObjectList<ConfigMap> = read(&format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMapList","metadata":{{"resourceVersion":"7"}},"items":[{{"metadata":{{"name":"a","managedFields":{MANAGED}}},"data":{{"managedFields":"x"}}}}]}}"#
        ));
        assert_eq!(list.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(list.items[0].metadata.managed_fields, None);
        assert_eq!(list.items[0].metadata.name.as_deref(), Some("a"));
        assert_eq!(list.items[0].data.as_ref().unwrap()["managedFields"], "x");
    }

    #[test]
    fn escaped_keys_and_bad_json_read_as_serde_json_reads_them() {
        // An escaped key is not borrowed from the input: it still matches.
        let pod: Pod = read_as(
            r#"{"metadata":{"na\u006de":"p","managed\u0046ields":[{"manager":"m"}]}}"#,
            Shape::Object,
        );
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert_eq!(pod.metadata.managed_fields, None);
        // Malformed JSON inside the skipped value is still an error.
        let mut de = serde_json::Deserializer::from_str(r#"{"metadata":{"managedFields":[{]}}"#);
        assert!(Pod::deserialize(SkipManagedFields::new(&mut de, Shape::Object)).is_err());
    }

    /// A `metadata` below the object's own — a pod template's, a custom resource's data, an
    /// embedded object — is user data: read whole, as the protobuf path reads it. Only the
    /// object's own managed fields go, in an object, an event and a list alike.
    #[test]
    fn managed_fields_below_the_objects_own_metadata_are_kept() {
        use k8s_openapi::api::apps::v1::Deployment;
        use kube::api::DynamicObject;

        let deployment = format!(
            r#"{{"metadata":{{"name":"d","managedFields":{MANAGED}}},"spec":{{"selector":{{}},"template":{{"metadata":{{"name":"t","managedFields":{MANAGED}}}}}}}}}"#
        );
        let whole: Deployment = serde_json::from_str(&deployment).unwrap();
        let template = |d: &Deployment| d.spec.as_ref().unwrap().template.metadata.clone();
        assert!(template(&whole).unwrap().managed_fields.is_some());
        let skipped: Deployment = read_as(&deployment, Shape::Object);
        assert_eq!(skipped.metadata.managed_fields, None);
        assert_eq!(
            template(&skipped),
            template(&whole),
            "the template's own are kept"
        );

        // A custom resource whose data holds objects with metadata, and a list of them.
        let custom = format!(
            r#"{{"apiVersion":"example.com/v1","kind":"Backup","metadata":{{"name":"b","managedFields":{MANAGED}}},"spec":{{"objects":[{{"metadata":{{"managedFields":{MANAGED}}}}}],"object":{{"metadata":{{"managedFields":{MANAGED}}}}},"items":[{{"metadata":{{"managedFields":{MANAGED}}}}}]}}}}"#
        );
        let mut expected: DynamicObject = serde_json::from_str(&custom).unwrap();
        expected.metadata.managed_fields = None;
        let event: WatchEvent<DynamicObject> =
            read(&format!(r#"{{"type":"MODIFIED","object":{custom}}}"#));
        let WatchEvent::Modified(object) = event else {
            panic!("a MODIFIED event")
        };
        assert_eq!(object, expected);
        assert_eq!(
            object.data["spec"]["objects"][0]["metadata"]["managedFields"][0]["manager"],
            "kubectl"
        );
        let list: ObjectList<DynamicObject> = read(&format!(
            r#"{{"metadata":{{"resourceVersion":"7"}},"items":[{custom},{custom}]}}"#
        ));
        assert_eq!(list.items, [expected.clone(), expected]);
    }

    /// A compact object read where managedFields are left out keeps its JSON without its
    /// own (less memory, and `decode()` gives none), everything else byte for byte; read
    /// where they are kept, it keeps them.
    #[test]
    fn compact_objects_keep_their_json_without_their_own_managed_fields() {
        use kube::Resource;

        use crate::compact::Compact;

        let pod = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","labels":{{"a":"b"}},"managedFields":{MANAGED}}},"spec":{{"containers":[{{"name":"c"}}]}}}}"#
        );
        let event: WatchEvent<Compact<Pod>> =
            read(&format!(r#"{{"type":"ADDED","object":{pod}}}"#));
        let WatchEvent::Added(compact) = event else {
            panic!("an ADDED event")
        };
        let whole: Compact<Pod> = serde_json::from_str(&pod).unwrap();
        assert!(compact.stored_len() < whole.stored_len());
        assert!(
            !compact.json().contains("managedFields"),
            "{}",
            compact.json()
        );
        let mut expected: Pod = serde_json::from_str(&pod).unwrap();
        expected.metadata.managed_fields = None;
        assert_eq!(compact.decode().unwrap(), expected);
        assert_eq!(compact.meta().labels.as_ref().unwrap()["a"], "b");
        assert!(whole.decode().unwrap().metadata.managed_fields.is_some());

        let list: ObjectList<Compact<Pod>> =
            read(&format!(r#"{{"metadata":{{}},"items":[{pod},{pod}]}}"#));
        assert!(list.items.iter().all(|c| c.decode().unwrap() == expected));
    }

    /// The built-in storages keep a handed-over object's text unread again; any other
    /// storage still gets it through its own `store`, and all keep the same JSON.
    #[test]
    fn every_storage_keeps_the_same_json_handed_over() {
        use std::{
            borrow::Cow,
            sync::atomic::{AtomicUsize, Ordering},
        };

        use serde_json::value::RawValue;

        use crate::compact::{Compact, JsonStorage, Plain};

        static STORED: AtomicUsize = AtomicUsize::new(0);
        enum Counted {}
        impl JsonStorage for Counted {
            fn store(json: Box<RawValue>) -> Box<[u8]> {
                STORED.fetch_add(1, Ordering::Relaxed);
                Plain::store(json)
            }
            fn load(stored: &[u8]) -> Cow<'_, str> {
                Plain::load(stored)
            }
        }

        let pod = format!(
            r#"{{"metadata":{{"name":"p","managedFields":{MANAGED}}},"spec":{{"containers":[]}}}}"#
        );
        let event = format!(r#"{{"type":"ADDED","object":{pod}}}"#);
        fn json<S: JsonStorage>(event: &str) -> String {
            match read::<WatchEvent<Compact<Pod, S>>>(event) {
                WatchEvent::Added(compact) => compact.json().into_owned(),
                _ => panic!("an ADDED event"),
            }
        }
        let plain = json::<Plain>(&event);
        assert_eq!(
            plain,
            r#"{"metadata":{"name":"p"},"spec":{"containers":[]}}"#
        );
        assert_eq!(json::<Counted>(&event), plain);
        assert_eq!(STORED.load(Ordering::Relaxed), 1, "through Counted::store");
        #[cfg(feature = "zstd")]
        assert_eq!(json::<crate::compact::Zstd>(&event), plain);
    }
}
