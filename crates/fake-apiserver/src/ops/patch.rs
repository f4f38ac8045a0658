//! The PATCH bodies the server understands: JSON merge patch (RFC 7386; strategic merge
//! patch is treated as one, which is exact for maps and replaces lists whole) and JSON patch
//! (RFC 6902, with `test` operations, which finalizer helpers rely on for safe removal).

use serde_json::{Value, json};

use crate::status::ApiError;

/// A parsed PATCH body.
#[derive(Debug, Clone)]
pub(crate) enum Patch {
    /// `application/merge-patch+json` and `application/strategic-merge-patch+json`.
    Merge(Value),
    /// `application/json-patch+json`.
    Json(json_patch::Patch),
}

impl Patch {
    /// Parses `body` as the patch type `media` names, with the real server's errors: 415
    /// for a type it does not take, 400 for a body that is not that type.
    pub(crate) fn parse(media: &str, body: &[u8]) -> Result<Self, ApiError> {
        match media {
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                let value: Value = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                if !value.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                Ok(Self::Merge(value))
            }
            "application/json-patch+json" => serde_json::from_slice(body)
                .map(Self::Json)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}"))),
            _ => Err(ApiError::unsupported_patch_type()),
        }
    }

    /// The patched object. A JSON patch whose `test` fails, or whose path does not exist,
    /// is the real server's bare 422.
    pub(crate) fn apply(&self, mut target: Value) -> Result<Value, ApiError> {
        match self {
            Self::Merge(patch) => {
                merge(&mut target, patch);
                Ok(target)
            }
            Self::Json(patch) => {
                json_patch::patch(&mut target, patch).map_err(|_| ApiError::patch_rejected())?;
                Ok(target)
            }
        }
    }
}

/// RFC 7386 JSON merge patch.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let target = target.as_object_mut().expect("made an object");
    for (k, v) in patch {
        if v.is_null() {
            target.remove(k);
        } else {
            merge(target.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_patch(ops: Value) -> Patch {
        Patch::parse("application/json-patch+json", ops.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn a_json_patch_test_guards_the_change() {
        let object = json!({"metadata": {"finalizers": ["a", "b"]}});
        let remove_a = |expected: Value| {
            json_patch(json!([
                {"op": "test", "path": "/metadata/finalizers", "value": expected},
                {"op": "remove", "path": "/metadata/finalizers/0"},
            ]))
        };
        let patched = remove_a(json!(["a", "b"])).apply(object.clone()).unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["b"]));
        let stale = remove_a(json!(["a"])).apply(object).unwrap_err();
        assert_eq!(stale.code, 422);
    }

    #[test]
    fn bodies_are_checked_against_their_type() {
        let not_a_list = Patch::parse("application/json-patch+json", b"{}").unwrap_err();
        assert_eq!(not_a_list.code, 400);
        let not_an_object = Patch::parse("application/merge-patch+json", b"[1]").unwrap_err();
        assert_eq!(not_an_object.code, 400);
        let yaml = Patch::parse("application/yaml", b"a: 1").unwrap_err();
        assert_eq!(yaml.code, 415);
    }

    #[test]
    fn merge_patch_removes_nulls_and_merges_maps() {
        let mut target = json!({"a": {"b": 1, "c": 2}, "d": [1, 2]});
        merge(&mut target, &json!({"a": {"b": null, "e": 3}, "d": [3]}));
        assert_eq!(target, json!({"a": {"c": 2, "e": 3}, "d": [3]}));
    }
}
