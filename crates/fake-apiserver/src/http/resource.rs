//! Requests on resources: GET, LIST, WATCH, create, update, patch (server-side apply
//! approximated) and delete, answered in JSON, protobuf, Tables or metadata only.

use std::{collections::BTreeMap, sync::Arc};

use bytes::Bytes;
use hyper::Method;
use serde_json::Value;

use super::{Params, list, metadata, response::Reply, route::Route, scale, table, watch};
use crate::{
    Inner,
    faults::Verb,
    ops::{DeleteOptions, Deleted, Part, Patch},
    protobuf::{self, Format},
    registry::ResourceType,
    status::ApiError,
    storage::StoredObject,
};

/// The parts of a request a resource verb needs.
pub(super) struct Call<'a> {
    pub(super) method: &'a Method,
    pub(super) query: &'a BTreeMap<String, String>,
    pub(super) body: &'a Bytes,
    pub(super) user_agent: &'a str,
    pub(super) content_type: &'a str,
    pub(super) accept: &'a str,
    /// What the answer is written in.
    pub(super) format: Format,
}

/// The object with `kind` and `apiVersion`, as GET and write responses carry it, in JSON or
/// protobuf.
fn object_reply(
    status: u16,
    ty: &ResourceType,
    store_prefix: &Bytes,
    object: &StoredObject,
    format: Format,
) -> Result<Reply, ApiError> {
    if let Format::Protobuf(message) = format {
        let raw = object.protobuf(message)?;
        let body = protobuf::envelope(&ty.gvr.api_version(), &ty.kind, &raw);
        return Ok(Reply::protobuf(status, body));
    }
    let tail = object.body_tail();
    let mut full = Vec::with_capacity(store_prefix.len() + tail.len());
    full.extend_from_slice(store_prefix);
    full.extend_from_slice(&tail);
    Ok(Reply::bytes(status, Bytes::from(full)))
}

/// A LIST item (stored without them) with its kind and apiVersion.
fn with_type(ty: &ResourceType, mut item: Value) -> Value {
    item["kind"] = ty.kind.clone().into();
    item["apiVersion"] = ty.gvr.api_version().into();
    item
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

/// The body of a create, update or delete: JSON (also when no content type is given, as the
/// real server assumes), or protobuf for a built-in kind; YAML bodies are not read by this
/// server.
/// `built_in`: the body's kind has a protobuf encoding.
pub(super) fn request_body(call: &Call<'_>, built_in: bool) -> Result<Value, ApiError> {
    if protobuf::is_protobuf_body(call.content_type) {
        return match built_in {
            true => protobuf::read_body(call.body),
            false => Err(ApiError::unsupported_body_type(false)),
        };
    }
    let media = call.content_type.split(';').next().unwrap_or("").trim();
    if !matches!(media, "" | "application/json" | "*/*") {
        return Err(ApiError::unsupported_body_type(built_in));
    }
    parse_body(call.body)
}

/// Server-side apply: the body (JSON, which is also YAML) is the manager's configuration,
/// applied as [`crate::managed`] describes.
fn apply(
    inner: &Arc<Inner>,
    ty: &ResourceType,
    ns: Option<&str>,
    name: &str,
    params: &Params,
    call: &Call<'_>,
    part: Part,
) -> Result<(u16, Arc<StoredObject>), ApiError> {
    let Some(manager) = params.field_manager.as_deref() else {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            "fieldManager",
            "FieldValueRequired",
            "Required value: is required for apply patch",
        ));
    };
    let config = parse_body(call.body)?;
    typed(&config)?;
    inner.apply(&ty.gvr, ns, name, &config, manager, params.force, part)
}

