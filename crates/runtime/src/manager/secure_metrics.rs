//! `/metrics` over HTTPS for callers the API server vouches for: controller-runtime's
//! secure metrics (`filters.WithAuthenticationAndAuthorization`), as kube-rbac-proxy did
//! beside the operator before.
//!
//! A request needs a bearer token. The manager asks the API server who it is
//! (`TokenReview`) and whether that user may `get` the non-resource URL `/metrics`
//! (`SubjectAccessReview`); both answers are kept for [`SecureMetrics::cache_for`] per
//! token the API server accepted, so a scrape every 15 s costs it two requests a minute. No
//! token, or one the API server does not accept: 401 (not remembered). Not allowed: 403, with the API server's reason.
//! The API server unreachable: 503, not cached, and the scrape is retried.
//!
//! With `ManagerOptions::profiling` (feature `profiling`), the same gate
//! serves `/debug/pprof/profile` to callers that may `get` that URL (asked and remembered
//! separately: reading metrics does not allow profiling).

use std::{collections::HashMap, net::SocketAddr, sync::Arc, time::Duration};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
};
use kube::{Api, api::PostParams};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::{net::TcpListener, time::Instant};
use tokio_util::sync::CancellationToken;

use super::server::{metrics, respond};
use crate::tls::{CertWatcher, ServingCert};

/// Where and with which certificate `/metrics` is served securely (see
/// [`ManagerOptions::secure_metrics`](super::ManagerOptions::secure_metrics)).
///
/// ```
/// use kube_informer_runtime::{manager::{ManagerOptions, SecureMetrics}, tls::ServingCert};
///
/// let options = ManagerOptions::default()
///     .secure_metrics(SecureMetrics::new(ServingCert::from_dir("/tmp/k8s-metrics-server/serving-certs")));
/// # let _ = options;
/// ```
///
/// The manager's service account needs `create` on `tokenreviews`
/// (authentication.k8s.io) and `subjectaccessreviews` (authorization.k8s.io); the scraper's
/// needs a ClusterRole with `nonResourceURLs: ["/metrics"]`, `verbs: ["get"]` (and, to take
/// CPU profiles (`ManagerOptions::profiling`, feature `profiling`), `["/debug/pprof/profile"]`: a grant
/// of its own).
#[derive(Clone, Debug)]
pub struct SecureMetrics {
    pub(super) bind: SocketAddr,
    pub(super) cert: ServingCert,
    cache_for: Duration,
}

impl SecureMetrics {
    /// `/metrics` on `0.0.0.0:8443` (kubebuilder's secure metrics port), presenting `cert`,
    /// decisions kept for a minute.
    pub fn new(cert: ServingCert) -> Self {
        SecureMetrics {
            bind: SocketAddr::from(([0, 0, 0, 0], 8443)),
            cert,
            cache_for: Duration::from_secs(60),
        }
    }

    /// Where to listen (port 0 picks a free one: see
    /// [`Manager::secure_metrics_endpoint`](super::Manager::secure_metrics_endpoint)).
    #[must_use]
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = addr;
        self
    }

    /// How long a token's accepted answer (allowed or 403) is reused (default 1 minute): a
    /// revoked permission still reads metrics for up to this long.
    #[must_use]
    pub fn cache_for(mut self, ttl: Duration) -> Self {
        self.cache_for = ttl;
        self
    }
}

/// What the API server said about a token.
#[derive(Clone)]
enum Decision {
    Allowed,
    Unauthenticated(String),
    Forbidden(String),
}

