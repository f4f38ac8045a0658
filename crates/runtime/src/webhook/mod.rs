//! Admission and conversion webhooks, served over HTTPS: controller-runtime's webhook
//! server, with typed handlers.
//!
//! - **Validating** handlers get the request with the object decoded as their type and
//!   answer [`Allowed`] (with warnings, if any) or [`Denied`].
//! - **Mutating** handlers get the object and return it as it should be stored; the JSON
//!   patch the API server needs is computed from the difference. Fields the handler's type
//!   does not know are never removed by that patch (the difference is between two typed
//!   objects), unlike a patch against the raw object.
//! - **Conversion** of a custom resource with several versions: a function from an object
//!   to the version asked for (its `apiVersion` is set for you).
//!
//! What cannot go wrong silently: a handler that panics, fails to answer within
//! [`handler_timeout`](WebhookServer::handler_timeout), gets a body over
//! [`max_request_bytes`](WebhookServer::max_request_bytes), a body that is not JSON or not
//! of the handler's type, a body that does not arrive within the handler timeout — each is
//! answered with a refusal naming it (code 500, 413, 408 or 400), never a dropped
//! connection. (A refusal of a body too large to read has no uid: the API server then applies
//! the webhook's `failurePolicy`.) Conversion functions are synchronous and not interrupted:
//! a panic is caught and answered, but they must return. The certificate is re-read when its
//! files change ([`ServingCert`]).
//!
//! A webhook server runs on every replica, leader or not (the API server calls any of them
//! through the Service): give it to [`Manager::add_webhooks`](crate::Manager::add_webhooks),
//! or run it yourself with [`BoundWebhookServer::run`].
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::{ResourceExt, core::admission::AdmissionRequest};
//! use kube_informer_runtime::{
//!     tls::ServingCert,
//!     webhook::{Allowed, Denied, WebhookServer},
//! };
//!
//! # async fn demo(mut manager: kube_informer_runtime::Manager) -> Result<(), Box<dyn std::error::Error>> {
//! let webhooks = WebhookServer::new(ServingCert::from_dir("/tmp/k8s-webhook-server/serving-certs"))
//!     .validating("/validate-configmaps", |request: AdmissionRequest<ConfigMap>| async move {
//!         let keys = request.object.as_ref().and_then(|cm| cm.data.as_ref()).map_or(0, |d| d.len());
//!         if keys > 100 {
//!             return Err(Denied::new(format!("{keys} keys; at most 100")).code(422));
//!         }
//!         Ok(Allowed::new())
//!     })
//!     .mutating("/default-configmaps", |mut cm: ConfigMap, _request| async move {
//!         cm.labels_mut().entry("team".into()).or_insert_with(|| "unowned".into());
//!         Ok(cm)
//!     })
//!     .conversion("/convert", |mut object: serde_json::Value, to: &str| {
//!         // v1 has `spec.size`, v2 `spec.replicas`: move it across in either direction.
//!         let (from, into) = if to.ends_with("/v2") { ("size", "replicas") } else { ("replicas", "size") };
//!         if let Some(spec) = object.get_mut("spec").and_then(|s| s.as_object_mut()) {
//!             if let Some(value) = spec.remove(from) {
//!                 spec.insert(into.to_owned(), value);
//!             }
//!         }
//!         Ok::<_, String>(object)
//!     })
//!     .bind()
//!     .await?; // 0.0.0.0:9443, certificate read now: a missing file fails here
//! manager.add_webhooks(webhooks);
//! manager.run().await?;
//! # Ok(()) }
//! ```

mod admission;
pub mod certs;
mod conversion;
mod deadline;
mod http;
mod metrics;

use std::{
    collections::HashMap, fmt::Display, future::Future, net::SocketAddr, panic::AssertUnwindSafe,
    sync::Arc, time::Duration,
};

use bytes::Bytes;
use futures_util::{FutureExt, future::BoxFuture};
use kube::{
    Resource,
    core::{
        DynamicObject,
        admission::{AdmissionRequest, AdmissionResponse},
    },
};
use serde::{Serialize, de::DeserializeOwned};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use self::{admission::AdmissionRoute, conversion::ConversionRoute, http::Routes};
pub use self::{
    admission::{Allowed, Denied},
    metrics::register_metrics,
};
use crate::{
    tls::{CertWatcher, ServingCert, TlsError},
    util::panic_message,
};

