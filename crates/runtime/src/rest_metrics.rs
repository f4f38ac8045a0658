//! client-go's `rest_client_*` metrics for every request a [`kube::Client`] sends: how many,
//! with which answer, and how long until the answer's headers arrived (for a watch, until
//! it was open, as client-go measures). A [`Manager`](crate::manager::Manager) instruments
//! its client with them, so every request it or its informers, elections, recorders and
//! sharder make is counted; the ones made through
//! [`Manager::client`](crate::manager::Manager::client) too.

use std::{fmt, sync::Arc, time::Instant};

use kube::client::Body;
use prometheus_client::{
    encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder},
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Answered {
    /// The HTTP status, or `<error>` when no answer came (client-go's label).
    code: String,
    host: Arc<str>,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Verb {
    host: Arc<str>,
    verb: String,
}

/// Encodes `labels`, leaving `host` out when it is not known (an empty label is no label
/// to Prometheus, but it would still show in every series).
fn encode_labels(encoder: &mut LabelSetEncoder, labels: [(&str, &str); 2]) -> fmt::Result {
    for (key, value) in labels {
        if !(key == "host" && value.is_empty()) {
            (key, value).encode(encoder.encode_label())?;
        }
    }
    Ok(())
}

impl EncodeLabelSet for Answered {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        ("code", self.code.as_str()).encode(encoder.encode_label())?;
        encode_labels(encoder, [("host", &self.host), ("method", &self.method)])
    }
}

impl EncodeLabelSet for Verb {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        encode_labels(encoder, [("host", &self.host), ("verb", &self.verb)])
    }
}

/// client-go's request-latency buckets (5 ms to 60 s).
const BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

fn latency() -> Histogram {
    Histogram::new(BUCKETS)
}

/// `rest_client_requests_total{code, host, method}` and
/// `rest_client_request_duration_seconds{host, verb}`, client-go's, registered once,
/// recorded by every client [`instrument`](Self::instrument)ed with them. `host` is the API
/// server's `host:port`: a `kube::Client` does not say which server it sends to, so it is
/// given ([`instrument_host`](Self::instrument_host), or
/// [`Manager::from_config`](crate::manager::Manager::from_config), which knows it);
/// [`instrument`](Self::instrument) leaves it out.
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
    /// namespace, same connections: it sends through `client`), with no `host` label.
    pub fn instrument(&self, client: kube::Client) -> kube::Client {
        self.instrument_host(client, "")
    }

    /// `client`, recording every request it sends into these metrics with the label
    /// `host` (the API server's `host:port`, as client-go labels them).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use prometheus_client::registry::Registry;
    /// use kube_informer_runtime::rest_metrics::RestClientMetrics;
    ///
    /// let config = kube::Config::new("https://10.0.0.1:6443".parse().unwrap());
    /// let host = RestClientMetrics::host_of(&config);
    /// assert_eq!(host, "10.0.0.1:6443");
    /// let metrics = RestClientMetrics::register(&mut Registry::default());
    /// # let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    /// let client = metrics.instrument_host(kube::Client::try_from(config).unwrap(), &host);
    /// # let _ = client;
    /// # }
    /// ```
    pub fn instrument_host(&self, client: kube::Client, host: &str) -> kube::Client {
        let namespace = client.default_namespace().to_owned();
        let metrics = self.clone();
        let host: Arc<str> = host.into();
        let service = tower::service_fn(move |request: http::Request<Body>| {
            let (client, metrics, host) = (client.clone(), metrics.clone(), host.clone());
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
                        host: host.clone(),
                        verb: method.clone(),
                    })
                    .observe(started.elapsed().as_secs_f64());
                metrics
                    .requests
                    .get_or_create(&Answered { code, host, method })
                    .inc();
                answer
            }
        });
        kube::Client::new(service, namespace)
    }

    /// The `host:port` of the API server `config` talks to (the `host` label).
    pub fn host_of(config: &kube::Config) -> String {
        let url = &config.cluster_url;
        match (url.host(), url.port_u16()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            _ => String::new(),
        }
    }
}
