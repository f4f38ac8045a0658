//! Managed fields: who wrote which fields, as the server records it in `managedFields`.

use serde_json::{Map, Value, json};

/// The managed-fields set of an object, in the `FieldsV1` shape (`f:` per field, `.` for
/// each nested map).
fn fields_v1(value: &Value) -> Value {
    fn set(value: &Value, top: bool) -> Value {
        let mut out = Map::new();
        if let Value::Object(map) = value {
            if !top {
                out.insert(".".into(), json!({}));
            }
            for (k, v) in map {
                out.insert(format!("f:{k}"), set(v, false));
            }
        }
        Value::Object(out)
    }
    let mut owned = Map::new();
    if let Value::Object(map) = value {
        for (k, v) in map {
            match k.as_str() {
                "apiVersion" | "kind" | "status" => {}
                "metadata" => {
                    let mut m = Map::new();
                    for field in ["labels", "annotations"] {
                        if let Some(v) = v.get(field) {
                            m.insert(format!("f:{field}"), set(v, false));
                        }
                    }
                    if !m.is_empty() {
                        owned.insert("f:metadata".into(), Value::Object(m));
                    }
                }
                _ => {
                    owned.insert(format!("f:{k}"), set(v, false));
                }
            }
        }
    }
    Value::Object(owned)
}

/// Records `manager`'s write in `managedFields` (one entry per manager and operation).
pub(super) fn manage(
    value: &mut Value,
    previous: Option<&Value>,
    manager: &str,
    api_version: &str,
    now: &str,
) {
    let fields = fields_v1(value);
    let mut entries: Vec<Value> = previous
        .and_then(|p| p["metadata"]["managedFields"].as_array().cloned())
        .unwrap_or_default();
    entries.retain(|e| e["manager"] != manager || e["operation"] != "Update");
    entries.push(json!({
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }));
    value["metadata"]["managedFields"] = Value::Array(entries);
}
