//! The HTTP/1.1 front: routing of Kubernetes API paths to the verbs, query parameters, fault
//! hooks and the request log.

mod discovery;
mod list;
mod metadata;
mod params;
mod response;
mod scale;
mod table;
mod watch;

use std::{collections::BTreeMap, convert::Infallible, sync::Arc};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::{Method, Request, Response, body::Incoming, header};
use serde_json::Value;

pub(crate) use self::params::Params;
use self::params::truthy;
pub(crate) use self::response::Body;
use self::response::Reply;
pub(crate) use self::response::parse_query;
use crate::{
    Inner,
    faults::Verb,
    ops::{DeleteOptions, Deleted, Part, Patch},
    protobuf::{self, Format},
    registry::ResourceType,
    requests::RequestRecord,
    status::ApiError,
    storage::StoredObject,
};

/// The largest request body accepted (the real server's limit is 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// Where a path leads.
enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(String),
    Resources(String, String),
    OpenApiIndex,
    OpenApi(String),
    Metrics,
    Resource {
        ty: Arc<ResourceType>,
        namespace: Option<String>,
        name: Option<String>,
        subresource: Option<String>,
    },
    NotFound,
    /// Outside the API, or under a group nobody serves: the real server's mux answers a
    /// plain-text 404 there, not a `Status`.
    NoHandler,
}

fn route(path: &str, types: &[Arc<ResourceType>]) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "readyz" | "livez", ..] => return Route::Health,
        ["metrics"] => return Route::Metrics,
        ["api"] => return Route::CoreVersions,
        ["api", "v1"] => return Route::Resources(String::new(), "v1".into()),
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis"] => return Route::Groups,
        ["apis", g] if !types.iter().any(|t| t.gvr.group == *g) => return Route::NoHandler,
        ["apis", g] => return Route::Group((*g).to_owned()),
        ["apis", g, v] if !types.iter().any(|t| t.gvr.group == *g) => return Route::NoHandler,
        ["apis", g, v] => return Route::Resources((*g).to_owned(), (*v).to_owned()),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        ["openapi", "v3"] => return Route::OpenApiIndex,
        ["openapi", "v3", gv @ ..] => return Route::OpenApi(gv.join("/")),
        ["api", ..] => return Route::NotFound,
        _ => return Route::NoHandler,
    };
    if !group.is_empty() && !types.iter().any(|t| t.gvr.group == group) {
        return Route::NoHandler;
    }
    let find = |resource: &str| {
        types
            .iter()
            .find(|t| {
                t.gvr.group == group && t.gvr.version == version && t.gvr.resource == resource
            })
            .cloned()
    };
    let namespaced = |resource: &str| find(resource).filter(|t| t.namespaced);
    let (ty, namespace, rest) = match rest {
        ["namespaces", ns, resource, rest @ ..] if namespaced(resource).is_some() => {
            (namespaced(resource), Some((*ns).to_owned()), rest)
        }
        [resource, rest @ ..] => (find(resource), None, rest),
        [] => return Route::NotFound,
    };
    let Some(ty) = ty else { return Route::NotFound };
    match rest {
        [] => Route::Resource {
            ty,
            namespace,
            name: None,
            subresource: None,
        },
        [name] => Route::Resource {
            ty,
            namespace,
            name: Some((*name).to_owned()),
            subresource: None,
        },
        [name, sub] => Route::Resource {
            ty,
            namespace,
            name: Some((*name).to_owned()),
            subresource: Some((*sub).to_owned()),
        },
        _ => Route::NotFound,
    }
}

