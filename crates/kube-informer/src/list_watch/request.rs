//! Sending a LIST or WATCH request and reading its answer ourselves, where kube's client
//! would drop or hide what the reflector needs.
//!
//! - **Every answer reaches the reflector.** kube 5 builds every client from a `Config` with
//!   `default_retry: true`: a retry layer that silently replays a request answered 429, 503
//!   or 504 up to 15 times, from 5 ms doubling. Through it, a lasting 503 shows up as a
//!   request that never answers, the reflector's own backoff and Retry-After handling never
//!   run, and nothing reaches `on_error`. That layer replays a request only if it can clone
//!   its body; ours are sent with a body that cannot be cloned ([`unreplayable`]), so each
//!   LIST or WATCH goes to the server exactly once, whatever client the user built, and the
//!   reflector retries on its own jittered schedule. The user's client is not changed: its
//!   other requests are retried as before.
//! - **Retry-After survives.** kube's `request_text`/`request_stream` turn an error response
//!   into a `Status` from its body alone. A real kube-apiserver's 429 (max-in-flight, API
//!   Priority and Fairness) is a plain-text body with a `Retry-After` *header*: through
//!   kube, that header is lost. Here the header is read and carried in the `Status`
//!   (`details.retryAfterSeconds`, the field a JSON 429 would use), and a body that is not
//!   a `Status` is kept as the message.

use std::{
    convert::Infallible,
    future::{Ready, ready},
    task::{Context, Poll},
};

use bytes::Bytes;
use futures_util::{AsyncBufRead, TryStreamExt};
use http::{Request, Response, StatusCode, header::RETRY_AFTER};
use http_body_util::{BodyExt, Full};
use kube::{
    client::Body,
    core::{Status, response::StatusDetails},
};

/// Sends `request` through `client`; an error status becomes [`kube::Error::Api`].
pub(super) async fn send(
    client: &kube::Client,
    request: Request<Vec<u8>>,
) -> Result<Response<Body>, kube::Error> {
    let (parts, body) = request.into_parts();
    let body = unreplayable(body).await?;
    let response = client.send(Request::from_parts(parts, body)).await?;
    if response.status().is_client_error() || response.status().is_server_error() {
        return Err(error_response(response).await);
    }
    Ok(response)
}

/// `body` as a request body that kube's retry layer cannot clone, so it never replays the
/// request. kube has no public constructor for such a body, but `kube::Client::new` turns
/// the response body of any service into one: a throwaway client over a service that
/// answers with `body` makes it. (Checked end to end by `tests/reflector/faults.rs`, which
/// counts the server's requests through a client with kube's default retries.)
async fn unreplayable(body: Vec<u8>) -> Result<Body, kube::Error> {
    let maker = kube::Client::new(Answer(Bytes::from(body)), "default");
    Ok(maker.send(Request::new(Body::empty())).await?.into_body())
}

/// A service answering every request with its bytes.
struct Answer(Bytes);

impl tower_service::Service<Request<Body>> for Answer {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        ready(Ok(Response::new(Full::new(self.0.clone()))))
    }
}

/// Adds `name=value` (encoded) to `request`'s query when there is a value: a parameter
/// kube's `ListParams` and `WatchParams` have no field for.
pub(super) fn add_query(request: &mut Request<Vec<u8>>, name: &str, value: Option<&str>) {
    let Some(value) = value else { return };
    let uri = request.uri().to_string();
    let pair = form_urlencoded::Serializer::new(String::new())
        .append_pair(name, value)
        .finish();
    let separator = if request.uri().query().is_some() {
        "&"
    } else {
        "?"
    };
    // A URI with one more encoded pair is still a URI.
    *request.uri_mut() = format!("{uri}{separator}{pair}")
        .parse()
        .expect("an encoded query pair keeps the URI valid");
}

/// Whether a response's `Content-Type` is Kubernetes' protobuf (`stream=watch` or not).
pub(super) fn is_protobuf<B>(response: &Response<B>) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().starts_with(crate::protobuf::CONTENT_TYPE))
}

/// The whole body of `request`'s answer, and whether it is protobuf (else JSON).
pub(super) async fn bytes(
    client: &kube::Client,
    request: Request<Vec<u8>>,
) -> Result<(bool, Bytes), kube::Error> {
    let response = send(client, request).await?;
    let protobuf = is_protobuf(&response);
    Ok((protobuf, response.into_body().collect_bytes().await?))
}

/// The whole body of `request`'s answer, as text.
pub(super) async fn text(
    client: &kube::Client,
    request: Request<Vec<u8>>,
) -> Result<String, kube::Error> {
    let body = send(client, request)
        .await?
        .into_body()
        .collect_bytes()
        .await?;
    String::from_utf8(body.to_vec()).map_err(kube::Error::FromUtf8)
}

/// The body of `request`'s answer, to be read as it arrives, and whether it is protobuf
/// frames (else JSON lines).
pub(super) async fn stream(
    client: &kube::Client,
    request: Request<Vec<u8>>,
) -> Result<(bool, impl AsyncBufRead + Send + Unpin + 'static), kube::Error> {
    let response = send(client, request).await?;
    let protobuf = is_protobuf(&response);
    let body = response
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other)
        .into_async_read();
    Ok((protobuf, body))
}

