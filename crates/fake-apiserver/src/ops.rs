//! What each write verb does to the stored state, as the real server does it: uid,
//! creationTimestamp, generation, managedFields and resourceVersion are maintained by the
//! server; a stale resourceVersion is a 409; finalizers and grace periods defer a delete.
//! The HTTP handlers and the programmatic API both come through here.

use std::{
    sync::{Arc, Weak},
    time::{Duration, SystemTime},
};

use serde_json::{Map, Value, json};

use crate::{
    Inner,
    registry::{Gvr, ResourceType},
    status::{ApiError, delete_success},
    storage::{EventType, ObjKey, Storage, StoredObject},
    util::rfc3339,
};

/// How a delete ended.
pub(crate) enum Deleted {
    /// Gone now: answered with a `Success` status.
    Now(Value),
    /// Deferred (finalizers or a grace period): answered with the object.
    Deferred(Arc<StoredObject>),
}

/// Options of a DELETE (from the query or a `DeleteOptions` body).
#[derive(Debug, Default, Clone)]
pub(crate) struct DeleteOptions {
    pub(crate) grace_period_seconds: Option<u64>,
    pub(crate) precondition_uid: Option<String>,
    pub(crate) precondition_resource_version: Option<String>,
}

fn ty_of(storage: &Storage, gvr: &Gvr) -> Result<Arc<ResourceType>, ApiError> {
    storage
        .resource(gvr)
        .map(|r| r.ty.clone())
        .ok_or_else(ApiError::not_found_path)
}

/// Checks the namespace against the type's scope and returns the object's key.
fn key_for(ty: &ResourceType, namespace: Option<&str>, name: &str) -> Result<ObjKey, ApiError> {
    match (ty.namespaced, namespace) {
        (true, Some(ns)) => Ok(ObjKey::new(Some(ns), name)),
        (false, None) => Ok(ObjKey::new(None, name)),
        (true, None) => Err(ApiError::bad_request(format!(
            "{} is namespaced: a namespace is required",
            ty.gvr.resource
        ))),
        (false, Some(_)) => Err(ApiError::not_found_path()),
    }
}

/// `metadata.name` rules: a lowercase RFC 1123 subdomain.
fn check_name(ty: &ResourceType, name: &str) -> Result<(), ApiError> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.len() <= 253 && name.split('.').all(label_ok) {
        return Ok(());
    }
    let detail = format!(
        "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    );
    Err(ApiError::invalid(
        &ty.kind,
        name,
        "metadata.name",
        "FieldValueInvalid",
        &detail,
    ))
}

