//! What went wrong in a list or watch, and what the reflector does about it.

use std::time::Duration;

/// A failure the reflector met and recovered from; given to the error handler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReflectorError {
    /// A LIST failed.
    #[error("list of {resource} failed: {}", describe(source))]
    List {
        /// What was listed.
        resource: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A WATCH could not be started or broke.
    #[error("watch of {resource} failed: {}", describe(source))]
    Watch {
        /// What was watched.
        resource: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A request got no answer in time (a LIST page, or the headers of a WATCH); it is
    /// retried with backoff.
    #[error("{request} of {resource} got no answer within {after:?}; retrying")]
    Timeout {
        /// What was requested.
        resource: String,
        /// `"LIST"` or `"WATCH"`.
        request: &'static str,
        /// The deadline that passed.
        after: Duration,
    },
    /// The server ended a watch with an ERROR event.
    #[error("watch of {resource} ended by the server: {code} {reason}: {message}")]
    WatchStatus {
        /// What was watched.
        resource: String,
        /// The status code (410: the resourceVersion is too old, a relist follows).
        code: u16,
        /// The status reason.
        reason: String,
        /// The status message.
        message: String,
    },
    /// A watch received nothing for longer than the idle limit (a dead connection?).
    #[error("watch of {resource} was silent for {0:?}; resuming it", .idle)]
    Idle {
        /// What was watched.
        resource: String,
        /// How long it was silent.
        idle: Duration,
    },
    /// A watch ended well before its timeout. Counted as a failure: the next watch waits
    /// for the backoff, so a server that closes every watch at once is not hammered.
    #[error("watch of {resource} ended after {elapsed:?} with {events} events; backing off")]
    EarlyWatchEnd {
        /// What was watched.
        resource: String,
        /// How long it lasted.
        elapsed: Duration,
        /// How many events it delivered.
        events: usize,
    },
    /// The server refused a streaming list in one of the ways a server without the feature
    /// does; this sync uses a paged LIST, and streaming is tried again after
    /// [`streaming_retry`](super::ReflectorOptions::streaming_retry).
    #[error("streaming list of {resource} not supported ({reason}); falling back to LIST")]
    StreamingListUnsupported {
        /// What was listed.
        resource: String,
        /// What the server said.
        reason: String,
    },
    /// The server gave a resourceVersion the reflector cannot resume from (empty, `"0"`,
    /// or not a number); it was not adopted.
    #[error("{resource}: ignored the unusable resourceVersion {value:?} of a {context}")]
    InvalidResourceVersion {
        /// What was listed or watched.
        resource: String,
        /// Where it came from: `"LIST"`, `"bookmark"`, `"watch event"`, ...
        context: &'static str,
        /// The value.
        value: String,
    },
    /// An object had no key and was skipped (the cache is unchanged).
    #[error("{resource}: skipped an object without a key: {source}")]
    InvalidObject {
        /// What was watched.
        resource: String,
        /// Why it has no key.
        #[source]
        source: crate::KeyError,
    },
}

impl ReflectorError {
    /// The HTTP status the server answered, when the failure is an answer (a LIST or WATCH
    /// refused with 403, 429, 503, ..., or a watch ended by an ERROR event).
    ///
    /// ```
    /// use kube_informer::reflector::ReflectorError;
    ///
    /// fn throttled(err: &ReflectorError) -> bool {
    ///     err.status_code() == Some(429)
    /// }
    /// # let _ = throttled;
    /// ```
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::List { source, .. } | Self::Watch { source, .. } => match source {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            },
            Self::WatchStatus { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// A short label for metrics: the status code (`"503"`), or what happened
    /// (`"connection"`, `"timeout"`, `"idle"`, ...).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn cause(&self) -> String {
        if let Some(code) = self.status_code() {
            return code.to_string();
        }
        match self {
            Self::List { .. } | Self::Watch { .. } => "connection",
            Self::Timeout { .. } => "timeout",
            Self::Idle { .. } => "idle",
            Self::EarlyWatchEnd { .. } => "early_end",
            Self::StreamingListUnsupported { .. } => "streaming_unsupported",
            Self::InvalidResourceVersion { .. } => "invalid_resource_version",
            Self::InvalidObject { .. } => "invalid_object",
            Self::WatchStatus { .. } => "watch_status",
        }
        .to_owned()
    }
}

/// A client error as a reader wants it: the server's answer as `503 ServiceUnavailable:
/// message` (kube's own text repeats it with a Debug dump of the `Status`), anything else
/// with its causes.
fn describe(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => {
            let mut text = format!("{} {}: {}", status.code, status.reason, status.message);
            if let Some(seconds) = status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
            {
                text.push_str(&format!(" (Retry-After: {seconds}s)"));
            }
            text
        }
        other => causes(other),
    }
}