/// Answers one HTTP request.
pub(crate) async fn handle(
    inner: Arc<Inner>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = parse_query(req.uri().query());
    let types: Vec<Arc<ResourceType>> = inner.storage.lock().types().cloned().collect();
    let route = route(&path, &types);
    let (verb, resource) = match &route {
        Route::Resource { ty, name, .. } => {
            let watch = query.get("watch").is_some_and(|v| truthy(v));
            let verb = match (&method, name.is_some(), watch) {
                (&Method::GET, _, true) => Some(Verb::Watch),
                (&Method::GET, true, _) => Some(Verb::Get),
                (&Method::GET, false, _) => Some(Verb::List),
                (&Method::POST, ..) => Some(Verb::Create),
                (&Method::PUT, ..) => Some(Verb::Update),
                (&Method::PATCH, ..) => Some(Verb::Patch),
                (&Method::DELETE, ..) => Some(Verb::Delete),
                _ => None,
            };
            (verb, Some(ty.gvr.resource.clone()))
        }
        _ => (None, None),
    };
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown")
        .to_owned();
    let header_text = |name: header::HeaderName| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let (content_type, accept) = (
        header_text(header::CONTENT_TYPE),
        header_text(header::ACCEPT),
    );
    // The encoding of the answer, errors included (Tables and metadata-only answers are
    // JSON, chosen later).
    let (format, errors_in) = match &route {
        Route::Resource {
            ty, subresource, ..
        } if !table::wanted(&accept) && !metadata::wanted(&accept) => {
            // The scale subresource answers a Scale, whatever its parent's kind.
            let (api_version, kind) = match subresource.as_deref() {
                Some("scale") => ("autoscaling/v1".to_owned(), "Scale"),
                _ => (ty.gvr.api_version(), ty.kind.as_str()),
            };
            (
                protobuf::negotiate(&accept, &api_version, kind),
                protobuf::errors_format(&accept),
            )
        }
        _ => (Ok(Format::Json), Format::Json),
    };
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(_) => Err(ApiError::entity_too_large(MAX_BODY)),
    };

    let reply = match verb {
        Some(verb) => {
            let delay = inner.faults.lock().delay_for(verb);
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            let hold = inner.faults.lock().hold_for(verb);
            if let Some(gate) = hold {
                gate.opened().await;
            }
            let injected = inner.faults.lock().status_for(verb);
            match (injected, body, format) {
                (_, _, Err(not_acceptable)) => Reply::error_in(&not_acceptable, errors_in),
                (_, Err(too_large), _) => Reply::error_in(&too_large, errors_in),
                // Inside a watch stream, in the stream's encoding.
                (Some((410, _)), _, Ok(format)) if verb == Verb::Watch => watch::error_stream(
                    &ApiError::watch_too_old(0, inner.storage.lock().revision()),
                    format,
                ),
                (Some((code, retry_after)), ..) => {
                    Reply::error_in(&ApiError::with_code(code, retry_after), errors_in)
                }
                (None, Ok(body), Ok(format)) => {
                    let req = Call {
                        method: &method,
                        query: &query,
                        body: &body,
                        user_agent: &user_agent,
                        content_type: &content_type,
                        accept: &accept,
                        format,
                    };
                    resource_reply(&inner, route, verb, req)
                        .unwrap_or_else(|e| Reply::error_in(&e, errors_in))
                }
            }
        }
        None => discovery_reply(&inner, route, &types),
    };

    let audit_id = inner.rng.lock().uuid();
    let counter = inner.log.push(RequestRecord {
        method: method.to_string(),
        path,
        query,
        verb,
        resource,
        status: reply.status,
        bytes: 0,
    });
    Ok(reply.into_response(counter, audit_id))
}

fn discovery_reply(inner: &Inner, route: Route, types: &[Arc<ResourceType>]) -> Reply {
    let found = match route {
        Route::Metrics => return metrics(inner),
        Route::Version => Some(discovery::version()),
        Route::Health => return Reply::bytes(200, Bytes::from_static(b"ok")),
        Route::CoreVersions => Some(discovery::core_versions()),
        Route::Groups => Some(discovery::groups(types)),
        Route::Group(g) => discovery::group(types, &g),
        Route::Resources(g, v) => discovery::resources(types, &g, &v),
        Route::OpenApiIndex => Some(discovery::openapi_index(types)),
        Route::OpenApi(gv) => discovery::openapi_group_version(types, &gv),
        Route::Resource { .. } => return Reply::error(&ApiError::method_not_allowed()),
        Route::NotFound => None,
        Route::NoHandler => return Reply::error(&ApiError::no_handler()),
    };
    match found {
        Some(doc) => Reply::json(200, &doc),
        None => Reply::error(&ApiError::not_found_path()),
    }
}

/// The one metric this server keeps, in the real server's name and text format:
/// `apiserver_terminated_watchers_total{group,resource}`, watches ended because their
/// client did not keep up.
fn metrics(inner: &Inner) -> Reply {
    let mut text = String::from(
        "# HELP apiserver_terminated_watchers_total [STABLE] Counter of watchers closed due to unresponsiveness broken by resource type.\n# TYPE apiserver_terminated_watchers_total counter\n",
    );
    for (gvr, count) in inner.storage.lock().terminated_watchers() {
        if count > 0 {
            text.push_str(&format!(
                "apiserver_terminated_watchers_total{{group=\"{}\",resource=\"{}\"}} {count}\n",
                gvr.group, gvr.resource
            ));
        }
    }
    Reply::bytes(200, Bytes::from(text))
}

/// The parts of a request a resource verb needs.
struct Call<'a> {
    method: &'a Method,
    query: &'a BTreeMap<String, String>,
    body: &'a Bytes,
    user_agent: &'a str,
    content_type: &'a str,
    accept: &'a str,
    /// What the answer is written in.
    format: Format,
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
fn request_body(call: &Call<'_>, built_in: bool) -> Result<Value, ApiError> {
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

/// Server-side apply, approximated: the body (JSON, which is also YAML) is merged into the
/// object, or creates it. Field ownership and apply conflicts are not modelled.
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
    let body = parse_body(call.body)?;
    let patch = Patch::parse("application/merge-patch+json", call.body, ty)?;
    match inner.patch(&ty.gvr, ns, name, &patch, manager, part) {
        Err(e) if e.code == 404 && part == Part::Object => inner
            .create(&ty.gvr, ns, body, manager, part)
            .map(|o| (201, o)),
        other => other.map(|o| (200, o)),
    }
}

fn resource_reply(
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
            let filter = params.filter(&ty, ns)?;
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
            let filter = params.filter(&ty, ns)?;
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
