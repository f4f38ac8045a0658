//! client-go's `rest_client_*` metrics for every request a [`kube::Client`] sends: how many,
//! with which answer, and how long until the answer's headers arrived (for a watch, until
//! it was open, as client-go measures). A [`Manager`](crate::manager::Manager) instruments
//! its client with them, so every request it or its informers, elections, recorders and
//! sharder make is counted; the ones made through
//! [`Manager::client`](crate::manager::Manager::client) too.

use std::time::Instant;

use kube::client::Body;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Answered {
    /// The HTTP status, or `<error>` when no answer came (client-go's label).
    code: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Verb {
    verb: String,
}

/// client-go's request-latency buckets (5 ms to 60 s).
const BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

fn latency() -> Histogram {
    Histogram::new(BUCKETS)
}

/// `rest_client_requests_total{code, method}` and
/// `rest_client_request_duration_seconds{verb}`, registered once, recorded by every client
/// [`instrument`](Self::instrument)ed with them. (client-go also labels them with the
/// server's host; a `kube::Client` does not say which, and a process talks to one.)
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use prometheus_client::registry::Registry;
/// use kube_informer_runtime::rest_metrics::RestClientMetrics;
///
/// let mut registry = Registry::default();
/// let metrics = RestClientMetrics::register(&mut registry);
/// let plain = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
/// let client = metrics.instrument(plain); // use this one everywhere
/// # let _ = client;
/// # }
/// ```
#[derive(Clone)]
pub struct RestClientMetrics {
    requests: Family<Answered, Counter>,
    duration: Family<Verb, Histogram, fn() -> Histogram>,
}

impl std::fmt::Debug for RestClientMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestClientMetrics").finish_non_exhaustive()
    }
}

impl RestClientMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency),
        };
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code and method",
            metrics.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds, until the response headers, by verb",
            metrics.duration.clone(),
        );
        metrics
    }

    /// `client`, recording every request it sends into these metrics (same default
    /// namespace, same connections: it sends through `client`).
    pub fn instrument(&self, client: kube::Client) -> kube::Client {
        let namespace = client.default_namespace().to_owned();
        let metrics = self.clone();
        let service = tower::service_fn(move |request: http::Request<Body>| {
            let (client, metrics) = (client.clone(), metrics.clone());
            async move {
                let method = request.method().as_str().to_owned();
                let started = Instant::now();
                let answer = client.send(request).await;
                let code = match &answer {
                    Ok(response) => response.status().as_u16().to_string(),
                    Err(_) => "<error>".to_owned(),
                };
                metrics
                    .duration
                    .get_or_create(&Verb {
                        verb: method.clone(),
                    })
                    .observe(started.elapsed().as_secs_f64());
                metrics
                    .requests
                    .get_or_create(&Answered { code, method })
                    .inc();
                answer
            }
        });
        kube::Client::new(service, namespace)
    }
}
