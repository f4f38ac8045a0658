//! The metadata a compact object parses: everything but `managedFields`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::json_prefix::leading_field;

/// Parses the `metadata` of the JSON object `json` (default when absent), reading no further
/// than its end: `spec` and `status`, which real servers write after it, are not scanned.
pub(super) fn parse_metadata(json: &str) -> serde_json::Result<ObjectMeta> {
    let meta = leading_field::<LeanMeta>(json, "metadata", None)?;
    Ok(meta.unwrap_or_default().into())
}

/// The JSON object `json` without its own `metadata.managedFields` (the key and its value
/// cut out, everything else byte for byte), or `None` when it has none. Reads no further
/// than the end of `managedFields` (the last field of `metadata` as servers write it).
pub(crate) fn without_managed_fields(json: &str) -> serde_json::Result<Option<String>> {
    let Some(meta) = leading_field::<&RawValue>(json, "metadata", None)? else {
        return Ok(None);
    };
    let Some(managed) = leading_field::<&RawValue>(meta.get(), "managedFields", None)? else {
        return Ok(None);
    };
    // Both borrow from `json`: where the value is, by address.
    let start = managed.get().as_ptr() as usize - json.as_ptr() as usize;
    let end = start + managed.get().len();
    let bytes = json.as_bytes();
    let before = |mut at: usize| {
        while at > 0 && bytes[at - 1].is_ascii_whitespace() {
            at -= 1;
        }
        at
    };
    let after = |mut at: usize| {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        at
    };
    // Back over `"managedFields" :` (a key holds no unescaped quote, and this one none at
    // all, escaped or not, since it reads `managedFields`).
    let colon = before(start) - 1;
    let closing = before(colon) - 1;
    let opening = json[..closing].rfind('"').expect("the key's opening quote");
    // With the comma after it, or else the one before it (it was the last field).
    let (cut_from, cut_to) = match after(end) {
        next if bytes.get(next) == Some(&b',') => (opening, next + 1),
        _ => match before(opening) {
            comma if bytes[comma - 1] == b',' => (comma - 1, end),
            _ => (opening, end),
        },
    };
    let mut kept = String::with_capacity(json.len() - (cut_to - cut_from));
    kept.push_str(&json[..cut_from]);
    kept.push_str(&json[cut_to..]);
    Ok(Some(kept))
}

/// `ObjectMeta` without `managedFields` (skipped unparsed).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct LeanMeta {
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
    use serde_json::{Value, json};

    use super::without_managed_fields;

    /// What `without_managed_fields` must give: the same object, its own
    /// `metadata.managedFields` gone.
    fn expected(json: &str) -> Value {
        let mut value: Value = serde_json::from_str(json).unwrap();
        value["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        value
    }

    #[test]
    fn the_objects_own_managed_fields_are_cut_out_wherever_they_are_in_its_metadata() {
        let managed = r#"[{"manager":"kubectl","fieldsV1":{"f:metadata":{"f:labels":{}}}}]"#;
        let spec = r#""spec":{"template":{"metadata":{"managedFields":[{"manager":"m"}]}}}"#;
        for json in [
            format!(r#"{{"metadata":{{"name":"a","managedFields":{managed}}},{spec}}}"#),
            format!(r#"{{"metadata":{{"managedFields":{managed},"name":"a"}},{spec}}}"#),
            format!(
                r#"{{"kind":"Pod","metadata":{{"name":"a","managedFields":{managed},"uid":"u"}}}}"#
            ),
            format!(r#"{{"metadata":{{"managedFields":{managed}}}}}"#),
            format!(
                "{{ \"metadata\" : {{ \"name\" : \"a\" ,\n \"managedFields\" :\t{managed} \n}} }}"
            ),
            format!("{{\"metadata\":{{ \"managed\\u0046ields\" : {managed} , \"name\":\"a\"}}}}"),
        ] {
            let kept = without_managed_fields(&json).unwrap().expect("cut");
            let read: Value = serde_json::from_str(&kept).unwrap_or_else(|e| panic!("{kept}: {e}"));
            assert_eq!(read, expected(&json), "{json}");
            assert!(!kept.contains("kubectl"), "{kept}");
        }
        // A template's own are data: kept, as the protobuf path keeps them.
        let json = format!(r#"{{"metadata":{{"name":"a","managedFields":{managed}}},{spec}}}"#);
        let read: Value =
            serde_json::from_str(&without_managed_fields(&json).unwrap().unwrap()).unwrap();
        assert_eq!(
            read["spec"]["template"]["metadata"]["managedFields"],
            json!([{"manager": "m"}])
        );
    }

    #[test]
    fn nothing_to_cut_and_bad_input() {
        for json in [r#"{"metadata":{"name":"a"}}"#, r#"{"spec":{}}"#, "{}"] {
            assert_eq!(without_managed_fields(json).unwrap(), None, "{json}");
        }
        assert!(without_managed_fields("[1]").is_err());
        assert!(without_managed_fields(r#"{"metadata":{"managedFields":[}}"#).is_err());
    }
}
