//! Create, update and patch: the server-owned metadata, the status subresource rules, and
//! the namespace rules of a create (it must exist and must not be terminating).

use std::{sync::Arc, time::SystemTime};

use serde_json::{Value, json};

use super::{
    Part, Patch, Writer, check_name, check_type, current, defaults::default_fields, key_for,
    key_namespace, meta_mut, ty_of,
};
use crate::{
    Inner, crds, managed,
    registry::{Gvr, ResourceType},
    status::ApiError,
    storage::{EventType, ObjKey, Storage, StoredObject},
    util::rfc3339,
};

/// Metadata only the server sets: taken from the stored object on every write.
const SERVER_OWNED: [&str; 8] = [
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "managedFields",
];

/// The status a new object starts with when `status` is a subresource (what the real
/// server's create strategies leave).
fn initial_status(ty: &ResourceType, value: &Value) -> Value {
    match (ty.gvr.group.as_str(), ty.gvr.resource.as_str()) {
        ("", "pods") => json!({"phase": "Pending", "qosClass": "BestEffort"}),
        ("", "namespaces") => json!({"phase": "Active"}),
        ("", "services") => json!({"loadBalancer": {}}),
        ("apiextensions.k8s.io", "customresourcedefinitions") => crds::initial_status(value),
        _ => json!({}),
    }
}

/// Whether `ty` is one of Kubernetes' own kinds, not a custom resource: the core group, a
/// group without a dot (`apps`, `batch`), or one under `k8s.io` (where a custom resource
/// needs Kubernetes' own approval).
fn built_in(ty: &ResourceType) -> bool {
    let group = ty.gvr.group.as_str();
    !group.contains('.') || group.ends_with(".k8s.io") || group == "k8s.io"
}

/// Whether the real server counts spec changes in `metadata.generation` for `gvr` (not
/// for Namespaces and Services, whose specs it does not version).
fn has_generation(gvr: &Gvr) -> bool {
    *gvr != Gvr::core("namespaces") && *gvr != Gvr::core("services")
}

