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

/// Per fairness group: depth, in flight and the oldest item's wait, for the ten busiest
/// groups by name and the rest as `other`; and the worker count of scaled workers.
#[cfg(feature = "metrics")]
#[tokio::test(start_paused = true)]
async fn per_group_gauges_name_the_busiest_groups_and_sum_the_rest() {
    use std::borrow::Cow;

    use prometheus_client::{encoding::text::encode, registry::Registry};

    let mut registry = Registry::default();
    let metrics = crate::metrics::Metrics::register(&mut registry);
    let config = QueueConfig::default()
        .name("tenants")
        .metrics(&metrics)
        .fair_by(|key: &String| Cow::Borrowed(key.split_once('/').map_or("", |(ns, _)| ns)));
    let q = RateLimitingQueue::new(config);
    // Tenant i queues 20 - i items: tenants 0..=9 are the busiest ten, 10..=14 the rest.
    for tenant in 0..15 {
        for i in 0..(20 - tenant) {
            q.add(format!("t{tenant:02}/{i}"));
        }
        sleep(1000).await;
    }
    let held = take(&q).await; // t00's first: t00 has 19 queued, 1 held
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for expected in [
        r#"workqueue_group_depth{name="tenants",group="t00"} 19"#,
        r#"workqueue_group_in_flight{name="tenants",group="t00"} 1"#,
        r#"workqueue_group_longest_wait_seconds{name="tenants",group="t00"} 15.0"#,
        r#"workqueue_group_depth{name="tenants",group="t09"} 11"#,
        // t10..t14: 10 + 9 + 8 + 7 + 6 queued; the oldest of them queued 5 s ago.
        r#"workqueue_group_depth{name="tenants",group="other"} 40"#,
        r#"workqueue_group_longest_wait_seconds{name="tenants",group="other"} 5.0"#,
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(
        !text.contains(r#"group="t10""#),
        "past the top ten: in other"
    );
    drop(held);

    let workers = Workers::spawn_scaled(&q, WorkerScaling::new(3, 6), |_: String| async {
        Requeue::Never
    });
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(r#"workqueue_workers{name="tenants"} 3"#),
        "{text}"
    );
    // Starting is not a change.
    let no_change = r#"workqueue_worker_changes_total{name="tenants",direction="up"} 0"#;
    assert!(text.contains(no_change), "{text}");
    drop(workers);
}
