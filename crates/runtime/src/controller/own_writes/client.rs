//! The recording client: a `kube::Client` whose writes, made within a reconcile, are
//! recorded as the reconcile's without a call to [`wrote`](super::wrote).

use std::any::TypeId;

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::client::Body;
use serde::Deserialize;
use serde_json::Value;

use super::written::{AsWritten, GroupKind, Written, record, recording_here};

/// `client`, recording every write a reconcile makes through it: a create, update, patch
/// or delete (of one object, not a dry run) that the API server accepted is recorded as
/// [`wrote`](super::wrote) would record the object it answered, so the next reconcile of
/// the key waits until the controller's caches hold it (see
/// [read your own writes](crate::controller#read-your-own-writes)). Writes are recorded on
/// the reconcile's task, and in futures it wraps with [`carry_writes`](super::carry_writes);
/// every other request passes through untouched. [`Manager::client`](crate::manager::Manager::client)
/// is one already.
///
/// Make it once (it runs one small task, as every `kube::Client` does) and build every
/// `Api` a reconcile writes through from it.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use kube::{Api, ResourceExt, api::PostParams};
/// use kube_informer_runtime::controller::{Action, Cached, recording_client};
///
/// struct Ctx { client: kube::Client }
///
/// async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
///     let Cached::Present(cm) = cm else { return Ok(Action::Done) };
///     let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &cm.namespace().unwrap_or_default());
///     secrets.create(&PostParams::default(), &Secret::default()).await?; // recorded
///     Ok(Action::Done)
/// }
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = Ctx { client: recording_client(kube::Client::try_default().await?) };
/// # let _ = ctx; Ok(())
/// # }
/// ```
pub fn recording_client(client: kube::Client) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |request: Request<Body>| {
        // The returned future is polled on the caller's task (a `kube::Client` buffers
        // requests, not their futures): the reconcile's record is there.
        send(client.clone(), request)
    });
    kube::Client::new(service, namespace)
}

/// Sends `request`; records its answer if it is a write of one object within a reconcile.
async fn send(client: kube::Client, request: Request<Body>) -> Result<Response<Body>, kube::Error> {
    let method = request.method().clone();
    let write = matches!(
        method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    ) && !dry_run(request.uri().query())
        && recording_here();
    let response = client.send(request).await?;
    if !write || !response.status().is_success() || !json(&response) {
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await?.to_bytes();
    if let Some(written) = answered(&bytes, method == Method::DELETE) {
        record(written);
    }
    Ok(Response::from_parts(parts, Body::from(bytes)))
}

fn dry_run(query: Option<&str>) -> bool {
    query.is_some_and(|q| q.split('&').any(|p| p.starts_with("dryRun=")))
}

fn json<B>(response: &Response<B>) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// The write an answer tells: the object's kind, key, version, and whether a delete left
/// nothing of it. `None` for an answer that is not one object (a `Status`, a list).
fn answered(bytes: &[u8], deleting: bool) -> Option<Written> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        api_version: String,
        kind: String,
    }
    let json: Value = serde_json::from_slice(bytes).ok()?;
    let Answer { api_version, kind } = Answer::deserialize(&json).ok()?;
    if kind == "Status" || kind.ends_with("List") {
        return None;
    }
    let meta = ObjectMeta::deserialize(json.get("metadata")?).ok()?;
    let kind = GroupKind::of(&api_version, &kind);
    let mut written = Written::new(&meta, Some(kind), TypeId::of::<Value>(), deleting)?;
    written.object = Some(AsWritten::Json(std::sync::Arc::new(json)));
    Some(written)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(value: Value, deleting: bool) -> Option<Written> {
        answered(&serde_json::to_vec(&value).unwrap(), deleting)
    }

    #[test]
    fn an_answer_names_its_kind_key_and_version() {
        let created = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "42", "uid": "u1"}});
        let w = answer(created.clone(), false).unwrap();
        assert_eq!(
            (
                w.kind.clone().unwrap().group.as_str(),
                w.kind.unwrap().kind.as_str()
            ),
            ("apps", "Deployment")
        );
        assert_eq!(
            (w.key.as_str(), w.version, w.deleted.is_none()),
            ("shop/web", 42, true)
        );
        // A delete answered with the last state: gone at once.
        assert_eq!(
            answer(created, true).unwrap().deleted.as_deref(),
            Some("u1")
        );
        // A delete held by a finalizer: terminating, waited for by its version.
        let held = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a",
            "resourceVersion": "7", "finalizers": ["x"], "deletionTimestamp": "2026-11-28T00:00:00Z"}});
        let w = answer(held, true).unwrap();
        assert_eq!((w.deleted, w.kind.unwrap().group.as_str()), (None, ""));
        let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Success"});
        assert!(answer(status, true).is_none());
        assert!(dry_run(Some("fieldManager=x&dryRun=All")));
        assert!(!dry_run(Some("fieldManager=dryRun")));
    }
}
