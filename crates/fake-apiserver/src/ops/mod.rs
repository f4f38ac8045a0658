//! What each write verb does to the stored state, as the real server does it: uid,
//! creationTimestamp, generation, managedFields and resourceVersion are maintained by the
//! server; a stale resourceVersion is a 409; finalizers and grace periods defer a delete.
//! The HTTP handlers and the programmatic API both come through here; a [`Part`] says which
//! fields a write may change (the `status` subresource rules).
//!
//! - `write`: create, update, patch (and the status rules);
//! - `delete`: deletes, grace periods, and namespace termination (standing in for
//!   kube-controller-manager's namespace controller);
//! - `patch`: merge and JSON patches; `apply`: server-side apply (ownership is
//!   [`crate::managed`]'s).

mod apply;
mod defaults;
mod delete;
mod patch;
mod scale;
mod services;
mod write;

use std::sync::Arc;

use serde_json::{Map, Value, json};

pub(crate) use self::patch::Patch;
use crate::{
    Inner,
    registry::{Gvr, ResourceType},
    status::ApiError,
    storage::{ObjKey, Storage, StoredObject},
};

/// How a delete ended.
pub(crate) enum Deleted {
    /// Gone now: answered with a `Success` status.
    Now(Value),
    /// Deferred (finalizers or a grace period): answered with the object.
    Deferred(Arc<StoredObject>),
}

/// Which fields of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// All of it: the programmatic API, standing in for the cluster's own controllers and
    /// kubelets (which write status through the subresource on a real cluster).
    All,
    /// The object itself: for types with a status subresource, its status is kept (and on
    /// create, reset to what the real server starts with).
    Object,
    /// `.../status`: only the status changes (the spec is kept).
    Status,
}

impl Part {
    /// Which fields a write by a field manager may own.
    pub(crate) fn scope(self) -> crate::managed::Scope {
        match self {
            Self::Status => crate::managed::Scope::Status,
            Self::All | Self::Object => crate::managed::Scope::Object,
        }
    }
}

/// Who records, in `managedFields`, what a write changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer<'a> {
    /// An update by this field manager: the write records the fields it changed.
    Update(&'a str),
    /// A server-side apply, whose change already recorded its ownership.
    Recorded,
}

/// Options of a DELETE (from the query or a `DeleteOptions` body).
#[derive(Debug, Default, Clone)]
pub(crate) struct DeleteOptions {
    pub(crate) grace_period_seconds: Option<u64>,
    pub(crate) precondition_uid: Option<String>,
    pub(crate) precondition_resource_version: Option<String>,
}

pub(super) fn ty_of(storage: &Storage, gvr: &Gvr) -> Result<Arc<ResourceType>, ApiError> {
    storage
        .resource(gvr)
        .map(|r| r.ty.clone())
        .ok_or_else(ApiError::not_found_path)
}

/// Checks the namespace against the type's scope and returns the object's key.
pub(super) fn key_for(
    ty: &ResourceType,
    namespace: Option<&str>,
    name: &str,
) -> Result<ObjKey, ApiError> {
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
pub(super) fn check_name(ty: &ResourceType, name: &str) -> Result<(), ApiError> {
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

pub(super) fn meta_mut(value: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
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

pub(super) fn check_type(ty: &ResourceType, value: &Value) -> Result<(), ApiError> {
    let api_version = ty.gvr.api_version();
    if ty.gvr == crate::crds::gvr() {
        crate::crds::validate(value)?;
    }
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
}

/// The type, key and current object at `namespace`/`name`, or the real server's 404.
pub(super) fn current(
    storage: &Storage,
    gvr: &Gvr,
    namespace: Option<&str>,
    name: &str,
) -> Result<(Arc<ResourceType>, ObjKey, Arc<StoredObject>), ApiError> {
    let ty = ty_of(storage, gvr)?;
    let key = key_for(&ty, namespace, name)?;
    let store = storage.resource(gvr).expect("type exists");
    let object = store.get(&key).cloned();
    let object = object.ok_or_else(|| ApiError::not_found(gvr, name))?;
    Ok((ty, key, object))
}

/// `object` as a value stamped with `revision`: the final state a delete commits.
pub(super) fn stamped(object: &StoredObject, ty: &ResourceType, revision: u64) -> Value {
    let mut value = object.value(&ty.kind, &ty.gvr.api_version());
    value["metadata"]["resourceVersion"] = revision.to_string().into();
    value
}

pub(super) fn key_namespace(key: &ObjKey) -> Option<&str> {
    (!key.namespace.is_empty()).then_some(key.namespace.as_str())
}
