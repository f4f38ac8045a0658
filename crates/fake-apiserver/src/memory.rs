//! Clients that reach the server without a socket: every request gets its own in-memory
//! connection (a `tokio::io::duplex` pair), with the server's HTTP/1.1 on one end and
//! hyper's client on the other — the same bytes as over loopback TCP.
//!
//! This is for tests on a paused tokio clock (`start_paused`): the runtime then never waits
//! on the operating system for the server, so the clock only moves when every task,
//! the server's included, has nothing left to do — a schedule is a function of its seed.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::{Inner, http};

/// Bytes in flight per direction of one in-memory connection.
const WINDOW: usize = 64 * 1024;

/// The in-memory connections of one server: owned by it, ended when it stops.
pub(crate) struct Connections {
    inner: Arc<Inner>,
    stop: CancellationToken,
    accepting: CancellationToken,
    tasks: Mutex<JoinSet<()>>,
}

impl Connections {
    pub(crate) fn new(
        inner: Arc<Inner>,
        stop: CancellationToken,
        accepting: CancellationToken,
    ) -> Self {
        Self {
            inner,
            stop,
            accepting,
            tasks: Mutex::new(JoinSet::new()),
        }
    }

    /// Ends every connection and waits for their tasks.
    pub(crate) async fn close(&self) {
        let mut tasks = std::mem::take(&mut *self.tasks.lock());
        tasks.shutdown().await;
    }

    async fn request(
        self: Arc<Self>,
        request: hyper::Request<kube::client::Body>,
    ) -> Result<hyper::Response<Incoming>, Refused> {
        if self.stop.is_cancelled() || self.accepting.is_cancelled() {
            return Err(Refused::NotListening);
        }
        let (client_end, server_end) = tokio::io::duplex(WINDOW);
        let handler = self.inner.clone();
        let server = hyper::server::conn::http1::Builder::new()
            .title_case_headers(true)
            .serve_connection(
                TokioIo::new(server_end),
                hyper::service::service_fn(move |req| http::handle(handler.clone(), req)),
            );
        let (mut sender, client) = hyper::client::conn::http1::handshake(TokioIo::new(client_end))
            .await
            .map_err(Refused::Http)?;
        let stop = self.stop.clone();
        {
            let mut tasks = self.tasks.lock();
            while tasks.try_join_next().is_some() {}
            // Both ends run until the client lets go of the response (or the server stops).
            tasks.spawn(async move {
                tokio::select! {
                    _ = futures_util::future::join(server, client) => {}
                    () = stop.cancelled() => {}
                }
            });
        }
        sender.send_request(request).await.map_err(Refused::Http)
    }
}

/// Why an in-memory request got no response.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("fake-apiserver is not listening (stopped or terminated)")]
    NotListening,
    #[error("in-memory connection to fake-apiserver failed: {0}")]
    Http(hyper::Error),
}

/// The `tower` service under a [`kube::Client`] that talks to the server in memory.
#[derive(Clone)]
pub(crate) struct MemoryService(pub(crate) Arc<Connections>);

impl tower::Service<hyper::Request<kube::client::Body>> for MemoryService {
    type Response = hyper::Response<Incoming>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: hyper::Request<kube::client::Body>) -> Self::Future {
        let connections = self.0.clone();
        Box::pin(async move { Ok(connections.request(request).await?) })
    }
}
