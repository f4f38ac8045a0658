//! Admission routes: an `AdmissionReview` decoded into the handler's type, the handler's
//! verdict (or its mutated object, as a JSON patch) encoded back, and every way it can go
//! wrong answered as a refusal that names it.

use std::{future::Future, marker::PhantomData, sync::Arc};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use kube::{
    Resource,
    core::{
        DynamicObject, Status,
        admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
    },
};
use serde::{Serialize, de::DeserializeOwned};

use super::{Route, guarded};

/// A validating handler's "yes", with warnings the API server passes on to the client
/// (kubectl prints them).
///
/// ```
/// use kube_informer_runtime::webhook::Allowed;
///
/// let allowed = Allowed::new().warning("spec.replicas above 50 will be capped next release");
/// # let _ = allowed;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Allowed {
    warnings: Vec<String>,
}

impl Allowed {
    /// Allowed, without warnings.
    pub fn new() -> Self {
        Allowed::default()
    }

    /// Adds a warning.
    #[must_use]
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }
}

/// A refusal: the client's request fails with this message and HTTP code (403 Forbidden
/// unless set).
///
/// ```
/// use kube_informer_runtime::webhook::Denied;
///
/// let denied = Denied::new("spec.replicas must be at most 50").code(422);
/// # let _ = denied;
/// ```
#[derive(Clone, Debug)]
pub struct Denied {
    message: String,
    code: u16,
}

impl Denied {
    /// A refusal with `message`, code 403.
    pub fn new(message: impl Into<String>) -> Self {
        Denied {
            message: message.into(),
            code: 403,
        }
    }

    /// The HTTP code the client gets (400–599; 422 for an invalid object, say).
    #[must_use]
    pub fn code(mut self, code: u16) -> Self {
        self.code = code;
        self
    }
}

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// What a handler decided.
pub(super) enum Outcome<K> {
    Allow(Allowed),
    /// The object as it came, and as the handler wants it stored.
    Mutate(Box<K>, K),
    /// A whole response, as a low-level handler built it.
    Answer(Box<AdmissionResponse>),
}

type Decide<K> = Arc<
    dyn Fn(AdmissionRequest<K>) -> BoxFuture<'static, Result<Outcome<K>, Denied>> + Send + Sync,
>;

/// An admission route for objects of type `K`.
pub(super) struct AdmissionRoute<K: Resource> {
    decide: Decide<K>,
    kind: &'static str,
    _kind: PhantomData<fn() -> K>,
}

impl<K> AdmissionRoute<K>
where
    K: Resource + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    pub(super) fn validating<F, Fut>(handler: F) -> Self
    where
        F: Fn(AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Allowed, Denied>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        Self::new(Arc::new(move |request| {
            let answer = handler(request);
            Box::pin(async move { answer.await.map(Outcome::Allow) })
        }))
    }

    pub(super) fn mutating<F, Fut>(handler: F) -> Self
    where
        K: Clone,
        F: Fn(K, AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<K, Denied>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        Self::new(Arc::new(move |request: AdmissionRequest<K>| {
            // A DELETE (or CONNECT) has no object to change.
            let Some(before) = request.object.clone() else {
                return Box::pin(async { Ok(Outcome::Allow(Allowed::new())) });
            };
            let answer = handler(before.clone(), request);
            Box::pin(async move { Ok(Outcome::Mutate(Box::new(before), answer.await?)) })
        }))
    }

    pub(super) fn answering<F, Fut>(handler: F) -> Self
    where
        F: Fn(AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = AdmissionResponse> + Send + 'static,
    {
        let handler = Arc::new(handler);
        Self::new(Arc::new(move |request| {
            let answer = handler(request);
            Box::pin(async move { Ok(Outcome::Answer(Box::new(answer.await))) })
        }))
    }

    fn new(decide: Decide<K>) -> Self {
        let kind = std::any::type_name::<K>();
        AdmissionRoute {
            decide,
            kind: kind.rsplit("::").next().unwrap_or(kind),
            _kind: PhantomData,
        }
    }
}

