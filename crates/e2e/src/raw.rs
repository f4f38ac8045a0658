//! Raw requests whose answers the write scenarios compare field by field across the two
//! servers: the object, or the error's code, reason and cause reasons.

use kube::Client;
use serde_json::Value;

/// What a request came back with: the object, or the error's code, reason and causes.
/// Answers compare equal by those (an error's message is read with [`Answer::message`]).
#[derive(Debug)]
pub enum Answer {
    /// The object (or Scale, or Status of a delete) answered.
    Object(Value),
    /// An error Status.
    Error {
        /// The HTTP status.
        code: u16,
        /// The Status reason (empty when the server gave none).
        reason: String,
        /// The reasons of the details' causes.
        causes: Vec<String>,
        /// The Status message.
        message: String,
        /// Each cause as `(field, message)`, in the answer's order (not compared).
        fields: Vec<(String, String)>,
    },
}

impl PartialEq for Answer {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Answer::Object(a), Answer::Object(b)) => a == b,
            (
                Answer::Error {
                    code,
                    reason,
                    causes,
                    ..
                },
                Answer::Error {
                    code: c,
                    reason: r,
                    causes: cs,
                    ..
                },
            ) => (code, reason, causes) == (c, r, cs),
            _ => false,
        }
    }
}

impl Answer {
    /// The object.
    ///
    /// # Panics
    /// On an error answer.
    pub fn object(self) -> Value {
        match self {
            Answer::Object(v) => v,
            Answer::Error { .. } => panic!("expected an object, got {self:?}"),
        }
    }

    /// The error's message (empty for an object).
    pub fn message(&self) -> &str {
        match self {
            Answer::Object(_) => "",
            Answer::Error { message, .. } => message,
        }
    }
}

/// Sends `body` to `path` and sorts the answer.
///
/// # Panics
/// On a transport error (anything but an API error).
pub async fn send(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> Answer {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(body.as_bytes().to_vec())
        .expect("a valid request");
    match client.request::<Value>(request).await {
        Ok(value) => Answer::Object(value),
        Err(kube::Error::Api(status)) => Answer::Error {
            code: status.code,
            reason: status.reason.clone(),
            causes: status
                .details
                .as_ref()
                .map(|d| d.causes.iter().map(|c| c.reason.clone()).collect())
                .unwrap_or_default(),
            message: status.message.clone(),
            fields: status
                .details
                .as_ref()
                .map(|d| {
                    d.causes
                        .iter()
                        .map(|c| (c.field.clone(), c.message.clone()))
                        .collect()
                })
                .unwrap_or_default(),
        },
        Err(other) => panic!("{method} {path}: {other}"),
    }
}

/// The error answer with `code`, `reason` and cause reasons `causes`.
pub fn error(code: u16, reason: &str, causes: &[&str]) -> Answer {
    Answer::Error {
        code,
        reason: reason.to_owned(),
        causes: causes.iter().map(|c| (*c).to_owned()).collect(),
        message: String::new(),
        fields: Vec::new(),
    }
}
