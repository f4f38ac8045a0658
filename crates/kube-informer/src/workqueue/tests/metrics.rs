//! The queue's metrics, named and meant as client-go's.

use super::*;

#[cfg(feature = "metrics")]
#[tokio::test(start_paused = true)]
async fn metrics_follow_client_gos_names_and_meanings() {
    use prometheus_client::{encoding::text::encode, registry::Registry};

    let mut registry = Registry::default();
    let metrics = crate::metrics::Metrics::register(&mut registry);
    let q = RateLimitingQueue::new(exponential().name("pods").metrics(&metrics));
    let unnamed: Queue<&str> = Queue::new(QueueConfig::default().metrics(&metrics));
    unnamed.add("ignored: no name, no metrics");

    q.add("a");
    q.add("b");
    q.add("a");
    sleep(2000).await;
    let a = take(&q).await; // waited 2 s in the queue
    sleep(5000).await; // processing for 5 s
    let scrape = |registry: &Registry| {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text
    };
    let text = scrape(&registry);
    for expected in [
        r#"workqueue_depth{name="pods"} 1"#,
        r#"workqueue_adds_total{name="pods"} 2"#,
        r#"workqueue_queue_duration_seconds_sum{name="pods"} 2.0"#,
        r#"workqueue_queue_duration_seconds_count{name="pods"} 1"#,
        r#"workqueue_unfinished_work_seconds{name="pods"} 5.0"#,
        r#"workqueue_longest_running_processor_seconds{name="pods"} 5.0"#,
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(
        !text.contains("ignored"),
        "an unnamed queue records nothing"
    );

    a.requeue_rate_limited();
    let text = scrape(&registry);
    for expected in [
        r#"workqueue_work_duration_seconds_sum{name="pods"} 5.0"#,
        r#"workqueue_retries_total{name="pods"} 1"#,
        r#"workqueue_unfinished_work_seconds{name="pods"} 0.0"#,
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    drop(q);
    let text = scrape(&registry);
    assert!(
        !text.contains(r#"workqueue_unfinished_work_seconds{name="pods"}"#),
        "dropped queues leave the in-flight gauges"
    );
}