/// An apply configuration must say its `apiVersion` and `kind`: kube-apiserver answers 400
/// `invalid object type: <group>/<version>, Kind=<kind>` (as Go prints a GVK) otherwise.
fn typed(config: &serde_json::Value) -> Result<(), ApiError> {
    let field = |name: &str| config.get(name).and_then(|v| v.as_str()).unwrap_or("");
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if !api_version.is_empty() && !kind.is_empty() {
        return Ok(());
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Err(ApiError::bad_request(format!(
        "invalid object type: {group}/{version}, Kind={kind}"
    )))
}

pub(super) fn resource_reply(
    inner: &Arc<Inner>,
    route: Route,
    verb: Verb,
    call: Call<'_>,
) -> Result<Reply, ApiError> {
    let Route::Resource {
        ty,
        namespace,
        name,
        subresource,
    } = route
    else {
        return Err(ApiError::not_found_path());
    };
    // `None`: the scale subresource, served from the object's replicas.
    let part = match subresource.as_deref() {
        None => Some(Part::Object),
        Some("status") if ty.status_subresource => Some(Part::Status),
        Some("scale") if ty.scale_subresource => None,
        Some(_) => return Err(ApiError::not_found_path()),
    };
    let params = Params::parse(call.query)?;
    // `kubectl get` asks for a Table (reads only; writes answer with the object).
    let table = table::wanted(call.accept)
        .then(|| table::Include::from_query(call.query.get("includeObject").map(String::as_str)));
    let gvr = &ty.gvr;
    let ns = namespace.as_deref();
    let prefix = inner
        .storage
        .lock()
        .resource(gvr)
        .map(|r| r.object_prefix.clone())
        .unwrap_or_default();
    // Metadata informers' reads, and writes that ask for it: the object's metadata only.
    let metadata_only = table.is_none() && metadata::wanted(call.accept);
    let metadata_protobuf = metadata_only && metadata::protobuf_wanted(call.accept).is_some();
    let format = call.format;
    let built_in = kube_protobuf_schema::kind(&gvr.api_version(), &ty.kind).is_some();
    let reply = |code: u16, object: &StoredObject| match (metadata_only, metadata_protobuf) {
        (true, true) => Ok(Reply::protobuf(
            code,
            metadata::protobuf_object(&object.body)?.to_vec(),
        )),
        (true, false) => Ok(Reply::bytes(code, metadata::object(&object.body))),
        (false, _) => object_reply(code, &ty, &prefix, object, format),
    };
    let manager = params.field_manager.clone().unwrap_or_else(|| {
        let product = call.user_agent.split('/').next().unwrap_or("unknown");
        if product == "kubectl" && *call.method == Method::POST {
            "kubectl-create".to_owned()
        } else {
            product.to_owned()
        }
    });
    let Some(part) = part else {
        return scale::reply(inner, &ty, ns, name.as_deref(), verb, &call, &manager);
    };
    match (verb, name) {
        (Verb::List, _) => {
            let filter = params.filter(&ty, ns, inner.config.shard_selectors)?;
            if let Some(include) = table {
                let list: Value = serde_json::from_slice(
                    &list::render(inner, gvr, &filter, &params, false)?.concat(),
                )
                .expect("the server's own JSON");
                let items: Vec<Value> = list["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|item| with_type(&ty, item.clone()))
                    .collect();
                let table = table::table(&ty, &items, list["metadata"].clone(), include, true);
                return Ok(Reply::json(200, &table));
            }
            let cut = inner.faults.lock().cut_list();
            let shape = match (metadata_only, format) {
                (true, _) if metadata_protobuf => list::Shape::MetadataProtobuf,
                (true, _) => list::Shape::Metadata,
                (false, Format::Json) => list::Shape::Object,
                (false, Format::Protobuf(message)) => list::Shape::Protobuf(message),
            };
            list::list(inner, gvr, &filter, &params, cut, shape)
        }
        (Verb::Watch, _) => {
            let filter = params.filter(&ty, ns, inner.config.shard_selectors)?;
            let faults = inner.faults.lock().watch_faults();
            let shape = match (table, format) {
                (Some(include), _) => watch::Shape::Table(ty.clone(), include),
                (None, _) if metadata_protobuf => watch::Shape::MetadataProtobuf,
                (None, _) if metadata_only => watch::Shape::Metadata,
                (None, Format::Protobuf(message)) => watch::Shape::Protobuf(ty.clone(), message),
                (None, Format::Json) => watch::Shape::Object,
            };
            watch::watch(inner, gvr, filter, &params, faults, shape)
        }
        (Verb::Get, Some(name)) => {
            let object = inner.get(gvr, ns, &name)?;
            if let Some(include) = table {
                let value = object.value(&ty.kind, &ty.gvr.api_version());
                let meta =
                    serde_json::json!({"resourceVersion": object.resource_version.to_string()});
                return Ok(Reply::json(
                    200,
                    &table::table(&ty, &[value], meta, include, true),
                ));
            }
            reply(200, &object)
        }
        (Verb::Create, None) if part == Part::Object => {
            let body = request_body(&call, built_in)?;
            let object = inner.create(gvr, ns, body, &manager, part)?;
            reply(201, &object)
        }
        (Verb::Update, Some(name)) => {
            let body = request_body(&call, built_in)?;
            let object = inner.update(gvr, ns, &name, body, &manager, part)?;
            reply(200, &object)
        }
        (Verb::Patch, Some(name)) => {
            let media = call.content_type.split(';').next().unwrap_or("").trim();
            if media == "application/apply-patch+yaml" {
                return apply(inner, &ty, ns, &name, &params, &call, part)
                    .and_then(|(code, object)| reply(code, &object));
            }
            let patch = Patch::parse(media, call.body, &ty)?;
            let object = inner.patch(gvr, ns, &name, &patch, &manager, part)?;
            reply(200, &object)
        }
        (Verb::Delete, Some(name)) if part == Part::Object => {
            let mut options = DeleteOptions {
                grace_period_seconds: params.grace_period_seconds,
                ..Default::default()
            };
            if !call.body.is_empty() {
                let body = match protobuf::is_protobuf_body(call.content_type) {
                    true => protobuf::read_body(call.body)?,
                    false => parse_body(call.body)?,
                };
                if let Some(grace) = body["gracePeriodSeconds"].as_u64() {
                    options.grace_period_seconds = Some(grace);
                }
                options.precondition_uid = body["preconditions"]["uid"].as_str().map(str::to_owned);
                options.precondition_resource_version = body["preconditions"]["resourceVersion"]
                    .as_str()
                    .map(str::to_owned);
            }
            match inner.delete(gvr, ns, &name, &options)? {
                Deleted::Now(status) if format.is_protobuf() => {
                    Ok(Reply::protobuf(200, protobuf::status(&status)))
                }
                Deleted::Now(status) => Ok(Reply::json(200, &status)),
                Deleted::Deferred(object) => object_reply(200, &ty, &prefix, &object, format),
            }
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}