/// The label the real server puts on every Namespace (recorded as the writer's field).
fn namespace_label(value: &mut Value, name: &str) {
    value["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
}

/// The `kubernetes` finalizer the real server defaults into every Namespace, removed by
/// the namespace controller once the namespace is empty (a default: no managed field, no
/// generation).
fn namespace_finalizer(value: &mut Value) {
    if value["spec"]["finalizers"].as_array().is_none() {
        value["spec"]["finalizers"] = json!(["kubernetes"]);
    }
}

/// Whether `namespace` exists and is not being deleted, as the real server's create checks
/// it.
fn check_namespace(
    storage: &Storage,
    resource: &str,
    name: &str,
    namespace: &str,
) -> Result<(), ApiError> {
    let namespaces = storage.resource(&Gvr::core("namespaces"));
    match namespaces.and_then(|r| r.get(&ObjKey::new(None, namespace))) {
        None => Err(ApiError::not_found(&Gvr::core("namespaces"), namespace)),
        Some(ns) if ns.meta.deleting => {
            Err(ApiError::namespace_terminating(resource, name, namespace))
        }
        Some(_) => Ok(()),
    }
}

impl Inner {
    pub(crate) fn create(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        value: Value,
        manager: &str,
        part: Part,
    ) -> Result<Arc<StoredObject>, ApiError> {
        self.create_as(gvr, namespace, value, Writer::Update(manager), part)
    }

    /// [`Self::create`], with ownership recorded as `writer` says.
    pub(super) fn create_as(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        mut value: Value,
        writer: Writer<'_>,
        part: Part,
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
            check_namespace(&storage, &gvr.resource, &name, ns)?;
        }
        let store = storage.resource(gvr).expect("type exists");
        if store.get(&key).is_some() {
            return Err(ApiError::already_exists(gvr, &name));
        }
        let revision = storage.next_revision();
        let now = rfc3339(SystemTime::now());
        let uid = self.rng.lock().uuid();
        let meta = meta_mut(&mut value)?;
        meta.insert("name".into(), name.clone().into());
        meta.insert("uid".into(), uid.into());
        meta.insert("resourceVersion".into(), revision.to_string().into());
        meta.insert("creationTimestamp".into(), now.clone().into());
        for server_owned in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            meta.remove(server_owned);
        }
        if let Writer::Update(_) = writer {
            meta.remove("managedFields");
        }
        let namespace = *gvr == Gvr::core("namespaces");
        if namespace {
            namespace_label(&mut value, &name);
        }
        // The programmatic API may set a status; without one, it gets the server's. A
        // custom resource's status is never taken from a create, and none is made (the real
        // server stores none); a built-in kind's starts as its type's (`{}` at least).
        if ty.status_subresource && (part != Part::All || value.get("status").is_none()) {
            match built_in(&ty) {
                true => value["status"] = initial_status(&ty, &value),
                false => {
                    if let Some(object) = value.as_object_mut() {
                        object.remove("status");
                    }
                }
            }
        }
        default_fields(&ty, &mut value, true);
        if *gvr == Gvr::core("services") {
            super::services::allocate(&storage, &mut self.rng.lock(), &mut value);
        }
        if value.get("spec").is_some() && has_generation(gvr) {
            value["metadata"]["generation"] = json!(1);
        }
        if let Writer::Update(manager) = writer {
            let scope = part.scope();
            managed::record_update(&mut value, None, manager, &gvr.api_version(), &now, scope);
        }
        if namespace {
            namespace_finalizer(&mut value);
        }
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
        part: Part,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let writer = Writer::Update(manager);
        self.write_existing(gvr, namespace, name, writer, part, |_| Ok(value))
    }

    /// Applies a merge or JSON patch to the object.
    pub(crate) fn patch(
        self: &Arc<Self>,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
        manager: &str,
        part: Part,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let writer = Writer::Update(manager);
        self.write_existing(gvr, namespace, name, writer, part, |current| {
            patch.apply(current)
        })
    }

    /// The shared path of update and patch: `change` makes the new object from the current
    /// one (with kind and apiVersion).
    pub(super) fn write_existing(
        self: &Arc<Self>,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        writer: Writer<'_>,
        part: Part,
        change: impl FnOnce(Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let mut storage = self.storage.lock();
        let (ty, _, current) = current(&storage, gvr, namespace, name)?;
        let current_value = current.value(&ty.kind, &ty.gvr.api_version());
        let mut value = change(current_value.clone())?;
        // After the other part is restored: a `/status` write is checked with its spec.
        keep_other_part(&ty, part, &mut value, &current_value);
        if *gvr == Gvr::core("services") {
            super::services::keep_allocated(&mut value, &current_value);
        }
        default_fields(&ty, &mut value, false);
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
            return Err(ApiError::conflict(gvr, name));
        }
        let old_meta = &current_value["metadata"];
        for owned in SERVER_OWNED {
            if owned == "managedFields" && writer == Writer::Recorded {
                continue;
            }
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
        if value.get("spec") != current_value.get("spec") && has_generation(gvr) {
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
        if let Writer::Update(manager) = writer {
            let (api_version, scope) = (ty.gvr.api_version(), part.scope());
            managed::record_update(
                &mut value,
                Some(&current_value),
                manager,
                &api_version,
                &now,
                scope,
            );
        }
        value["metadata"]["resourceVersion"] = revision.to_string().into();
        let object = Arc::new(StoredObject::new(value, revision));
        if object.meta.deleting && !object.meta.has_finalizers {
            // The last finalizer is gone: the deferred deletion completes. As kube-apiserver
            // answers it: the object as written, at the resourceVersion it was stored with
            // (the delete's own version is in the DELETED event, not in the answer).
            storage.commit(gvr, EventType::Deleted, object.clone());
            self.finish_namespace_if_empty(&mut storage, &object);
            let mut answered: Value = serde_json::from_slice(&object.body).unwrap_or_default();
            answered["metadata"]["resourceVersion"] = current.resource_version.to_string().into();
            return Ok(Arc::new(StoredObject::new(
                answered,
                current.resource_version,
            )));
        } else {
            storage.commit(gvr, EventType::Modified, object.clone());
        }
        Ok(object)
    }
}

/// The status subresource rules: a write to the object keeps the stored status, a write
/// to `/status` keeps the stored spec.
fn keep_other_part(ty: &ResourceType, part: Part, value: &mut Value, stored: &Value) {
    let keep = match part {
        Part::All => return,
        Part::Object if ty.status_subresource => "status",
        Part::Object => return,
        Part::Status => "spec",
    };
    let Some(object) = value.as_object_mut() else {
        return;
    };
    match stored.get(keep) {
        Some(v) => object.insert(keep.to_owned(), v.clone()),
        None => object.remove(keep),
    };
}
