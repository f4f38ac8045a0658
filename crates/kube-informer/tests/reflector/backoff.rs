//! Retry schedules (Retry-After, backoff) on paused clocks, and the metrics.

use super::*;

/// A source that always fails with `code`, on a paused clock.
struct AlwaysFailing {
    calls: Arc<Mutex<Vec<tokio::time::Instant>>>,
    code: u16,
    retry_after: u32,
}

impl AlwaysFailing {
    fn error(&self) -> kube::Error {
        let mut status =
            kube::core::Status::failure("injected", "InternalError").with_code(self.code);
        if self.retry_after > 0 {
            let details = serde_json::json!({"name": "", "group": "", "kind": "", "uid": "", "causes": [], "retryAfterSeconds": self.retry_after});
            status.details = Some(serde_json::from_value(details).unwrap());
        }
        kube::Error::Api(Box::new(status))
    }
}

impl ListerWatcher<ConfigMap> for AlwaysFailing {
    async fn list(
        &self,
        _: &kube::api::ListParams,
    ) -> Result<kube::api::ObjectList<ConfigMap>, kube::Error> {
        self.calls.lock().push(tokio::time::Instant::now());
        Err(self.error())
    }

    async fn watch(
        &self,
        _: &kube::api::WatchParams,
        _: &str,
    ) -> Result<kube_informer::list_watch::WatchStream<ConfigMap>, kube::Error> {
        Err(self.error())
    }
}

/// A server answering every request with `code` (and a `Retry-After` header, if asked),
/// as an in-process HTTP service: put behind kube's own retry layer, it is a `kube::Client`
/// built the way `Config` builds every client (`default_retry: true`), on a paused clock.
#[derive(Clone)]
struct FailingServer {
    calls: Arc<Mutex<Vec<tokio::time::Instant>>>,
    code: u16,
    retry_after: u32,
}

impl tower::Service<http::Request<kube::client::Body>> for FailingServer {
    type Response = http::Response<http_body_util::Full<bytes::Bytes>>;
    type Error = tower::BoxError;
    type Future = std::future::Ready<Result<Self::Response, tower::BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), tower::BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<kube::client::Body>) -> Self::Future {
        self.calls.lock().push(tokio::time::Instant::now());
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "injected", "reason": "ServiceUnavailable", "code": self.code});
        let mut response = http::Response::builder()
            .status(self.code)
            .header("content-type", "application/json");
        if self.retry_after > 0 {
            response = response.header("retry-after", self.retry_after.to_string());
        }
        let body = http_body_util::Full::new(bytes::Bytes::from(status.to_string()));
        std::future::ready(Ok(response.body(body).unwrap()))
    }
}

/// What the reflector lists and watches through.
#[derive(Clone, Copy)]
enum Through {
    /// A `ListerWatcher` that fails itself.
    Source,
    /// A `kube::Client` with kube's default retry layer, over a failing server: the layer
    /// and policy `kube::Config::new` turns on (`default_retry`), on a paused clock. The
    /// same failures through a client built from a `Config` against fake-apiserver are in
    /// `tests/factory.rs` (`a_lasting_503_...`, `a_lasting_429_...`).
    KubeClient,
}

/// Runs a reflector for `secs` of paused time against a server that always answers
/// `code`; returns the gaps between the requests the server saw, and the failures the
/// error handler heard.
async fn gaps_between_calls(
    through: Through,
    code: u16,
    retry_after: u32,
    secs: u64,
) -> (Vec<Duration>, Vec<Option<u16>>) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let heard = match through {
        Through::Source => {
            let source = AlwaysFailing {
                calls: calls.clone(),
                code,
                retry_after,
            };
            run_for(source, secs).await
        }
        Through::KubeClient => {
            let server = FailingServer {
                calls: calls.clone(),
                code,
                retry_after,
            };
            let retrying = tower::ServiceBuilder::new()
                .layer(tower::retry::RetryLayer::new(
                    kube::client::retry::RetryPolicy::server_retry(),
                ))
                .service(server);
            let client = kube::Client::new(retrying, "demo");
            run_for(Api::<ConfigMap>::namespaced(client, "demo"), secs).await
        }
    };
    let calls = calls.lock();
    let gaps = calls.windows(2).map(|w| w[1] - w[0]).collect();
    (gaps, heard)
}