/// An error and its causes, outermost first ("client error (Connect): tcp connect error:
/// Connection refused (os error 111)"): the root cause is what the reader needs.
pub(crate) fn causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

/// How to react to a client error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// 410 Gone / Expired: the resourceVersion is no longer available — relist.
    Gone,
    /// The resourceVersion is newer than the server has (`ResourceVersionTooLarge`).
    TooLarge,
    /// 429: wait at least as long as the server asked (if it said).
    Throttled(Option<Duration>),
    /// Anything else: back off and retry.
    Retry,
}

pub(crate) fn react_to_status(
    code: u16,
    reason: &str,
    causes_too_large: bool,
    retry_after: u32,
) -> Reaction {
    match code {
        410 => Reaction::Gone,
        _ if reason == "Expired" || reason == "Gone" => Reaction::Gone,
        _ if causes_too_large => Reaction::TooLarge,
        429 => Reaction::Throttled(
            (retry_after > 0).then(|| Duration::from_secs(u64::from(retry_after))),
        ),
        _ => Reaction::Retry,
    }
}

pub(crate) fn react(err: &kube::Error) -> Reaction {
    match err {
        kube::Error::Api(status) => {
            let details = status.details.as_ref();
            let too_large = details.is_some_and(|d| {
                d.causes
                    .iter()
                    .any(|c| c.reason == "ResourceVersionTooLarge")
            }) || status.message.contains("Too large resource version");
            let retry_after = details.map_or(0, |d| d.retry_after_seconds);
            react_to_status(status.code, &status.reason, too_large, retry_after)
        }
        _ => Reaction::Retry,
    }
}

/// Whether `code`/`message` is one of the ways a server without streaming lists refuses
/// one: `sendInitialEvents` rejected as invalid (400/422, the WatchList feature off), the
/// watch method missing (405), or storage without progress notifications (500 "the
/// required storage feature RequestWatchProgress is disabled", etcd < 3.4.31). A 401 or
/// 403 is not: that is a permission problem, reported as such.
pub(crate) fn refuses_streaming(code: u16, message: &str) -> bool {
    match code {
        400 | 405 | 422 => true,
        500 | 501 => {
            message.contains("RequestWatchProgress")
                || message.contains("sendInitialEvents")
                || message.contains("WatchList")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_documented_shapes_refuse_streaming_lists() {
        let storage = "a watch stream was requested by the client but the required storage feature \
             RequestWatchProgress is disabled";
        assert!(refuses_streaming(500, storage));
        assert!(refuses_streaming(422, "sendInitialEvents: Forbidden"));
        assert!(
            !refuses_streaming(403, "forbidden"),
            "RBAC, not the feature"
        );
        assert!(!refuses_streaming(401, "Unauthorized"));
        assert!(!refuses_streaming(500, "etcdserver: request timed out"));
        assert!(!refuses_streaming(429, "Too many requests"));
    }

    #[test]
    fn an_answer_reads_as_code_reason_and_message() {
        let mut status =
            kube::core::Status::failure("too many requests", "TooManyRequests").with_code(429);
        status.details =
            Some(serde_json::from_value(serde_json::json!({"retryAfterSeconds": 3})).unwrap());
        let err = ReflectorError::List {
            resource: "Pod".into(),
            source: kube::Error::Api(status.boxed()),
        };
        assert_eq!(
            err.to_string(),
            "list of Pod failed: 429 TooManyRequests: too many requests (Retry-After: 3s)"
        );
        assert_eq!(err.status_code(), Some(429));
        assert_eq!(err.cause(), "429");
    }

    #[test]
    fn a_429_without_retry_after_backs_off() {
        assert_eq!(
            react_to_status(429, "", false, 0),
            Reaction::Throttled(None)
        );
        assert_eq!(
            react_to_status(429, "", false, 4),
            Reaction::Throttled(Some(Duration::from_secs(4)))
        );
    }
}
