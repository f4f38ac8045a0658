//! The audit log, parsed: one [`AuditEvent`] per line of kube-apiserver's JSON-lines log.
//!
//! The environment's policy logs every request at level `Metadata` and omits the
//! `RequestReceived` stage, so an ordinary request is logged once, at `ResponseComplete`,
//! and a long-running one (a watch) twice: `ResponseStarted` when its response begins (the
//! watch is open) and `ResponseComplete` when it ends. To count requests, filter on
//! [`AuditEvent::is_request`] or use [`requests`]; to wait for a watch to be open, look for
//! its `ResponseStarted` event.
//!
//! # When an event is in the file
//!
//! The environment runs the log backend with `--audit-log-mode=blocking`: the request's own
//! goroutine writes its event, unbuffered, before the handler returns, and a small response
//! is only flushed to the client after that. So for ordinary requests the event is in the
//! file by the time the client has the response (tests/basic.rs checks it on every one of
//! 20 consecutive requests). A large response's bytes may reach the client first, and other
//! clients' requests race with yours: tests that need an event should wait for it with
//! [`Environment::wait_for_audit_event`](crate::Environment::wait_for_audit_event).

use std::path::Path;

use serde::Deserialize;

use crate::Error;

/// One audit event (the fields of `audit.k8s.io/v1` `Event` a test needs).
///
/// ```
/// let line = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata",
///   "auditID":"a1","stage":"ResponseComplete","verb":"list",
///   "requestURI":"/api/v1/namespaces/shop/configmaps?limit=500&resourceVersion=0",
///   "user":{"username":"admin","groups":["system:masters"]},
///   "objectRef":{"resource":"configmaps","namespace":"shop","apiVersion":"v1"},
///   "responseStatus":{"metadata":{},"code":200},
///   "requestReceivedTimestamp":"2026-01-02T03:04:05.000001Z",
///   "stageTimestamp":"2026-01-02T03:04:05.000201Z"}"#;
/// let event: kube_envtest::AuditEvent = serde_json::from_str(line).unwrap();
/// assert_eq!(event.resource_version().as_deref(), Some("0"));
/// assert_eq!(event.limit(), Some(500));
/// assert_eq!(event.resource(), Some("configmaps"));
/// assert_eq!(event.code(), Some(200));
/// assert!(event.is_request() && !event.is_watch());
/// ```
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AuditEvent {
    /// The audit level (`Metadata` under the environment's policy).
    pub level: String,
    /// One id per request, shared by its stages.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// The stage this event records.
    pub stage: Stage,
    /// The request's path and query, as sent.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The Kubernetes verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, ...
    pub verb: String,
    /// Who made the request (`admin` for the environment's clients).
    pub user: UserInfo,
    /// Who the request acted as, when it impersonated a user (`Impersonate-User`): the
    /// identity RBAC authorized.
    #[serde(default)]
    pub impersonated_user: Option<UserInfo>,
    /// The client's addresses.
    #[serde(default, rename = "sourceIPs")]
    pub source_ips: Vec<String>,
    /// The client's User-Agent header.
    #[serde(default)]
    pub user_agent: Option<String>,
    /// The object or collection the request is about, for resource requests.
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    /// The answer's status (absent before a response exists).
    #[serde(default)]
    pub response_status: Option<ResponseStatus>,
    /// When the server received the request.
    pub request_received_timestamp: jiff::Timestamp,
    /// When this stage was reached.
    pub stage_timestamp: jiff::Timestamp,
}

/// The stage an [`AuditEvent`] records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub enum Stage {
    /// The request arrived (omitted by the environment's policy).
    RequestReceived,
    /// A long-running request's response headers were sent (a watch is open).
    ResponseStarted,
    /// The response was completed.
    ResponseComplete,
    /// The handler panicked.
    Panic,
    /// A stage this crate does not know.
    #[serde(other)]
    Other,
}

/// The authenticated user of a request.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct UserInfo {
    /// The user name.
    #[serde(default)]
    pub username: String,
    /// The user's groups.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// What a request was about.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ObjectRef {
    /// The resource (plural), e.g. `configmaps`.
    pub resource: Option<String>,
    /// The namespace, for namespaced requests.
    pub namespace: Option<String>,
    /// The object's name, for requests about one object.
    pub name: Option<String>,
    /// The API group (absent for the core group).
    pub api_group: Option<String>,
    /// The API version.
    pub api_version: Option<String>,
    /// The subresource, e.g. `status`.
    pub subresource: Option<String>,
}

/// The status of a response.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct ResponseStatus {
    /// The HTTP status code.
    pub code: Option<u16>,
    /// `Success` or `Failure`, for errors.
    pub status: Option<String>,
    /// The machine-readable reason, e.g. `NotFound`, `Expired`.
    pub reason: Option<String>,
    /// The human-readable message.
    pub message: Option<String>,
}

