//! What went wrong in a list or watch, and what the reflector does about it.

use std::time::Duration;

/// A failure the reflector met and recovered from; given to the error handler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReflectorError {
    /// A LIST failed.
    #[error("list of {resource} failed: {source}")]
    List {
        /// What was listed.
        resource: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A WATCH could not be started or broke.
    #[error("watch of {resource} failed: {source}")]
    Watch {
        /// What was watched.
        resource: String,
        /// The client error.
        #[source]
        source: kube::Error,
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
    /// A watch closed within a second without any event: something is wrong upstream.
    #[error("watch of {resource} closed after {elapsed:?} without any event")]
    VeryShortWatch {
        /// What was watched.
        resource: String,
        /// How long it lasted.
        elapsed: Duration,
    },
    /// The server does not support streaming lists; paged LISTs are used from now on.
    #[error("streaming list of {resource} not supported ({reason}); falling back to LIST")]
    StreamingListUnsupported {
        /// What was listed.
        resource: String,
        /// What the server said.
        reason: String,
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

/// How to react to a client error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// 410 Gone / Expired: the resourceVersion is no longer available — relist.
    Gone,
    /// The resourceVersion is newer than the server has (`ResourceVersionTooLarge`).
    TooLarge,
    /// 429: wait as long as the server asked.
    Throttled(Duration),
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
        429 => Reaction::Throttled(Duration::from_secs(u64::from(retry_after.max(1)))),
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
