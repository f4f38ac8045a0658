//! Requests on `.../<name>/scale`: GET, PUT and PATCH (JSON, merge and strategic patches
//! apply to the Scale, not to the parent).

use std::sync::Arc;

use super::{
    Verb,
    resource::{Call, request_body},
    response::Reply,
};
use crate::{
    Inner,
    ops::Patch,
    registry::{Gvr, ResourceType},
    status::ApiError,
};

pub(super) fn reply(
    inner: &Arc<Inner>,
    ty: &ResourceType,
    namespace: Option<&str>,
    name: Option<&str>,
    verb: Verb,
    call: &Call<'_>,
    manager: &str,
) -> Result<Reply, ApiError> {
    let Some(name) = name else {
        return Err(ApiError::not_found_path());
    };
    let scale = match verb {
        Verb::Get => inner.scale(ty, namespace, name)?,
        Verb::Update => {
            let body = request_body(call, true)?;
            inner.rescale(ty, namespace, name, manager, |_| Ok(body))?
        }
        Verb::Patch => {
            let media = call.content_type.split(';').next().unwrap_or("").trim();
            let media = match media {
                // Server-side apply of a Scale, approximated as everywhere here.
                "application/apply-patch+yaml" => "application/merge-patch+json",
                other => other,
            };
            let scale_type =
                ResourceType::namespaced(Gvr::new("autoscaling", "v1", "scale"), "Scale");
            let patch = Patch::parse(media, call.body, &scale_type)?;
            inner.rescale(ty, namespace, name, manager, |scale| patch.apply(scale))?
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    match kube_protobuf_schema::kind("autoscaling/v1", "Scale") {
        Some(message) if call.format.is_protobuf() => Ok(Reply::protobuf(
            200,
            crate::protobuf::object(message, &scale)?,
        )),
        _ => Ok(Reply::json(200, &scale)),
    }
}
