//! The PATCH bodies the server understands: JSON merge patch (RFC 7386), strategic merge
//! patch for built-in types (see [`crate::strategic`]; custom resources refuse it with the
//! real server's 415) and JSON patch (RFC 6902, with `test` operations, which finalizer
//! helpers rely on for safe removal).

use serde_json::{Value, json};

use crate::{
    registry::ResourceType,
    status::ApiError,
    strategic::{self, Schema, StrategicError},
};

/// A parsed PATCH body.
#[derive(Debug, Clone)]
pub(crate) enum Patch {
    /// `application/merge-patch+json`.
    Merge(Value),
    /// `application/strategic-merge-patch+json`, with the patch metadata of the object's kind.
    Strategic(Value, Schema),
    /// `application/json-patch+json`.
    Json(json_patch::Patch),
}

impl Patch {
    /// Parses `body` as the patch type `media` names, for an object of type `ty`, with the
    /// real server's errors: 415 for a type it does not take (worded as the real server
    /// words it for built-ins and for custom resources), 400 for a body that is not that type.
    pub(crate) fn parse(media: &str, body: &[u8], ty: &ResourceType) -> Result<Self, ApiError> {
        let schema = Schema::for_kind(&ty.gvr.api_version(), &ty.kind);
        match (media, schema) {
            ("application/merge-patch+json", _) => object_body(body).map(Self::Merge),
            ("application/strategic-merge-patch+json", Some(schema)) => {
                object_body(body).map(|body| Self::Strategic(body, schema))
            }
            ("application/json-patch+json", _) => serde_json::from_slice(body)
                .map(Self::Json)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}"))),
            (_, None) => Err(ApiError::unsupported_custom_patch_type()),
            (_, Some(_)) => Err(ApiError::unsupported_patch_type()),
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
            Self::Strategic(patch, schema) => strategic::apply(target, patch.clone(), *schema)
                .map_err(|e| match e {
                    StrategicError::BadRequest(message) => ApiError::bad_request(message),
                    StrategicError::Unprocessable(message) => {
                        ApiError::patch_rejected().with_cause("UnexpectedServerResponse", message)
                    }
                    StrategicError::Failed(message) => ApiError::internal(message),
                }),
            Self::Json(patch) => {
                json_patch::patch(&mut target, patch).map_err(|_| ApiError::patch_rejected())?;
                Ok(target)
            }
        }
    }
}

/// A merge patch body: a JSON object.
fn object_body(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ));
    }
    Ok(value)
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

    fn configmaps() -> ResourceType {
        crate::registry::builtins()
            .into_iter()
            .find(|t| t.kind == "ConfigMap")
            .unwrap()
    }

    fn json_patch(ops: Value) -> Patch {
        Patch::parse(
            "application/json-patch+json",
            ops.to_string().as_bytes(),
            &configmaps(),
        )
        .unwrap()
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
        let cm = configmaps();
        let not_a_list = Patch::parse("application/json-patch+json", b"{}", &cm).unwrap_err();
        assert_eq!(not_a_list.code, 400);
        let not_an_object = Patch::parse("application/merge-patch+json", b"[1]", &cm).unwrap_err();
        assert_eq!(not_an_object.code, 400);
        let yaml = Patch::parse("application/yaml", b"a: 1", &cm).unwrap_err();
        assert_eq!(yaml.code, 415);
        let widgets =
            ResourceType::namespaced(crate::Gvr::new("example.com", "v1", "widgets"), "Widget");
        let custom =
            Patch::parse("application/strategic-merge-patch+json", b"{}", &widgets).unwrap_err();
        assert_eq!(custom.code, 415);
        assert!(
            custom.body["message"]
                .as_str()
                .unwrap()
                .contains("application/merge-patch+json")
        );
    }

    #[test]
    fn merge_patch_removes_nulls_and_merges_maps() {
        let mut target = json!({"a": {"b": 1, "c": 2}, "d": [1, 2]});
        merge(&mut target, &json!({"a": {"b": null, "e": 3}, "d": [3]}));
        assert_eq!(target, json!({"a": {"c": 2, "e": 3}, "d": [3]}));
    }
}