/// The default address: every interface, port 9443 (kubebuilder's webhook port).
pub const DEFAULT_ADDRESS: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 9443);

/// A route's two answers, as JSON bodies: to a request, and to one refused before its
/// handler saw it.
trait Route: Send + Sync {
    fn answer(&self, body: Bytes, budget: Budget) -> BoxFuture<'static, Vec<u8>>;
    fn failure(&self, uid: &str, code: u16, message: &str) -> Vec<u8>;
}

/// Webhooks to serve, and how: build it, then [`bind`](Self::bind) it.
pub struct WebhookServer {
    cert: ServingCert,
    address: SocketAddr,
    routes: HashMap<String, Arc<dyn Route>>,
    duplicate: Option<String>,
    max_request_bytes: usize,
    handler_timeout: Duration,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("cert", &self.cert)
            .field("address", &self.address)
            .field("paths", &self.routes.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl WebhookServer {
    /// A server presenting `cert`, on [`DEFAULT_ADDRESS`], without routes yet. Requests
    /// up to 7 MiB (an object and its old version at the API server's 3 MiB object limit,
    /// as controller-runtime allows), handlers given 9 s, and never past the caller's own
    /// deadline (see [`handler_timeout`](Self::handler_timeout)).
    pub fn new(cert: ServingCert) -> Self {
        WebhookServer {
            cert,
            address: DEFAULT_ADDRESS,
            routes: HashMap::new(),
            duplicate: None,
            max_request_bytes: 7 << 20,
            handler_timeout: Duration::from_secs(9),
        }
    }

    /// Where to listen (port 0 picks a free one: see [`BoundWebhookServer::local_addr`]).
    #[must_use]
    pub fn address(mut self, address: SocketAddr) -> Self {
        self.address = address;
        self
    }

    /// The largest request body accepted; larger ones are refused with code 413.
    #[must_use]
    pub fn max_request_bytes(mut self, limit: usize) -> Self {
        self.max_request_bytes = limit;
        self
    }

    /// How long a handler may take; after that the request is refused with code 500 and
    /// the handler's future dropped. Default 9 s: the refusal must reach the API server
    /// before it gives up on the webhook, at its `timeoutSeconds` (10 s by default), or the
    /// client sees only "context deadline exceeded" and `failurePolicy: Ignore` admits the
    /// object unchecked. The API server tells each call its deadline (`?timeout=10s`), and a
    /// request is given the shorter of this limit and that deadline less a margin (a
    /// tenth, at least 250 ms): a webhook registered with `timeoutSeconds: 5` is cut at
    /// 4.5 s. The budget covers the whole request: the time the body takes to arrive comes
    /// out of the handler's. Raise this for webhooks registered with more than 10 s.
    #[must_use]
    pub fn handler_timeout(mut self, timeout: Duration) -> Self {
        self.handler_timeout = timeout;
        self
    }

    /// A validating webhook at `path`: `handler` allows or denies each request. Register it
    /// in a `ValidatingWebhookConfiguration` for the operations it should see (on DELETE,
    /// `request.object` is `None` and `request.old_object` holds the object).
    #[must_use]
    pub fn validating<K, F, Fut>(self, path: &str, handler: F) -> Self
    where
        K: Resource + Serialize + DeserializeOwned + Send + Sync + 'static,
        F: Fn(AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Allowed, Denied>> + Send + 'static,
    {
        self.route(path, AdmissionRoute::validating(handler))
    }

    /// A mutating webhook at `path`: `handler` gets the object (and the whole request) and
    /// returns the object as it should be stored, or denies it. Requests without an object
    /// (DELETE) are allowed without calling it. Register it in a
    /// `MutatingWebhookConfiguration`.
    #[must_use]
    pub fn mutating<K, F, Fut>(self, path: &str, handler: F) -> Self
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
        F: Fn(K, AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<K, Denied>> + Send + 'static,
    {
        self.route(path, AdmissionRoute::mutating(handler))
    }

    /// An admission webhook at `path` whose handler builds the whole response (patches
    /// included), over untyped objects: for example sharding's
    /// [`label_at_creation`](crate::sharding::label_at_creation). Its uid is set for you.
    #[must_use]
    pub fn admission<F, Fut>(self, path: &str, handler: F) -> Self
    where
        F: Fn(AdmissionRequest<DynamicObject>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = AdmissionResponse> + Send + 'static,
    {
        self.route(path, AdmissionRoute::<DynamicObject>::answering(handler))
    }

    /// A conversion webhook at `path`, for a CustomResourceDefinition with
    /// `spec.conversion.strategy: Webhook`: `convert(object, desired_api_version)` returns
    /// the object in that version (its `apiVersion` is then set to it). The first error, or
    /// panic, fails the whole review with its message and the object's name.
    #[must_use]
    pub fn conversion<F, E>(self, path: &str, convert: F) -> Self
    where
        F: Fn(serde_json::Value, &str) -> Result<serde_json::Value, E> + Send + Sync + 'static,
        E: Display,
    {
        self.route(path, ConversionRoute::new(convert))
    }

    fn route(mut self, path: &str, route: impl Route + 'static) -> Self {
        if self
            .routes
            .insert(path.to_owned(), Arc::new(route))
            .is_some()
        {
            self.duplicate.get_or_insert_with(|| path.to_owned());
        }
        self
    }

    /// Reads the certificate and binds the address: every mistake a deployment can make
    /// (a missing Secret, a port in use) shows here, before anything is served.
    ///
    /// # Errors
    /// [`WebhookError`]: the certificate, the address, or a path given twice.
    pub async fn bind(self) -> Result<BoundWebhookServer, WebhookError> {
        if let Some(path) = self.duplicate {
            return Err(WebhookError::DuplicatePath(path));
        }
        let watcher = self.cert.load()?;
        let listener =
            TcpListener::bind(self.address)
                .await
                .map_err(|source| WebhookError::Bind {
                    address: self.address,
                    source,
                })?;
        let local_addr = listener.local_addr().map_err(|source| WebhookError::Bind {
            address: self.address,
            source,
        })?;
        Ok(BoundWebhookServer {
            listener,
            local_addr,
            watcher,
            routes: Arc::new(Routes {
                routes: self.routes,
                max_request_bytes: self.max_request_bytes,
                handler_timeout: self.handler_timeout,
            }),
        })
    }
}

/// Why a webhook server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// The serving certificate.
    #[error("webhook server certificate: {0}")]
    Tls(#[from] TlsError),
    /// The address could not be bound.
    #[error("webhook server cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Two routes were given the same path.
    #[error("webhook path {0} was given two handlers")]
    DuplicatePath(String),
}

/// A webhook server with its certificate read and its address bound, ready to
/// [`run`](Self::run).
pub struct BoundWebhookServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    watcher: CertWatcher,
    routes: Arc<Routes>,
}

impl std::fmt::Debug for BoundWebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundWebhookServer")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl BoundWebhookServer {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The certificate it presents, reloaded as its files change.
    pub fn certificate(&self) -> &CertWatcher {
        &self.watcher
    }

    /// Serves until `cancel`, then lets open requests finish (at most 5 s). Dropping the
    /// future instead closes every connection at once.
    pub async fn run(self, cancel: CancellationToken) {
        tracing::info!(address = %self.local_addr, paths = ?self.routes.routes.keys().collect::<Vec<_>>(), "serving webhooks");
        let routes = self.routes;
        let handle: crate::tls::serve::Handle = Arc::new(move |request| {
            let routes = routes.clone();
            Box::pin(async move { routes.answer(request).await })
        });
        crate::tls::serve::serve(self.listener, self.watcher, handle, cancel).await;
    }
}

/// A request's time: its whole budget, and what is left of it for the handler once the
/// body has arrived.
#[derive(Clone, Copy, Debug)]
struct Budget {
    total: Duration,
    left: Duration,
}

/// Runs a handler's future: its panic, or its not answering within what is left of the
/// request's budget, becomes the error message of the refusal.
async fn guarded<T>(future: impl Future<Output = T>, budget: Budget) -> Result<T, String> {
    let Budget { total, left } = budget;
    match tokio::time::timeout(left, AssertUnwindSafe(future).catch_unwind()).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(panic)) => {
            let message = panic_message(&*panic);
            tracing::error!(panic = %message, "a webhook handler panicked");
            Err(format!("the webhook handler panicked: {message}"))
        }
        Err(_) => {
            tracing::warn!(?total, ?left, "a webhook handler did not answer in time");
            Err(format!(
                "the webhook handler did not answer within {total:?} (the request's budget; \
                 the handler had {left:?} of it once the body arrived)"
            ))
        }
    }
}