/// The `Status` of an error response: its JSON body, or one made from its code and text;
/// `Retry-After` (seconds) in `details.retryAfterSeconds` either way.
async fn error_response(response: Response<Body>) -> kube::Error {
    let code = response.status();
    let protobuf = is_protobuf(&response);
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u32>().ok());
    let body = match response.into_body().collect_bytes().await {
        Ok(body) => body,
        Err(err) => return err,
    };
    // Asked for protobuf, the API server answers errors in protobuf too.
    let decoded = if protobuf {
        crate::protobuf::decode_status(&body).ok()
    } else {
        serde_json::from_slice::<Status>(&body).ok()
    };
    let mut status = match decoded {
        Some(status) if status.code != 0 || !status.message.is_empty() => status,
        _ => plain_status(code, &String::from_utf8_lossy(&body)),
    };
    if status.code == 0 {
        status.code = code.as_u16();
    }
    if let Some(seconds) = retry_after.filter(|s| *s > 0) {
        let details = status.details.get_or_insert_with(empty_details);
        if details.retry_after_seconds == 0 {
            details.retry_after_seconds = seconds;
        }
    }
    kube::Error::Api(status.boxed())
}

/// A `Status` for a response whose body is not one (plain text, HTML from a proxy).
fn plain_status(code: StatusCode, body: &str) -> Status {
    let reason = match code {
        StatusCode::TOO_MANY_REQUESTS => "TooManyRequests",
        StatusCode::UNAUTHORIZED => "Unauthorized",
        StatusCode::FORBIDDEN => "Forbidden",
        StatusCode::NOT_FOUND => "NotFound",
        StatusCode::GONE => "Expired",
        StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
        StatusCode::GATEWAY_TIMEOUT => "Timeout",
        _ if code.is_server_error() => "InternalError",
        _ => "Unknown",
    };
    let text: String = body.trim().chars().take(512).collect();
    let message = if text.is_empty() {
        code.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    Status::failure(&message, reason).with_code(code.as_u16())
}

fn empty_details() -> StatusDetails {
    StatusDetails {
        name: String::new(),
        group: String::new(),
        kind: String::new(),
        uid: String::new(),
        causes: Vec::new(),
        retry_after_seconds: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_pair_is_added_encoded() {
        let mut list = Request::get("/api/v1/pods?limit=500")
            .body(Vec::new())
            .unwrap();
        add_query(
            &mut list,
            "shardSelector",
            Some("shardRange(a, '0x1', '0x2')"),
        );
        assert_eq!(
            list.uri().to_string(),
            "/api/v1/pods?limit=500&shardSelector=shardRange%28a%2C+%270x1%27%2C+%270x2%27%29"
        );
        let mut bare = Request::get("/api/v1/pods").body(Vec::new()).unwrap();
        add_query(&mut bare, "x", Some("a b"));
        assert_eq!(bare.uri().to_string(), "/api/v1/pods?x=a+b");
        add_query(&mut bare, "y", None);
        assert_eq!(bare.uri().to_string(), "/api/v1/pods?x=a+b");
    }

    #[tokio::test]
    async fn an_unreplayable_body_keeps_its_bytes_and_cannot_be_cloned() {
        let body = unreplayable(b"{}".to_vec()).await.unwrap();
        assert!(
            body.try_clone().is_none(),
            "kube's retry layer could replay it"
        );
        assert_eq!(
            body.collect_bytes().await.unwrap(),
            Bytes::from_static(b"{}")
        );
        let empty = unreplayable(Vec::new()).await.unwrap();
        assert!(empty.try_clone().is_none());
        assert!(empty.collect_bytes().await.unwrap().is_empty());
    }

    async fn status_of(response: Response<Body>) -> Status {
        match error_response(response).await {
            kube::Error::Api(status) => *status,
            other => panic!("not an API error: {other}"),
        }
    }

    #[tokio::test]
    async fn a_plain_text_429_keeps_its_retry_after_header() {
        let response = Response::builder()
            .status(429)
            .header("content-type", "text/plain; charset=utf-8")
            .header("retry-after", "7")
            .body(Body::from(
                b"Too many requests, please try again later.\n".to_vec(),
            ))
            .unwrap();
        let status = status_of(response).await;
        assert_eq!(status.code, 429);
        assert_eq!(status.reason, "TooManyRequests");
        assert_eq!(status.message, "Too many requests, please try again later.");
        assert_eq!(status.details.unwrap().retry_after_seconds, 7);
    }

    #[tokio::test]
    async fn a_json_status_is_kept_and_the_header_fills_a_missing_retry_after() {
        let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"slow down","reason":"TooManyRequests","code":429}"#;
        let response = Response::builder()
            .status(429)
            .header("retry-after", "3")
            .body(Body::from(body.to_vec()))
            .unwrap();
        let status = status_of(response).await;
        assert_eq!(status.message, "slow down");
        assert_eq!(status.details.unwrap().retry_after_seconds, 3);

        let body = br#"{"kind":"Status","status":"Failure","message":"no","reason":"Forbidden","code":403}"#;
        let response = Response::builder()
            .status(403)
            .body(Body::from(body.to_vec()))
            .unwrap();
        let status = status_of(response).await;
        assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
        assert!(status.details.is_none());
    }

    #[tokio::test]
    async fn an_html_error_page_becomes_a_status_with_its_code() {
        let response = Response::builder()
            .status(502)
            .body(Body::from(b"<html>bad gateway</html>".to_vec()))
            .unwrap();
        let status = status_of(response).await;
        assert_eq!(status.code, 502);
        assert_eq!(status.reason, "InternalError");
        assert!(status.message.contains("bad gateway"));
    }
}
