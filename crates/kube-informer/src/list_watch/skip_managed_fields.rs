//! JSON read with `metadata.managedFields` passed over unbuilt: a serde `Deserializer`
//! wrapper ([`SkipManagedFields`]) that hides the key `managedFields` of every `metadata`
//! object from the type being built, and skips its value as serde_json skips (scanned,
//! nothing allocated). What protobuf's length prefix does for free, done for JSON: a
//! typical object's managed fields are a quarter of its bytes, and each entry's field set
//! would otherwise become a tree of `serde_json::Value`s only to be dropped.
//!
//! Every other value passes through untouched: the wrapper forwards each call to the inner
//! deserializer and wraps what it hands out (maps, sequences, options, newtypes) so that a
//! `metadata` at any depth (a watch event's object, a list's items) is found.

use std::{borrow::Cow, fmt};

use serde::de::{
    self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
    value::{BorrowedStrDeserializer, StringDeserializer},
};

/// `D`, with `managedFields` left out of every `metadata` object.
pub(crate) struct SkipManagedFields<D> {
    inner: D,
    /// This value is an object's `metadata`.
    metadata: bool,
}

impl<D> SkipManagedFields<D> {
    pub(crate) fn new(inner: D) -> Self {
        SkipManagedFields {
            inner,
            metadata: false,
        }
    }
}

/// Forwards `deserialize_*` methods, the visitor wrapped.
macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method($($arg,)* Wrap { visitor, metadata: self.metadata })
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
        deserialize_newtype_struct(name: &'static str);
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A visitor whose maps, sequences and nested values are wrapped in turn.
struct Wrap<V> {
    visitor: V,
    metadata: bool,
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
        let metadata = self.metadata;
        self.visitor
            .visit_some(SkipManagedFields { inner, metadata })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, inner: D) -> Result<V::Value, D::Error> {
        let metadata = self.metadata;
        self.visitor
            .visit_newtype_struct(SkipManagedFields { inner, metadata })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_seq(Seq(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(Map {
            map,
            is_metadata: self.metadata,
            next_is_metadata: false,
        })
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_enum(data)
    }
}

/// A seed whose deserializer is wrapped.
struct Seed<S> {
    seed: S,
    metadata: bool,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, inner: D) -> Result<S::Value, D::Error> {
        let metadata = self.metadata;
        self.seed.deserialize(SkipManagedFields { inner, metadata })
    }
}

struct Seq<A>(A);

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Seq<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Seed {
            seed,
            metadata: false,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

struct Map<A> {
    map: A,
    /// This map is an object's `metadata`: its `managedFields` are skipped.
    is_metadata: bool,
    /// The value about to be read is a `metadata`.
    next_is_metadata: bool,
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
            if self.is_metadata && key == "managedFields" {
                self.map.next_value::<IgnoredAny>()?;
                continue;
            }
            self.next_is_metadata = key == "metadata";
            return match key {
                Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
                Cow::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        let metadata = std::mem::take(&mut self.next_is_metadata);
        self.map.next_value_seed(Seed { seed, metadata })
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

    use super::SkipManagedFields;

    fn read<T: for<'de> Deserialize<'de>>(json: &str) -> T {
        let mut de = serde_json::Deserializer::from_str(json);
        let value = T::deserialize(SkipManagedFields::new(&mut de)).unwrap();
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
        let pod: Pod =
            read(r#"{"metadata":{"na\u006de":"p","managed\u0046ields":[{"manager":"m"}]}}"#);
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert_eq!(pod.metadata.managed_fields, None);
        // Malformed JSON inside the skipped value is still an error.
        let mut de = serde_json::Deserializer::from_str(r#"{"metadata":{"managedFields":[{]}}"#);
        assert!(Pod::deserialize(SkipManagedFields::new(&mut de)).is_err());
    }
}