fn meta_mut(value: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    let meta = value
        .as_object_mut()
        .expect("checked")
        .entry("metadata")
        .or_insert_with(|| json!({}));
    meta.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

fn check_type(ty: &ResourceType, value: &Value) -> Result<(), ApiError> {
    let api_version = ty.gvr.api_version();
    match (value["kind"].as_str(), value["apiVersion"].as_str()) {
        (Some(kind), _) if kind != ty.kind => Err(ApiError::bad_request(format!(
            "the kind of the object ({kind}) does not match the resource ({}), expected kind {}",
            ty.gvr.resource, ty.kind
        ))),
        (_, Some(v)) if v != api_version => Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({api_version})"
        ))),
        _ => Ok(()),
    }
}

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
fn manage(
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

impl Inner {
    pub(crate) fn get(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let storage = self.storage.lock();
        Ok(current(&storage, gvr, namespace, name)?.2)
    }

    pub(crate) fn create(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        mut value: Value,
        manager: &str,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let mut storage = self.storage.lock();
        let ty = ty_of(&storage, gvr)?;
        check_type(&ty, &value)?;
        let meta = meta_mut(&mut value)?;
        // The namespace comes from the URL; a different one in the body is an error.
        match (meta.get("namespace").and_then(Value::as_str), namespace) {
            (Some(body), Some(url)) if !body.is_empty() && body != url => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {}
        }
        match namespace {
            Some(ns) if ty.namespaced => {
                meta.insert("namespace".into(), ns.into());
            }
            _ => {
                meta.remove("namespace");
            }
        }
        let name = match (
            meta.get("name").and_then(Value::as_str),
            meta.get("generateName").and_then(Value::as_str),
        ) {
            (Some(name), _) if !name.is_empty() => name.to_owned(),
            (_, Some(prefix)) if !prefix.is_empty() => {
                format!("{prefix}{}", self.rng.lock().suffix(5))
            }
            _ => {
                return Err(ApiError::invalid(
                    &ty.kind,
                    "",
                    "metadata.name",
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                ));
            }
        };
        check_name(&ty, &name)?;
        let key = key_for(&ty, namespace.filter(|_| ty.namespaced), &name)?;
        if let Some(ns) = key_namespace(&key) {
            let namespaces = Gvr::core("namespaces");
            let exists = storage
                .resource(&namespaces)
                .is_some_and(|r| r.get(&ObjKey::new(None, ns)).is_some());
            if !exists {
                return Err(ApiError::not_found("namespaces", ns));
            }
        }
        let store = storage.resource(gvr).expect("type exists");
        if store.get(&key).is_some() {
            return Err(ApiError::already_exists(&gvr.resource, &name));
        }
        let revision = storage.next_revision();
        let now = rfc3339(SystemTime::now());
        let uid = self.rng.lock().uuid();
        let meta = meta_mut(&mut value)?;
        meta.insert("name".into(), name.into());
        meta.insert("uid".into(), uid.into());
        meta.insert("resourceVersion".into(), revision.to_string().into());
        meta.insert("creationTimestamp".into(), now.clone().into());
        for server_owned in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
        ] {
            meta.remove(server_owned);
        }
        if value.get("spec").is_some() {
            value["metadata"]["generation"] = json!(1);
        }
        manage(&mut value, None, manager, &ty.gvr.api_version(), &now);
        let object = Arc::new(StoredObject::new(value, revision));
        storage.commit(gvr, EventType::Added, object.clone());
        Ok(object)
    }

    /// Replaces the object (PUT). `value.metadata.resourceVersion`, when set, must be current.
    pub(crate) fn update(
        self: &Arc<Self>,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        value: Value,
        manager: &str,
    ) -> Result<Arc<StoredObject>, ApiError> {
        self.write_existing(gvr, namespace, name, manager, |_, _| Ok(value))
    }

    /// Applies a JSON merge patch (RFC 7386) to the object.
    pub(crate) fn merge_patch(
        self: &Arc<Self>,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        patch: Value,
        manager: &str,
    ) -> Result<Arc<StoredObject>, ApiError> {
        if !patch.is_object() {
            return Err(ApiError::bad_request("a merge patch must be a JSON object"));
        }
        self.write_existing(gvr, namespace, name, manager, |current, _| {
            let mut merged = current;
            merge(&mut merged, &patch);
            Ok(merged)
        })
    }

    /// The shared path of update and patch: `change` makes the new object from the current
    /// one (with kind and apiVersion).
    fn write_existing(
        self: &Arc<Self>,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        manager: &str,
        change: impl FnOnce(Value, &ResourceType) -> Result<Value, ApiError>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let mut storage = self.storage.lock();
        let (ty, _, current) = current(&storage, gvr, namespace, name)?;
        let current_value = current.value(&ty.kind, &ty.gvr.api_version());
        let mut value = change(current_value.clone(), &ty)?;
        check_type(&ty, &value)?;
        let meta = meta_mut(&mut value)?;
        if let Some(body_name) = meta.get("name").and_then(Value::as_str)
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if let Some(rv) = meta.get("resourceVersion").and_then(Value::as_str)
            && rv != current.resource_version.to_string()
        {
            return Err(ApiError::conflict(&gvr.resource, name));
        }
        // Fields only the server sets are carried over from the stored object.
        let old_meta = &current_value["metadata"];
        for owned in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
        ] {
            match old_meta.get(owned) {
                Some(v) => {
                    meta.insert(owned.into(), v.clone());
                }
                None => {
                    meta.remove(owned);
                }
            }
        }
        meta.insert(
            "resourceVersion".into(),
            current.resource_version.to_string().into(),
        );
        if value.get("spec") != current_value.get("spec") {
            let generation = current_value["metadata"]["generation"]
                .as_i64()
                .unwrap_or(0);
            value["metadata"]["generation"] = json!(generation + 1);
        }
        if value == current_value {
            return Ok(current); // a no-op write does not bump the resourceVersion
        }
        let revision = storage.next_revision();
        let now = rfc3339(SystemTime::now());
        manage(
            &mut value,
            Some(&current_value),
            manager,
            &ty.gvr.api_version(),
            &now,
        );
        value["metadata"]["resourceVersion"] = revision.to_string().into();
        let object = Arc::new(StoredObject::new(value, revision));
        if object.meta.deleting && !object.meta.has_finalizers {
            // The last finalizer is gone: the deferred deletion completes.
            storage.commit(gvr, EventType::Deleted, object.clone());
        } else {
            storage.commit(gvr, EventType::Modified, object.clone());
        }
        Ok(object)
    }

    pub(crate) fn delete(
        self: &Arc<Self>,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let mut storage = self.storage.lock();
        let (ty, key, current) = current(&storage, gvr, namespace, name)?;
        let precondition_failed = options
            .precondition_uid
            .as_ref()
            .is_some_and(|uid| *uid != current.meta.uid)
            || options
                .precondition_resource_version
                .as_ref()
                .is_some_and(|rv| *rv != current.resource_version.to_string());
        if precondition_failed {
            return Err(ApiError::conflict(&gvr.resource, name));
        }
        let grace = options.grace_period_seconds.unwrap_or(0);
        let revision = storage.next_revision();
        let mut value = stamped(&current, &ty, revision);
        if current.meta.has_finalizers || grace > 0 {
            if current.meta.deleting {
                return Ok(Deleted::Deferred(current)); // already on its way out
            }
            let at = SystemTime::now() + Duration::from_secs(grace);
            value["metadata"]["deletionTimestamp"] = rfc3339(at).into();
            value["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            let object = Arc::new(StoredObject::new(value, revision));
            storage.commit(gvr, EventType::Modified, object.clone());
            if grace > 0 {
                self.finish_after_grace(gvr.clone(), key, Duration::from_secs(grace));
            }
            return Ok(Deleted::Deferred(object));
        }
        let object = Arc::new(StoredObject::new(value, revision));
        let uid = object.meta.uid.clone();
        storage.commit(gvr, EventType::Deleted, object);
        Ok(Deleted::Now(delete_success(&gvr.resource, name, &uid)))
    }

    /// After a grace period, removes the object unless finalizers still hold it (the job
    /// the kubelet does for pods on a real cluster).
    fn finish_after_grace(self: &Arc<Self>, gvr: Gvr, key: ObjKey, grace: Duration) {
        let weak: Weak<Inner> = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let Some(inner) = weak.upgrade() else { return };
            let mut storage = inner.storage.lock();
            let Some(store) = storage.resource(&gvr) else {
                return;
            };
            let Some(current) = store.get(&key).cloned() else {
                return;
            };
            if !current.meta.deleting || current.meta.has_finalizers {
                return;
            }
            let ty = store.ty.clone();
            let revision = storage.next_revision();
            let value = stamped(&current, &ty, revision);
            storage.commit(
                &gvr,
                EventType::Deleted,
                Arc::new(StoredObject::new(value, revision)),
            );
        });
    }
}

/// The type, key and current object at `namespace`/`name`, or the real server's 404.
fn current(
    storage: &Storage,
    gvr: &Gvr,
    namespace: Option<&str>,
    name: &str,
) -> Result<(Arc<ResourceType>, ObjKey, Arc<StoredObject>), ApiError> {
    let ty = ty_of(storage, gvr)?;
    let key = key_for(&ty, namespace, name)?;
    let store = storage.resource(gvr).expect("type exists");
    let object = store.get(&key).cloned();
    let object = object.ok_or_else(|| ApiError::not_found(&gvr.resource, name))?;
    Ok((ty, key, object))
}

/// `object` as a value stamped with `revision`: the final state a delete commits.
fn stamped(object: &StoredObject, ty: &ResourceType, revision: u64) -> Value {
    let mut value = object.value(&ty.kind, &ty.gvr.api_version());
    value["metadata"]["resourceVersion"] = revision.to_string().into();
    value
}

fn key_namespace(key: &ObjKey) -> Option<&str> {
    (!key.namespace.is_empty()).then_some(key.namespace.as_str())
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
