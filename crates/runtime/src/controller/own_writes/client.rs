//! The recording client: a `kube::Client` whose writes, made within a reconcile, are
//! recorded as the reconcile's without a call to [`wrote`](super::wrote).

use std::{any::TypeId, sync::Arc};

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::client::Body;
use serde::Deserialize;
use serde_json::Value;

use super::{
    attribution::Attribution,
    written::{AsWritten, GroupKind, Written, record, recording_here},
};

/// `client`, recording every write a reconcile makes through it: a create, update, patch
/// or delete (of one object, not a dry run) that the API server accepted is recorded as
/// [`wrote`](super::wrote) would record the object it answered, so the next reconcile of
/// the key waits until the controller's caches hold it (see
/// [read your own writes](crate::controller#read-your-own-writes)). Writes are recorded on
/// the reconcile's task, and in futures it wraps with [`carry_writes`](super::carry_writes);
/// every other request passes through untouched. [`Manager::client`](crate::manager::Manager::client)
/// is one already, and more: it also records writes made off every reconcile's task (a task
/// a reconcile spawned, a webhook) for the keys they concern — the written object's own, and
/// its controlling owner's — in each of the manager's controllers.
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
    recording_with(client, None)
}

/// [`recording_client`] whose writes made off every reconcile's task are given to the keys
/// they concern (a manager's client: see [`Attribution`]).
pub(crate) fn recording_client_attributing(
    client: kube::Client,
    attribution: Arc<Attribution>,
) -> kube::Client {
    recording_with(client, Some(attribution))
}

fn recording_with(client: kube::Client, attribution: Option<Arc<Attribution>>) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |request: Request<Body>| {
        // The returned future is polled on the caller's task (a `kube::Client` buffers
        // requests, not their futures): the reconcile's record is there.
        send(client.clone(), attribution.clone(), request)
    });
    kube::Client::new(service, namespace)
}

/// Sends `request`; records its answer if it is a write of one object within a reconcile,
/// or gives it to `attribution` if it is one made off every reconcile's task.
async fn send(
    client: kube::Client,
    attribution: Option<Arc<Attribution>>,
    request: Request<Body>,
) -> Result<Response<Body>, kube::Error> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let in_reconcile = recording_here();
    let write = matches!(
        method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    ) && !dry_run(request.uri().query())
        && (in_reconcile || attribution.is_some());
    let response = client.send(request).await?;
    if !write || !response.status().is_success() || !json(&response) {
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await?.to_bytes();
    let deleting = method == Method::DELETE;
    let written =
        answered(&bytes, deleting).or_else(|| deleting.then(|| deleted(&bytes, &path)).flatten());
    match (written, attribution) {
        (Some(written), _) if in_reconcile => record(written),
        (Some(written), Some(attribution)) => attribution.attribute(&written),
        _ => {}
    }
    Ok(Response::from_parts(parts, Body::from(bytes)))
}

/// A delete the API server answered with a `Status` (most kinds, once the object is gone):
/// the object the request's path names, gone (with the UID the answer gives, if any).
fn deleted(bytes: &[u8], path: &str) -> Option<Written> {
    #[derive(Deserialize)]
    struct Answer {
        kind: String,
        status: Option<String>,
        #[serde(default)]
        details: Details,
    }
    #[derive(Deserialize, Default)]
    struct Details {
        uid: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(bytes).ok()?;
    if answer.kind != "Status" || answer.status.as_deref() != Some("Success") {
        return None;
    }
    // `/api/v1[/namespaces/NS]/PLURAL/NAME` or `/apis/GROUP/VERSION[/namespaces/NS]/PLURAL/NAME`.
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let (namespace, plural, name) = match rest {
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, *name),
        [plural, name] => (None, *plural, *name),
        _ => return None, // a subresource, or a collection
    };
    let meta = ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        // The version is not told; a deletion is waited for by the object's absence, so
        // any comparable version does (the smallest; "0" is not comparable).
        resource_version: Some("1".to_owned()),
        uid: answer.details.uid.or(Some(String::new())),
        ..ObjectMeta::default()
    };
    let mut written = Written::new(&meta, None, TypeId::of::<Value>(), true)?;
    written.resource = Some((group.to_owned(), plural.to_owned()));
    Some(written)
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
            (w.key.as_str(), w.version.to_string(), w.deleted.is_none()),
            ("shop/web", "42".to_owned(), true)
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
        let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Success",
            "details": {"name": "web", "kind": "configmaps", "uid": "u9"}});
        assert!(answer(status.clone(), true).is_none(), "not an object");
        // Deleted at once, answered with a Status: the path names the object.
        let bytes = serde_json::to_vec(&status).unwrap();
        let gone = deleted(&bytes, "/api/v1/namespaces/shop/configmaps/web").unwrap();
        assert_eq!(
            (gone.key.as_str(), gone.deleted.as_deref()),
            ("shop/web", Some("u9"))
        );
        assert_eq!(
            gone.resource,
            Some((String::new(), "configmaps".to_owned()))
        );
        let crd = deleted(&bytes, "/apis/example.com/v1/widgets/w").unwrap();
        assert_eq!(
            (crd.key.as_str(), crd.resource.unwrap().0.as_str()),
            ("w", "example.com")
        );
        assert!(
            deleted(&bytes, "/api/v1/namespaces/shop/configmaps").is_none(),
            "a collection"
        );
        assert!(dry_run(Some("fieldManager=x&dryRun=All")));
        assert!(!dry_run(Some("fieldManager=dryRun")));
    }
}