impl<K> Route for AdmissionRoute<K>
where
    K: Resource + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn answer(&self, body: Bytes, budget: super::Budget) -> BoxFuture<'static, Vec<u8>> {
        let (decide, kind) = (self.decide.clone(), self.kind);
        Box::pin(async move {
            let review: AdmissionReview<K> = match serde_json::from_slice(&body) {
                Ok(review) => review,
                Err(error) => {
                    let message = format!("cannot decode the AdmissionReview as {kind}: {error}");
                    return refusal(super::http::uid_of(&body), 400, "BadRequest", &message);
                }
            };
            let converted: Result<AdmissionRequest<K>, _> = review.try_into();
            let Ok(request) = converted else {
                return refusal(
                    String::new(),
                    400,
                    "BadRequest",
                    "the AdmissionReview has no request",
                );
            };
            let mut response = AdmissionResponse::from(&request);
            // Called inside the guard: a panic before its first await is caught too.
            match guarded(async move { decide(request).await }, budget).await {
                Ok(Ok(Outcome::Allow(allowed))) => {
                    if !allowed.warnings.is_empty() {
                        response.warnings = Some(allowed.warnings);
                    }
                }
                Ok(Ok(Outcome::Mutate(before, after))) => match patch(&body, &*before, &after) {
                    Ok(Some(patch)) => match response.clone().with_patch(patch) {
                        Ok(patched) => response = patched,
                        Err(error) => deny(&mut response, 500, "InternalError", &error.to_string()),
                    },
                    Ok(None) => {}
                    Err(error) => {
                        let message = format!("cannot encode the mutated {kind}: {error}");
                        deny(&mut response, 500, "InternalError", &message);
                    }
                },
                Ok(Ok(Outcome::Answer(answer))) => {
                    let (uid, types) = (response.uid, response.types);
                    response = *answer;
                    (response.uid, response.types) = (uid, types);
                }
                Ok(Err(denied)) => deny(&mut response, denied.code, "", &denied.message),
                Err(failure) => deny(&mut response, 500, "InternalError", &failure),
            }
            encode(&response.into_review())
        })
    }

    fn failure(&self, uid: &str, code: u16, message: &str) -> Vec<u8> {
        refusal(uid.to_owned(), code, "", message)
    }
}

/// The JSON patch that takes the object the API server sent (in `body`, the review) to
/// the handler's `after`: the changes from `before` to `after` (both typed, so fields the
/// type does not know are in neither and never removed), applied to the raw object — a
/// change to a field the raw object lacks (a typed default) adds it instead of replacing —
/// then diffed against it, so every operation applies to what the API server holds.
fn patch<K: Serialize>(
    body: &[u8],
    before: &K,
    after: &K,
) -> Result<Option<json_patch::Patch>, serde_json::Error> {
    let changes = json_patch::diff(
        &serde_json::to_value(before)?,
        &serde_json::to_value(after)?,
    );
    if changes.0.is_empty() {
        return Ok(None);
    }
    let review: serde_json::Value = serde_json::from_slice(body)?;
    let raw = review
        .pointer("/request/object")
        .cloned()
        .unwrap_or_default();
    let mut patched = raw.clone();
    for operation in changes.0 {
        let lenient = match operation {
            json_patch::PatchOperation::Replace(op) => {
                json_patch::PatchOperation::Add(json_patch::AddOperation {
                    path: op.path,
                    value: op.value,
                })
            }
            other => other,
        };
        // A remove of what the raw object lacks has nothing to do.
        let _ = json_patch::patch(&mut patched, &[lenient]);
    }
    let patch = json_patch::diff(&raw, &patched);
    Ok((!patch.0.is_empty()).then_some(patch))
}

fn deny(response: &mut AdmissionResponse, code: u16, reason: &str, message: &str) {
    response.allowed = false;
    response.result = Status::failure(message, reason).with_code(code);
}

/// A refusal for a request that could not be read: its uid, if that much could be.
fn refusal(uid: String, code: u16, reason: &str, message: &str) -> Vec<u8> {
    let mut response = AdmissionResponse::invalid(message);
    response.uid = uid;
    deny(&mut response, code, reason, message);
    encode(&response.into_review())
}

/// The review as the API server's own encoding has it: kube-core writes the patch as an
/// array of numbers, Go's `[]byte` is a base64 string (the API server reads both).
fn encode(review: &AdmissionReview<DynamicObject>) -> Vec<u8> {
    use base64::Engine as _;
    // An AdmissionReview of plain strings, maps and bytes always encodes.
    let mut value = serde_json::to_value(review).unwrap_or_default();
    if let Some(patch) = review.response.as_ref().and_then(|r| r.patch.as_ref())
        && let Some(field) = value.pointer_mut("/response/patch")
    {
        *field = base64::engine::general_purpose::STANDARD
            .encode(patch)
            .into();
    }
    serde_json::to_vec(&value).unwrap_or_default()
}