/// Runs a reflector on `source` for `secs`; the status codes its error handler heard.
async fn run_for(source: impl ListerWatcher<ConfigMap>, secs: u64) -> Vec<Option<u16>> {
    let store: Store<ConfigMap> = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store)));
    // A fixed seed: the jitter's draws, and so the schedule, are the same on every run.
    let options = ReflectorOptions::default().streaming_lists(false).seed(61);
    let reflector = Arc::new(Reflector::new(source, fifo, options));
    let heard = Arc::new(Mutex::new(Vec::new()));
    let h = heard.clone();
    reflector.set_error_handler(move |e: &ReflectorError| h.lock().push(e.status_code()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (reflector, cancel) = (reflector.clone(), cancel.clone());
        async move { reflector.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_secs(secs)).await;
    cancel.cancel();
    run.await.unwrap();
    heard.lock().clone()
}

fn throttled_schedule((gaps, heard): (Vec<Duration>, Vec<Option<u16>>)) {
    assert!(gaps.len() >= 4, "{gaps:?}");
    assert_eq!(heard.len(), gaps.len() + 1, "every answer heard: {heard:?}");
    assert!(heard.iter().all(|code| *code == Some(429)), "{heard:?}");
    let (asked, most) = (Duration::from_secs(7), Duration::from_millis(8400));
    assert!(
        gaps[..3].iter().all(|g| *g >= asked && *g <= most),
        "Retry-After is 7 s, jittered by up to a fifth: {gaps:?}"
    );
    assert!(
        gaps.iter()
            .all(|g| *g >= asked && *g <= Duration::from_secs(30)),
        "never sooner than asked; growing with the backoff while throttling goes on: {gaps:?}"
    );
    assert!(
        gaps.windows(2).any(|w| w[0] != w[1]),
        "jittered, not a fixed beat every client shares: {gaps:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn throttling_waits_as_long_as_the_server_says() {
    let seen = gaps_between_calls(Through::Source, 429, 7, 60).await;
    throttled_schedule(seen);
}

/// kube's default client retries a 429 itself (15 times, at exactly Retry-After): through
/// it, the reflector must still hear every answer and keep its own jittered schedule.
#[tokio::test(start_paused = true)]
async fn throttling_through_kubes_default_client_is_seen_and_jittered() {
    let seen = gaps_between_calls(Through::KubeClient, 429, 7, 60).await;
    throttled_schedule(seen);
}

fn backoff_schedule(code: u16, (gaps, heard): (Vec<Duration>, Vec<Option<u16>>)) {
    let calls = &gaps;
    assert_eq!(heard.len(), gaps.len() + 1, "every answer heard");
    assert!(heard.iter().all(|c| *c == Some(code)), "{heard:?}");
    assert!(
        gaps.iter().all(|g| *g >= Duration::from_millis(800)),
        "a retry came sooner than 800 ms: {gaps:?}"
    );
    assert!(
        gaps.iter().all(|g| *g <= Duration::from_secs(30)),
        "a retry waited past the 30 s cap: {gaps:?}"
    );
    // In 10 minutes of failures: far fewer than a hot loop, more than one per cap.
    assert!(
        (20..=600).contains(&calls.len()),
        "{} retries in 10 min",
        calls.len()
    );
    assert!(
        gaps[0] > Duration::from_millis(800),
        "the first retry is jittered, not a beat every client shares: {gaps:?}"
    );
    // Drawn anew each time, not a beat: (almost) all distinct. Not all: the timer rounds a
    // delay to the millisecond, so two draws a millisecond apart may wait alike.
    let distinct: std::collections::BTreeSet<_> = gaps.iter().collect();
    assert!(
        distinct.len() * 10 >= gaps.len() * 9,
        "every delay drawn anew: {gaps:?}"
    );
    let late: Vec<_> = gaps.iter().skip(8).collect();
    let mean = late.iter().map(|g| g.as_secs_f64()).sum::<f64>() / late.len() as f64;
    assert!(
        mean > 8.0,
        "after 8 failures the delays approach the cap, mean {mean:.1} s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_persistently_failing_server_is_retried_on_the_backoff_schedule() {
    let seen = gaps_between_calls(Through::Source, 500, 0, 600).await;
    backoff_schedule(500, seen);
}

/// A lasting 503 or 504 through kube's default client (which would retry it 15 times from
/// 5 ms, out of sight): every answer heard, on the reflector's schedule.
#[tokio::test(start_paused = true)]
async fn a_lasting_503_or_504_through_kubes_default_client_is_seen_on_the_backoff_schedule() {
    for code in [503, 504] {
        let seen = gaps_between_calls(Through::KubeClient, code, 0, 600).await;
        backoff_schedule(code, seen);
    }
}

#[cfg(feature = "metrics")]
#[tokio::test]
async fn metrics_count_lists_watches_and_restarts() {
    use kube_informer::metrics::Metrics;
    use prometheus_client::{encoding::text::encode, registry::Registry};
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..7).map(|i| format!("cm-{i}")));
    let h = Harness::start(
        server,
        fast().streaming_lists(false).name("cms").metrics(&metrics),
    )
    .await;
    h.converge().await;
    h.watching().await;
    h.server.inject(Fault::Delay {
        verb: Verb::Watch,
        delay: Duration::from_millis(200),
        times: 1,
    });
    h.server.restart();
    seed(&h.server, ["x".to_owned()]);
    h.server.compact();
    h.converge().await;
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for expected in [
        r#"reflector_lists_total{name="cms"} 2"#,
        r#"reflector_list_items_count{name="cms"} 2"#,
        r#"reflector_watch_restarts_total{name="cms",reason="gone"} 1"#,
        &format!(
            r#"reflector_last_resource_version{{name="cms"}} {}"#,
            h.server.resource_version()
        ),
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(text.contains(r#"reflector_watches_total{name="cms"}"#));
    assert!(
        text.contains(r#"reflector_failures_total{name="cms",cause="#),
        "failures counted by cause:\n{text}"
    );
    h.stop().await;
}
