//! The event recorder with paused clocks and an in-memory sink: series instead of one write
//! per repeat, the per-object spam filter, and a full queue that drops rather than blocks.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer_runtime::events::{
    EventType, MemoryEvents, NewEvent, Recorder, Reporter, Written,
};

fn object(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some("shop".into());
    cm.metadata.uid = Some(format!("uid-{name}"));
    cm
}

fn recorder() -> (Recorder, Arc<MemoryEvents>) {
    let sink = Arc::new(MemoryEvents::default());
    let recorder = Recorder::new(sink.clone(), Reporter::new("tests", "replica-0"));
    (recorder, sink)
}

/// Lets the writer task drain what was published.
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_hundred_repeats_are_one_event_and_a_series() {
    let (recorder, sink) = recorder();
    let cm = object("a");
    for _ in 0..100 {
        recorder.publish(
            &cm,
            NewEvent::new(EventType::Normal, "Synced", "Reconcile").note("ok"),
        );
        settle().await;
    }
    let writes = sink.writes();
    assert_eq!(
        writes.len(),
        2,
        "a create and the series' start: {writes:?}"
    );
    let Written::Created(created) = &writes[0] else {
        panic!("{writes:?}")
    };
    assert_eq!(created.metadata.namespace.as_deref(), Some("shop"));
    assert!(created.metadata.name.as_deref().unwrap().starts_with("a."));
    assert_eq!(created.reporting_controller.as_deref(), Some("tests"));
    assert_eq!(
        created.regarding.as_ref().unwrap().kind.as_deref(),
        Some("ConfigMap")
    );
    assert!(matches!(&writes[1], Written::Series { series, .. } if series.count == 2));
    // Six quiet minutes end the series: its final count is written once.
    tokio::time::sleep(Duration::from_secs(7 * 60)).await;
    settle().await;
    let writes = sink.writes();
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(matches!(&writes[2], Written::Series { series, .. } if series.count == 100));
}

#[tokio::test(start_paused = true)]
async fn one_object_gets_25_distinct_events_then_one_per_five_minutes() {
    let (recorder, sink) = recorder();
    let cm = object("noisy");
    for i in 0..40 {
        recorder.publish(
            &cm,
            NewEvent::new(EventType::Warning, format!("Reason{i}"), "Reconcile"),
        );
    }
    recorder.publish(
        &object("quiet"),
        NewEvent::new(EventType::Normal, "Fine", "Reconcile"),
    );
    settle().await;
    assert_eq!(
        sink.writes().len(),
        26,
        "25 for the noisy object, 1 for the quiet one"
    );
    assert_eq!(recorder.dropped(), 15);
    tokio::time::sleep(Duration::from_secs(301)).await;
    recorder.publish(&cm, NewEvent::new(EventType::Warning, "Later", "Reconcile"));
    settle().await;
    assert_eq!(sink.writes().len(), 27, "one more after five minutes");
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_drops_instead_of_blocking() {
    let (recorder, sink) = recorder();
    let cm = object("burst");
    // Published without yielding: the writer cannot drain meanwhile.
    for i in 0..2500 {
        recorder.publish(
            &cm,
            NewEvent::new(EventType::Normal, format!("R{}", i % 3), "Reconcile"),
        );
    }
    assert_eq!(recorder.dropped(), 1500, "beyond the 1000 queued");
    settle().await;
    assert!(
        sink.writes().len() <= 6,
        "three series, two writes each at most"
    );
}

/// `close` writes what was queued, ends the writer task (counted: nothing of the recorder
/// is left running) and drops what is published after; a second close does nothing.
#[tokio::test(flavor = "current_thread")]
async fn close_writes_what_is_queued_and_leaves_no_task_behind() {
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let before = alive();
    let (recorder, sink) = recorder();
    assert_eq!(alive(), before + 1, "the writer task");
    let synced = || NewEvent::new(EventType::Normal, "Synced", "Reconcile");
    recorder.publish(&object("a"), synced());
    recorder.close().await;
    assert_eq!(alive(), before, "the writer ended with close");
    assert_eq!(sink.writes().len(), 1, "the queued event was written");
    recorder.publish(&object("b"), synced());
    settle().await;
    assert_eq!(sink.writes().len(), 1, "nothing written after close");
    recorder.close().await;
}
