//! The manager's HTTP endpoints: `/healthz`, `/readyz` (each with `?verbose`), `/metrics`
//! (Prometheus text) and, when on, `/debug/pprof/profile` (the last two `None` when served
//! securely instead), on one address, over HTTP/1.1 (hyper).

use std::{convert::Infallible, sync::Arc};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::{body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::health::{Probes, render};

/// Serves the endpoints on `listener` until `cancel`.
pub(crate) async fn serve(
    listener: TcpListener,
    probes: Arc<Probes>,
    registry: Option<Arc<Mutex<Registry>>>,
    profiling: bool,
    cancel: CancellationToken,
) {
    // Connections are tasks of this set: they end with the server (no detached task).
    let mut connections = tokio::task::JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            () = cancel.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let (probes, registry) = (probes.clone(), registry.clone());
        let service = service_fn(move |request: Request<Incoming>| {
            let (probes, registry) = (probes.clone(), registry.clone());
            async move {
                if profiling && request.uri().path() == "/debug/pprof/profile" {
                    return Ok(super::profile::cpu(request.uri().query()).await);
                }
                Ok::<_, Infallible>(answer(&request, &probes, registry.as_deref()))
            }
        });
        connections.spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            let _ = connection.await;
        });
    }
}

fn answer(
    request: &Request<Incoming>,
    probes: &Probes,
    registry: Option<&Mutex<Registry>>,
) -> Response<Full<Bytes>> {
    let verbose = request.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    });
    let (code, body, content_type) = match request.uri().path() {
        path @ ("/healthz" | "/livez") => {
            let (code, body) = render(&path[1..], &probes.healthz(), &[], verbose);
            (code, body, "text/plain; charset=utf-8")
        }
        "/readyz" => {
            let (code, body) = render(
                "readyz",
                &probes.readyz(),
                &probes.readyz_details(),
                verbose,
            );
            (code, body, "text/plain; charset=utf-8")
        }
        "/metrics" => match registry {
            Some(registry) => return metrics(registry),
            None => (
                404,
                "/metrics is served over HTTPS on the secure metrics port\n".to_owned(),
                "text/plain",
            ),
        },
        path => (
            404,
            format!("{path} not found; try /healthz, /readyz or /metrics\n"),
            "text/plain",
        ),
    };
    respond(code, body, content_type)
}

/// `/metrics`: the registry in Prometheus's text format.
pub(super) fn metrics(registry: &Mutex<Registry>) -> Response<Full<Bytes>> {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &registry.lock()) {
        Ok(()) => respond(
            200,
            text,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        Err(err) => respond(500, format!("encoding metrics failed: {err}"), "text/plain"),
    }
}

pub(super) fn respond(code: u16, body: String, content_type: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(value) = content_type.parse() {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}
