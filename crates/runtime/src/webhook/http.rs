//! One webhook request over HTTP: the route found by path, the method, content type and
//! size checked, then the route's answer (a handler's panic or hang is caught where the
//! request's uid is known, see [`guarded`](super::guarded)).

use std::{collections::HashMap, sync::Arc, time::Duration};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use super::Route;

/// The routes and limits every request is served with.
pub(super) struct Routes {
    pub(super) routes: HashMap<String, Arc<dyn Route>>,
    pub(super) max_request_bytes: usize,
    pub(super) handler_timeout: Duration,
}

impl Routes {
    pub(super) async fn answer(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = request.uri().path().to_owned();
        // The caller's deadline, when it says one, cuts the handler's time.
        let timeout = super::deadline::budget(self.handler_timeout, request.uri().query());
        let Some(route) = self.routes.get(&path) else {
            let known: Vec<&str> = self.routes.keys().map(String::as_str).collect();
            let message = format!("no webhook at {path}; served: {}\n", known.join(", "));
            return plain(StatusCode::NOT_FOUND, message);
        };
        // Counted in flight until answered, or until the connection drops the future.
        let serving = super::metrics::Serving::start(&path);
        let response = Self::answer_route(
            &path,
            route.as_ref(),
            request,
            timeout,
            self.max_request_bytes,
        )
        .await;
        serving.answered(response.status().as_u16());
        response
    }

    async fn answer_route(
        path: &str,
        route: &dyn Route,
        request: Request<Incoming>,
        timeout: Duration,
        limit: usize,
    ) -> Response<Full<Bytes>> {
        if request.method() != Method::POST {
            let message = format!("{path} takes POST, not {}\n", request.method());
            return plain(StatusCode::METHOD_NOT_ALLOWED, message);
        }
        // Refusals from here on are answered as reviews, so the API server shows the
        // client why (as controller-runtime does) instead of applying the failure policy
        // (which it does when even the uid cannot be read: a body too large).
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let too_large = || {
            let message =
                format!("the request is larger than this webhook's limit of {limit} bytes");
            review(route.failure("", 413, &message))
        };
        if declared.is_some_and(|length| length > limit as u64) {
            return too_large();
        }
        // One budget for reading the body and answering: a slow upload leaves the handler
        // what is left of it, so the answer never comes after the caller's deadline.
        let deadline = tokio::time::Instant::now() + timeout;
        // The body within the budget: a client that stops sending holds nothing.
        let read = Limited::new(request.into_body(), limit).collect();
        let body = match tokio::time::timeout_at(deadline, read).await {
            Ok(Ok(body)) => body.to_bytes(),
            Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
                return too_large();
            }
            Ok(Err(error)) => {
                let message = format!("cannot read the request: {error}");
                return review(route.failure("", 400, &message));
            }
            Err(_) => {
                let message = format!("the request body did not arrive within {timeout:?}");
                return review(route.failure("", 408, &message));
            }
        };
        if !is_json(&content_type) {
            let message = format!("the body must be application/json, not {content_type:?}");
            return review(route.failure(&uid_of(&body), 400, &message));
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let budget = super::Budget {
            total: timeout,
            left,
        };
        review(route.answer(body, budget).await)
    }
}

/// A review's `request.uid` (admission and conversion reviews alike), `""` if unreadable.
pub(super) fn uid_of(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Envelope {
        request: Option<Uid>,
    }
    #[derive(serde::Deserialize)]
    struct Uid {
        #[serde(default)]
        uid: String,
    }
    serde_json::from_slice::<Envelope>(body)
        .ok()
        .and_then(|e| e.request)
        .map(|r| r.uid)
        .unwrap_or_default()
}

fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

fn review(body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn plain(code: StatusCode, message: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(message)));
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