impl AuditEvent {
    /// The request's path, without the query.
    pub fn path(&self) -> &str {
        self.request_uri
            .split_once('?')
            .map_or(&self.request_uri, |(path, _)| path)
    }

    /// The decoded query parameters, in order.
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        let Some((_, query)) = self.request_uri.split_once('?') else {
            return Vec::new();
        };
        // `+` is a space and `%XX` a byte, as Go's `url.ParseQuery` decodes them.
        form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    /// The first value of the query parameter `name`, decoded.
    pub fn query(&self, name: &str) -> Option<String> {
        self.query_pairs()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// `resourceVersion` (`Some("")` when sent empty, `None` when absent).
    pub fn resource_version(&self) -> Option<String> {
        self.query("resourceVersion")
    }

    /// `resourceVersionMatch` (`NotOlderThan`, `Exact`).
    pub fn resource_version_match(&self) -> Option<String> {
        self.query("resourceVersionMatch")
    }

    /// `sendInitialEvents`, for streaming lists.
    pub fn send_initial_events(&self) -> Option<bool> {
        self.query("sendInitialEvents")
            .map(|v| v == "true" || v == "1")
    }

    /// `allowWatchBookmarks`.
    pub fn allow_watch_bookmarks(&self) -> Option<bool> {
        self.query("allowWatchBookmarks")
            .map(|v| v == "true" || v == "1")
    }

    /// `limit`, for paged lists.
    pub fn limit(&self) -> Option<u64> {
        self.query("limit").and_then(|v| v.parse().ok())
    }

    /// `continue`, the token of a page after the first.
    pub fn continue_token(&self) -> Option<String> {
        self.query("continue")
    }

    /// `timeoutSeconds`.
    pub fn timeout_seconds(&self) -> Option<u64> {
        self.query("timeoutSeconds").and_then(|v| v.parse().ok())
    }

    /// `labelSelector`.
    pub fn label_selector(&self) -> Option<String> {
        self.query("labelSelector")
    }

    /// `fieldSelector`.
    pub fn field_selector(&self) -> Option<String> {
        self.query("fieldSelector")
    }

    /// Whether this is a watch (verb `watch`, which the server derives from `watch=true`).
    pub fn is_watch(&self) -> bool {
        self.verb == "watch"
    }

    /// Whether this event stands for its request: `ResponseStarted` for a watch (it is open),
    /// `ResponseComplete` for anything else. Filtering on this counts each request once.
    pub fn is_request(&self) -> bool {
        match self.stage {
            Stage::ResponseStarted => self.is_watch(),
            Stage::ResponseComplete => !self.is_watch(),
            _ => false,
        }
    }

    /// The response's HTTP status code.
    pub fn code(&self) -> Option<u16> {
        self.response_status.as_ref().and_then(|s| s.code)
    }

    /// The resource (plural) the request is about.
    pub fn resource(&self) -> Option<&str> {
        self.object_ref.as_ref().and_then(|o| o.resource.as_deref())
    }

    /// The namespace the request is about.
    pub fn namespace(&self) -> Option<&str> {
        self.object_ref
            .as_ref()
            .and_then(|o| o.namespace.as_deref())
    }

    /// The name of the object the request is about.
    pub fn name(&self) -> Option<&str> {
        self.object_ref.as_ref().and_then(|o| o.name.as_deref())
    }
}

/// Every event in the audit log at `path`, in order. A last line still being written (no
/// newline yet) is left for the next read.
pub fn read_audit_log(path: &Path) -> Result<Vec<AuditEvent>, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        // The apiserver creates the file on its first event.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("reading the audit log", path, e)),
    };
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|source| Error::AuditLine {
                path: path.to_owned(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

/// One event per request ([`AuditEvent::is_request`]), in the order the server logged them.
pub fn requests(events: impl IntoIterator<Item = AuditEvent>) -> Vec<AuditEvent> {
    events.into_iter().filter(AuditEvent::is_request).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_queries_like_go() {
        let line = r#"{"level":"Metadata","auditID":"a","stage":"ResponseComplete","verb":"list",
            "requestURI":"/api/v1/pods?labelSelector=a%3Db+c&x=100%&y=%zz%41&z=%4",
            "user":{"username":"admin"},"requestReceivedTimestamp":"2026-01-02T03:04:05Z",
            "stageTimestamp":"2026-01-02T03:04:05Z"}"#;
        let event: AuditEvent = serde_json::from_str(line).unwrap();
        let pairs = event.query_pairs();
        let value = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(value("labelSelector"), Some("a=b c"));
        assert_eq!(value("x"), Some("100%"));
        assert_eq!(value("y"), Some("%zzA"));
        assert_eq!(value("z"), Some("%4"));
    }
}
