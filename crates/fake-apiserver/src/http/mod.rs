//! The HTTP/1.1 front: routing of Kubernetes API paths to the verbs, query parameters, fault
//! hooks and the request log.

mod discovery;
mod list;
mod metadata;
mod metrics;
mod params;
mod resource;
mod response;
mod route;
mod scale;
mod table;
mod watch;

use std::{convert::Infallible, sync::Arc};

use http_body_util::{BodyExt, Limited};
use hyper::{Method, Request, Response, body::Incoming, header};

pub(crate) use self::params::Params;
use self::params::truthy;
pub(crate) use self::response::Body;
use self::response::Reply;
pub(crate) use self::response::parse_query;
use self::{
    discovery::discovery_reply,
    resource::{Call, resource_reply},
    route::{Route, route},
};
use crate::{
    Inner,
    faults::Verb,
    protobuf::{self, Format},
    registry::ResourceType,
    requests::RequestRecord,
    status::ApiError,
};

/// The largest request body accepted (the real server's limit is 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

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
