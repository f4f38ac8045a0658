//! `Status` bodies, shaped as the real server's (see `shared/captures/status-*.json`).

use serde_json::{Value, json};

use crate::registry::Gvr;

/// An API error: the HTTP status and the `Status` object that goes with it.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) body: Value,
    /// Seconds, for a `Retry-After` header.
    pub(crate) retry_after: Option<u32>,
    /// Sent as the message in plain text, not as a `Status` (the throttling filters do this).
    pub(crate) plain_text: bool,
    /// The server closes the connection after answering.
    pub(crate) close: bool,
}

/// `deployments.apps` (or `configmaps` in the core group) and the details naming the object,
/// as the real server words errors about one object.
fn qualified(gvr: &Gvr, name: &str) -> (String, Value) {
    if gvr.group.is_empty() {
        (
            gvr.resource.clone(),
            json!({"name": name, "kind": gvr.resource}),
        )
    } else {
        (
            format!("{}.{}", gvr.resource, gvr.group),
            json!({"name": name, "group": gvr.group, "kind": gvr.resource}),
        )
    }
}

impl ApiError {
    fn new(code: u16, reason: &str, message: String, details: Option<Value>) -> Self {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        });
        if let Some(details) = details {
            body["details"] = details;
        }
        Self {
            code,
            body,
            retry_after: None,
            plain_text: false,
            close: false,
        }
    }

    pub(crate) fn not_found(gvr: &Gvr, name: &str) -> Self {
        let (resource, details) = qualified(gvr, name);
        Self::new(
            404,
            "NotFound",
            format!("{resource} \"{name}\" not found"),
            Some(details),
        )
    }

    pub(crate) fn not_found_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
            Some(json!({})),
        )
    }

    /// The plain-text 404 of a path no API handler serves (outside `/api` and `/apis`, or
    /// under a group that is not served).
    pub(crate) fn no_handler() -> Self {
        let mut e = Self::new(404, "NotFound", "404 page not found".into(), None);
        e.plain_text = true;
        e
    }

    pub(crate) fn already_exists(gvr: &Gvr, name: &str) -> Self {
        let (resource, details) = qualified(gvr, name);
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
            Some(details),
        )
    }

    pub(crate) fn conflict(gvr: &Gvr, name: &str) -> Self {
        let (resource, details) = qualified(gvr, name);
        let message = format!(
            "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        );
        Self::new(409, "Conflict", message, Some(details))
    }

    /// A server-side apply that would take fields other managers own (`causes`: one per
    /// field and manager, `FieldManagerConflict`).
    pub(crate) fn apply_conflict(message: String, causes: Vec<Value>) -> Self {
        Self::new(409, "Conflict", message, Some(json!({ "causes": causes })))
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into(), None)
    }

    pub(crate) fn invalid(
        kind: &str,
        name: &str,
        field: &str,
        cause_reason: &str,
        detail: &str,
    ) -> Self {
        let details = json!({
            "name": name,
            "kind": kind,
            "causes": [{"reason": cause_reason, "message": detail, "field": field}],
        });
        let message = format!("{kind} \"{name}\" is invalid: {field}: {detail}");
        Self::new(422, "Invalid", message, Some(details))
    }

    pub(crate) fn invalid_list_options(field: &str, detail: &str) -> Self {
        Self::invalid_options("ListOptions", field, "FieldValueForbidden", detail)
    }

    pub(crate) fn list_too_old() -> Self {
        Self::new(
            410,
            "Expired",
            "The resourceVersion for the provided list is too old.".into(),
            None,
        )
    }

    pub(crate) fn continue_expired(fresh_continue: String) -> Self {
        let mut e = Self::new(
            410,
            "Expired",
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.".into(),
            None,
        );
        e.body["metadata"] = json!({"continue": fresh_continue});
        e
    }

    pub(crate) fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let details = json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        });
        let message = format!("Too large resource version: {requested}, current: {current}");
        Self::new(504, "Timeout", message, Some(details))
    }

    /// A create or update body in a format the server does not read: the real server's
    /// answer, except that the list names only what this server reads: JSON, and protobuf
    /// for built-in kinds (not YAML; use `kubectl create -f`, which sends JSON).
    pub(crate) fn unsupported_body_type(protobuf: bool) -> Self {
        let types = match protobuf {
            true => "application/json, application/vnd.kubernetes.protobuf",
            false => "application/json",
        };
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {types}"
            ),
            None,
        )
    }

    /// An `Accept` naming only types the server cannot write for the resource (protobuf,
    /// for a custom resource).
    pub(crate) fn not_acceptable() -> Self {
        Self::new(
            406,
            "NotAcceptable",
            "the server was unable to respond with a content type that the client supports".into(),
            None,
        )
    }
    /// A PATCH whose content type is not a patch type.
    pub(crate) fn unsupported_patch_type() -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            "415: Unsupported Media Type".into(),
            Some(json!({})),
        )
    }

    /// A PATCH whose content type a custom resource does not take (strategic merge patch
    /// among them): the apiextensions server's wording, which lists what it accepts.
    pub(crate) fn unsupported_custom_patch_type() -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                .into(),
            None,
        )
    }

    /// An error the real server reports as a bare 500: no reason, the message as the text
    /// (strategic merge patches that cannot be applied, e.g. a list item without its key).
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        let mut error = Self::new(500, "", message.into(), None);
        error
            .body
            .as_object_mut()
            .expect("a Status")
            .remove("reason");
        error
    }

    /// Adds a cause to the details (`reason` as the cause's type).
    pub(crate) fn with_cause(mut self, reason: &str, message: &str) -> Self {
        let cause = json!({"reason": reason, "message": message});
        let details = self.body["details"].as_object_mut();
        match details {
            Some(details) => {
                details.insert("causes".into(), json!([cause]));
            }
            None => self.body["details"] = json!({"causes": [cause]}),
        }
        self
    }

    /// A JSON patch that cannot be applied (a failed `test`, a missing path).
    pub(crate) fn patch_rejected() -> Self {
        Self::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request".into(),
            Some(json!({})),
        )
    }

    /// A body over the server's 3 MiB limit.
    pub(crate) fn entity_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
            None,
        )
        .closing()
    }

    /// The same error, and the connection closed after it.
    fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    /// An invalid option of a request (`ListOptions`, `PatchOptions`).
    pub(crate) fn invalid_options(kind: &str, field: &str, reason: &str, detail: &str) -> Self {
        let details = json!({
            "group": "meta.k8s.io",
            "kind": kind,
            "causes": [{"reason": reason, "message": detail, "field": field}],
        });
        let message = format!("{kind}.meta.k8s.io \"\" is invalid: {field}: {detail}");
        Self::new(422, "Invalid", message, Some(details))
    }

    /// A create in a namespace that is being deleted.
    pub(crate) fn namespace_terminating(resource: &str, name: &str, namespace: &str) -> Self {
        let detail = format!("namespace {namespace} is being terminated");
        let details = json!({
            "name": name,
            "kind": resource,
            "causes": [{"reason": "NamespaceTerminating", "message": detail, "field": "metadata.namespace"}],
        });
        let message = format!(
            "{resource} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated"
        );
        Self::new(403, "Forbidden", message, Some(details))
    }

    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".into(),
            None,
        )
    }

    /// An injected or simulated server-side failure with the given code. A 429 is what the
    /// real server's throttling filters (max-in-flight, priority and fairness) send: plain
    /// text and a `Retry-After` header, no `Status`.
    pub(crate) fn with_code(code: u16, retry_after: Option<u32>) -> Self {
        let (reason, message) = match code {
            429 => (
                "TooManyRequests",
                "Too many requests, please try again later.",
            ),
            410 => (
                "Expired",
                "The resourceVersion for the provided list is too old.",
            ),
            503 => (
                "ServiceUnavailable",
                "The server is currently unable to handle the request",
            ),
            504 => ("Timeout", "The server was unable to respond in time"),
            401 => ("Unauthorized", "Unauthorized"),
            403 => ("Forbidden", "forbidden"),
            _ => ("InternalError", "Internal error occurred: injected fault"),
        };
        let details = retry_after.map(|s| json!({"retryAfterSeconds": s}));
        let mut e = Self::new(code, reason, message.into(), details);
        e.retry_after = retry_after;
        e.plain_text = code == 429;
        e
    }

    /// The `Status` a watch stream carries in an `ERROR` event.
    pub(crate) fn watch_too_old(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
            None,
        )
    }

    pub(crate) fn watch_list_unsupported() -> Self {
        Self::new(500, "InternalError", "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled".into(), None)
    }
}

/// The body of an immediate deletion.
pub(crate) fn delete_success(resource: &str, name: &str, uid: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "kind": resource, "uid": uid},
    })
}
