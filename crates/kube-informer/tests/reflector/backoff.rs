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

/// Runs a reflector on `source` for `secs` of paused time; returns the gaps between calls.
async fn gaps_between_calls(code: u16, retry_after: u32, secs: u64) -> Vec<Duration> {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let store: Store<ConfigMap> = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store)));
    let source = AlwaysFailing {
        calls: calls.clone(),
        code,
        retry_after,
    };
    let reflector = Reflector::new(
        source,
        fifo,
        ReflectorOptions::default().streaming_lists(false),
    );
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_secs(secs)).await;
    cancel.cancel();
    run.await.unwrap();
    let calls = calls.lock();
    calls.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn throttling_waits_as_long_as_the_server_says() {
    let gaps = gaps_between_calls(429, 7, 60).await;
    assert!(gaps.len() >= 4, "{gaps:?}");
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
async fn a_persistently_failing_server_is_retried_on_the_backoff_schedule() {
    let gaps = gaps_between_calls(500, 0, 600).await;
    let calls = &gaps;
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
    let late: Vec<_> = gaps.iter().skip(8).collect();
    let mean = late.iter().map(|g| g.as_secs_f64()).sum::<f64>() / late.len() as f64;
    assert!(
        mean > 8.0,
        "after 8 failures the delays approach the cap, mean {mean:.1} s"
    );
}

#[cfg(feature = "metrics")]
#[tokio::test]
async fn metrics_count_lists_watches_and_restarts() {
    use kube_informer::reflector::ReflectorMetrics;
    use prometheus_client::{encoding::text::encode, registry::Registry};
    let mut registry = Registry::default();
    let metrics = ReflectorMetrics::register(&mut registry);
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
    h.stop().await;
}
