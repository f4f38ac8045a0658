//! The HTTPS accept loop the webhook server and the secure metrics endpoint share: TLS with
//! a reloading certificate, HTTP/1.1, bounded handshakes and header reads, and every
//! connection a task of the server that ends with it.

use std::{convert::Infallible, pin::pin, sync::Arc, time::Duration};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{Request, Response};
use http_body_util::Full;
use hyper::{body::Incoming, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{net::TcpListener, task::JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::CertWatcher;

/// Answers one request.
pub(crate) type Handle =
    Arc<dyn Fn(Request<Incoming>) -> BoxFuture<'static, Response<Full<Bytes>>> + Send + Sync>;

/// How long a client may take to finish its TLS handshake, or to send a request's headers.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long open connections may take to finish their requests once the server stops.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Serves `handle` over TLS on `listener` until `cancel`, re-reading the certificate as
/// `watcher`'s source says; then lets each connection finish its request (at most
/// [`CLOSE_GRACE`]) and returns once all have ended.
pub(crate) async fn serve(
    listener: TcpListener,
    watcher: CertWatcher,
    handle: Handle,
    cancel: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(watcher.server_config());
    let mut reload = pin!(watcher.watch());
    let mut connections = JoinSet::new();
    let mut accept_failing = false;
    loop {
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            () = cancel.cancelled() => break,
            () = &mut reload => unreachable!("the certificate watcher never ends"),
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                accept_failing = false;
                stream
            }
            Err(error) => {
                // Out of file descriptors, say: back off instead of spinning.
                if !accept_failing {
                    tracing::warn!(%error, "cannot accept connections");
                    accept_failing = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, handle, cancel) = (acceptor.clone(), handle.clone(), cancel.clone());
        connections.spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!("TLS handshake timed out");
                    return;
                }
            };
            let service = service_fn(move |request| {
                let answer = handle(request);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(tls), service);
            let mut connection = pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = cancel.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(CLOSE_GRACE, connection).await;
                }
            }
        });
    }
    while connections.join_next().await.is_some() {}
}