/// Decides each request, and remembers the answers per token for a while.
/// A token, and the path it asked for.
type Asked = (String, &'static str);

struct Gate {
    client: kube::Client,
    cache_for: Duration,
    /// Per token and path asked for.
    decided: Mutex<HashMap<Asked, (Instant, Decision)>>,
    /// Whether `/debug/pprof/profile` is served too.
    profiling: bool,
}

/// At most this many tokens are remembered (expired ones make room; beyond, new ones are
/// asked about each time).
const MAX_REMEMBERED: usize = 1024;

impl Gate {
    async fn decide(&self, token: &str, path: &'static str) -> Result<Decision, kube::Error> {
        let key = (token.to_owned(), path);
        if let Some((at, decision)) = self.decided.lock().get(&key)
            && at.elapsed() < self.cache_for
        {
            return Ok(decision.clone());
        }
        let decision = self.ask(token, path).await?;
        // Only tokens the API server accepted are remembered: random ones (a flood of
        // them) never push out a scraper's.
        if !matches!(decision, Decision::Unauthenticated(_)) {
            let mut decided = self.decided.lock();
            if decided.len() >= MAX_REMEMBERED {
                let ttl = self.cache_for;
                decided.retain(|_, (at, _)| at.elapsed() < ttl);
            }
            if decided.len() < MAX_REMEMBERED {
                decided.insert(key, (Instant::now(), decision.clone()));
            }
        }
        Ok(decision)
    }

    async fn ask(&self, token: &str, path: &'static str) -> Result<Decision, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..Default::default()
            },
            ..Default::default()
        };
        let pp = PostParams::default();
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&pp, &review)
            .await?;
        let status = reviewed.status.unwrap_or_default();
        let user = status.user.unwrap_or_default();
        if status.authenticated != Some(true) {
            let why = status
                .error
                .unwrap_or_else(|| "the token is not valid".to_owned());
            return Ok(Decision::Unauthenticated(why));
        }
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&pp, &access)
            .await?;
        let status = reviewed.status.unwrap_or_default();
        if status.allowed && status.denied != Some(true) {
            return Ok(Decision::Allowed);
        }
        let username = user.username.unwrap_or_default();
        let reason = status
            .reason
            .filter(|r| !r.is_empty())
            .map_or(String::new(), |r| format!(": {r}"));
        Ok(Decision::Forbidden(format!(
            "user {username:?} may not get {path}{reason}"
        )))
    }

    async fn answer(
        &self,
        request: Request<Incoming>,
        registry: &Mutex<Registry>,
    ) -> Response<Full<Bytes>> {
        let path: &'static str = match request.uri().path() {
            "/metrics" => "/metrics",
            "/debug/pprof/profile" if self.profiling => "/debug/pprof/profile",
            _ => {
                let served = if self.profiling {
                    "/metrics and /debug/pprof/profile are"
                } else {
                    "only /metrics is"
                };
                return respond(404, format!("{served} served here\n"), "text/plain");
            }
        };
        let token = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|t| !t.is_empty());
        let Some(token) = token else {
            return unauthorized("a bearer token is required");
        };
        match self.decide(token, path).await {
            Ok(Decision::Allowed) if path == "/metrics" => metrics(registry),
            Ok(Decision::Allowed) => super::profile::cpu(request.uri().query()).await,
            Ok(Decision::Unauthenticated(why)) => unauthorized(&why),
            Ok(Decision::Forbidden(why)) => {
                respond(403, format!("forbidden: {why}\n"), "text/plain")
            }
            Err(error) => {
                tracing::warn!(%error, "cannot check a metrics scraper's token");
                respond(
                    503,
                    format!("cannot check the token with the API server: {error}\n"),
                    "text/plain",
                )
            }
        }
    }
}

fn unauthorized(why: &str) -> Response<Full<Bytes>> {
    let mut response = respond(401, format!("unauthorized: {why}\n"), "text/plain");
    response.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer"),
    );
    response
}

/// The certificate read and the address bound, ready to serve.
pub(super) struct Bound {
    listener: TcpListener,
    watcher: CertWatcher,
    cache_for: Duration,
}

impl Bound {
    pub(super) async fn bind(
        options: &SecureMetrics,
    ) -> Result<(Bound, SocketAddr), super::ManagerError> {
        let watcher = options
            .cert
            .load()
            .map_err(super::ManagerError::MetricsCertificate)?;
        let addr = options.bind;
        let bind = |source| super::ManagerError::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind)?;
        let local = listener.local_addr().map_err(bind)?;
        Ok((
            Bound {
                listener,
                watcher,
                cache_for: options.cache_for,
            },
            local,
        ))
    }

    pub(super) async fn serve(
        self,
        client: kube::Client,
        registry: Arc<Mutex<Registry>>,
        profiling: bool,
        cancel: CancellationToken,
    ) {
        let gate = Arc::new(Gate {
            client,
            cache_for: self.cache_for,
            decided: Mutex::default(),
            profiling,
        });
        let handle: crate::tls::serve::Handle = Arc::new(move |request| {
            let (gate, registry) = (gate.clone(), registry.clone());
            Box::pin(async move { gate.answer(request, &registry).await })
        });
        crate::tls::serve::serve(self.listener, self.watcher, handle, cancel).await;
    }
}
