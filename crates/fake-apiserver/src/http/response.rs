//! Response bodies and headers, as the real server sends them.

use std::{
    io,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::{Response, body::Frame, header};
use serde_json::Value;

use crate::{
    protobuf::{self, Format},
    status::ApiError,
};

pub(crate) type Body = UnsyncBoxBody<Bytes, io::Error>;

/// A finished response: its head, and a body that reports its bytes to the request log.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<u32>,
    pub(crate) content_type: &'static str,
    /// Ask the client to close the connection (`Connection: close`).
    pub(crate) close: bool,
    pub(crate) body: ReplyBody,
}

pub(crate) enum ReplyBody {
    Full(Bytes),
    Stream(Box<dyn Stream<Item = Result<Bytes, io::Error>> + Send + Unpin>),
}

impl Reply {
    pub(crate) fn json(status: u16, value: &Value) -> Self {
        Self::bytes(
            status,
            Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
        )
    }

    pub(crate) fn bytes(status: u16, body: Bytes) -> Self {
        Self {
            status,
            retry_after: None,
            content_type: "application/json",
            close: false,
            body: ReplyBody::Full(body),
        }
    }

    pub(crate) fn error(err: &ApiError) -> Self {
        Self::error_in(err, Format::Json)
    }

    /// An error's `Status`, in the encoding the client asked for (plain text stays plain).
    pub(crate) fn error_in(err: &ApiError, format: Format) -> Self {
        let reply = if err.plain_text {
            let message = err.body["message"].as_str().unwrap_or_default();
            Self {
                content_type: "text/plain; charset=utf-8",
                ..Self::bytes(err.code, Bytes::from(format!("{message}\n")))
            }
        } else if format.is_protobuf() {
            Self::protobuf(err.code, protobuf::status(&err.body))
        } else {
            Self::json(err.code, &err.body)
        };
        Self {
            retry_after: err.retry_after,
            close: err.close,
            ..reply
        }
    }

    /// A protobuf body.
    pub(crate) fn protobuf(status: u16, body: Vec<u8>) -> Self {
        Self {
            content_type: protobuf::CONTENT_TYPE,
            ..Self::bytes(status, Bytes::from(body))
        }
    }

    pub(crate) fn stream(
        status: u16,
        stream: impl Stream<Item = Result<Bytes, io::Error>> + Send + Unpin + 'static,
    ) -> Self {
        Self {
            status,
            retry_after: None,
            content_type: "application/json",
            close: false,
            body: ReplyBody::Stream(Box::new(stream)),
        }
    }

    /// The HTTP response; body bytes are added to `counter` as they are sent.
    pub(crate) fn into_response(self, counter: Arc<AtomicU64>, audit_id: String) -> Response<Body> {
        let body: Body = match self.body {
            ReplyBody::Full(bytes) => {
                counter.store(bytes.len() as u64, Ordering::Relaxed);
                Full::new(bytes)
                    .map_err(|never| match never {})
                    .boxed_unsync()
            }
            ReplyBody::Stream(stream) => {
                let frames = stream.map(move |chunk| {
                    chunk.map(|bytes| {
                        counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                        Frame::data(bytes)
                    })
                });
                BodyExt::boxed_unsync(StreamBody::new(frames))
            }
        };
        let mut response = Response::builder()
            .status(self.status)
            .header("Audit-Id", audit_id)
            .header(header::CACHE_CONTROL, "no-cache, private")
            .header(header::CONTENT_TYPE, self.content_type)
            .header(
                "X-Kubernetes-Pf-Flowschema-Uid",
                "c0ffee00-fa4e-4a91-9d0e-000000000001",
            )
            .header(
                "X-Kubernetes-Pf-Prioritylevel-Uid",
                "c0ffee00-fa4e-4a91-9d0e-000000000002",
            );
        if self.content_type.starts_with("text/plain") {
            response = response.header("X-Content-Type-Options", "nosniff");
        }
        if self.close {
            response = response.header(header::CONNECTION, "close");
        }
        if let Some(seconds) = self.retry_after {
            response = response.header(header::RETRY_AFTER, seconds.to_string());
        }
        response.body(body).expect("static headers are valid")
    }
}

/// Decodes a query string (`+` is a space, `%XX` a byte), as Go's `url.ParseQuery` does.
pub(crate) fn parse_query(query: Option<&str>) -> std::collections::BTreeMap<String, String> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}
