//! Reading one field near the start of a JSON object without scanning the rest of it.
//!
//! The API server writes `metadata` before `spec`/`status` (objects) and before `items`
//! (lists), so an object's metadata or a list's continue token can be read at the cost of
//! the bytes before them.

use std::{borrow::Cow, fmt, marker::PhantomData};

use serde::{
    Deserialize, Deserializer,
    de::{IgnoredAny, MapAccess, Visitor},
};

/// The value of the top-level field `key` of the JSON object `json`, read without scanning
/// past it. `Ok(None)` when the object has no such field, or when the field `stop` comes
/// first. An error when `json` is not an object or the field's value does not decode.
/// `T` may borrow from `json` (a `&RawValue`: where the field's value is).
pub(crate) fn leading_field<'de, T: Deserialize<'de>>(
    json: &'de str,
    key: &str,
    stop: Option<&str>,
) -> serde_json::Result<Option<T>> {
    /// What the visitor ended with.
    enum Outcome<T> {
        Found(T),
        Stopped,
    }

    struct Fields<'k, T> {
        key: &'k str,
        stop: Option<&'k str>,
        outcome: &'k mut Option<Outcome<T>>,
        value: PhantomData<T>,
    }

    impl<'de, T: Deserialize<'de>> Visitor<'de> for Fields<'_, T> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(name) = map.next_key::<Cow<'de, str>>()? {
                if name == self.key {
                    *self.outcome = Some(Outcome::Found(map.next_value()?));
                } else if Some(name.as_ref()) == self.stop {
                    *self.outcome = Some(Outcome::Stopped);
                } else {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                // Done: leave without reading further (this error is dropped).
                return Err(serde::de::Error::custom("done"));
            }
            Ok(())
        }
    }

    let mut outcome = None;
    let mut de = serde_json::Deserializer::from_str(json);
    let read = (&mut de).deserialize_map(Fields {
        key,
        stop,
        outcome: &mut outcome,
        value: PhantomData,
    });
    match (read, outcome) {
        (_, Some(Outcome::Found(value))) => Ok(Some(value)),
        (_, Some(Outcome::Stopped)) => Ok(None),
        (Ok(()), None) => de.end().map(|()| None),
        (Err(error), None) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_field_and_stops_there() {
        // Everything after the field is never read: here it is not even JSON.
        let json = r#"{"kind":"X","metadata":{"name":"a"},"spec": not json"#;
        let found: Option<serde_json::Value> = leading_field(json, "metadata", None).unwrap();
        assert_eq!(found.unwrap()["name"], "a");
    }

    #[test]
    fn missing_stopped_and_bad_input() {
        let none: Option<u32> = leading_field(r#"{"a":1}"#, "b", None).unwrap();
        assert_eq!(none, None);
        let stopped: Option<u32> =
            leading_field(r#"{"items":[],"b":1}"#, "b", Some("items")).unwrap();
        assert_eq!(stopped, None);
        assert!(leading_field::<u32>(r#"{"b":"x"}"#, "b", None).is_err());
        assert!(leading_field::<u32>("[1]", "b", None).is_err());
        assert!(leading_field::<u32>(r#"{"a":1} x"#, "b", None).is_err());
    }
}
