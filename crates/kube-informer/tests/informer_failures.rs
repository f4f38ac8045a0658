//! An informer whose user code panics, whose tasks die, whose events go back in time, and
//! whose readers want to know how far the cache has come: nothing fails silently, nothing
//! cached is lost, and every failure reaches `on_error`.

use crate::common;

use std::{sync::Arc, time::Duration};

use common::{
    scripted::{ListReply, Scripted, WatchReply, bookmark, cm},
    until,
};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::WatchEvent;
use kube_informer::{
    Indexers,
    informer::{
        Failure, HandlerFuncs, HandlerOptions, InformerOptions, Notification, SharedIndexInformer,
    },
    reflector::ReflectorOptions,
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

fn options() -> InformerOptions<ConfigMap> {
    InformerOptions::default().reflector(
        ReflectorOptions::default()
            .streaming_lists(false)
            .seed(1)
            .idle_timeout(Duration::from_secs(100_000)),
    )
}

/// An informer on `source` with its failures recorded, set up by `setup`, running.
fn run_with(
    source: Scripted,
    options: InformerOptions<ConfigMap>,
    setup: impl FnOnce(&SharedIndexInformer<ConfigMap>),
) -> Running {
    let informer = SharedIndexInformer::new(source, options);
    let failures = Arc::new(Mutex::new(Vec::new()));
    let seen = failures.clone();
    informer.on_error(move |f: &Failure| {
        let kind = match f {
            Failure::Reflector(_) => "reflector",
            Failure::StaleEvent { .. } => "stale",
            Failure::IndexPanicked(_) => "index",
            Failure::TransformPanicked { .. } => "transform",
            Failure::HandlerPanicked { .. } => "handler",
            Failure::TaskDied { .. } => "died",
            _ => "other",
        };
        seen.lock().push(format!("{kind}: {f}"));
    });
    setup(&informer);
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    (informer, failures, cancel, task)
}

type Running = (
    SharedIndexInformer<ConfigMap>,
    Arc<Mutex<Vec<String>>>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
);

fn run(source: Scripted, options: InformerOptions<ConfigMap>) -> Running {
    run_with(source, options, |_| {})
}

fn names(informer: &SharedIndexInformer<ConfigMap>) -> Vec<String> {
    let mut names: Vec<String> = informer
        .store()
        .list()
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_panicking_index_function_is_reported_and_the_informer_keeps_going() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "5"), cm("boom", "5")], "5"),
        |_, _| WatchReply::Stay(vec![WatchEvent::Added(cm("c", "6"))]),
    );
    let by_name = |o: &ConfigMap| {
        let name = o.metadata.name.clone().unwrap();
        assert!(name != "boom", "index function bug on {name}");
        vec![name]
    };
    let options = options().indexers(Indexers::new().index("by-name", by_name));
    let (informer, failures, cancel, task) = run(source, options);
    until("the watch event is cached", || informer.store().len() == 3).await;
    assert!(informer.has_synced() && informer.health().is_alive(3));
    assert_eq!(names(&informer), ["a", "boom", "c"], "the object is kept");
    let store = informer.store();
    assert_eq!(
        store.by_index("by-name", "c").unwrap().len(),
        1,
        "indexing goes on"
    );
    assert!(store.by_index("by-name", "boom").unwrap().is_empty());
    let failures = failures.lock().clone();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].starts_with("index: index function \"by-name\" panicked on demo/boom"));
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_panicking_transform_loses_nothing_cached() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "5"), cm("b", "5")], "5"),
        |_, _| {
            let mut gone = cm("b", "8");
            gone.data = Some([("boom".to_owned(), String::new())].into());
            WatchReply::Stay(vec![
                WatchEvent::Modified(cm("a", "6")),
                WatchEvent::Deleted(gone),
                WatchEvent::Added(cm("c", "9")),
            ])
        },
    );
    let (informer, failures, cancel, task) = run_with(source, options(), |informer| {
        let transform = |o: ConfigMap| {
            let rv = o.metadata.resource_version.clone().unwrap();
            assert!(rv != "6" && o.data.is_none(), "transform bug at {rv}");
            o
        };
        informer.set_transform(transform).unwrap();
    });
    until("c is cached", || informer.store().contains_key("demo/c")).await;
    assert_eq!(names(&informer), ["a", "c"], "the delete still removed b");
    let a = informer.store().get_by_key("demo/a").unwrap();
    assert_eq!(
        a.metadata.resource_version.as_deref(),
        Some("5"),
        "kept the old a"
    );
    let failures = failures.lock().clone();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures
            .iter()
            .all(|f| f.starts_with("transform: the transform panicked on demo/"))
    );
    assert!(informer.health().failed.is_none());
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_dead_reflector_task_is_visible_not_a_healthy_zombie() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "5")], "5"),
        |_, _| panic!("a bug in the source"),
    );
    let (informer, failures, cancel, task) = run(source, options());
    until("the task died", || informer.health().failed.is_some()).await;
    assert!(!informer.has_synced(), "a failed informer is not synced");
    let health = informer.health();
    assert!(!health.is_alive(100) && !health.is_ready());
    assert!(health.failed.unwrap().contains("a bug in the source"));
    let err = informer
        .wait_for_sync(Duration::from_millis(10))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("it failed: the reflector task died"),
        "{err}"
    );
    assert!(failures.lock().iter().any(|f| f.starts_with("died:")));
    assert_eq!(informer.store().len(), 1, "what was cached stays readable");
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn an_event_older_than_the_cache_is_reported_and_not_applied() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "10")], "10"),
        |_, _| {
            WatchReply::Stay(vec![
                WatchEvent::Modified(cm("a", "9")),
                WatchEvent::Added(cm("b", "11")),
            ])
        },
    );
    let (informer, failures, cancel, task) = run(source, options());
    until("b is cached", || informer.store().contains_key("demo/b")).await;
    let a = informer.store().get_by_key("demo/a").unwrap();
    assert_eq!(a.metadata.resource_version.as_deref(), Some("10"));
    let failures = failures.lock().clone();
    assert_eq!(
        failures,
        ["stale: demo/a: skipped a Updated at resourceVersion 9, older than the cached 10"]
    );
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn the_cache_version_follows_events_and_bookmarks_and_can_be_waited_for() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "5")], "7"),
        |_, _| WatchReply::Stay(vec![WatchEvent::Added(cm("b", "8")), bookmark("42", false)]),
    );
    let (informer, _, cancel, task) = run(source, options());
    let store = informer.store();
    tokio::time::timeout(
        Duration::from_secs(10),
        store.wait_for_resource_version("42"),
    )
    .await
    .expect("reached by the bookmark on a quiet watch")
    .unwrap();
    assert_eq!(store.resource_version(), "42");
    assert!(
        store.contains_key("demo/b"),
        "everything before the bookmark is applied"
    );
    assert!(
        store.wait_for_resource_version("abc").await.is_err(),
        "not comparable"
    );
    cancel.cancel();
    task.await.unwrap();
}

/// A stream with coalescing holds one notification per object however long it is unread,
/// reports that as its backlog, and unregisters when dropped.
#[tokio::test]
async fn a_coalescing_stream_is_bounded_and_unregisters_when_dropped() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "1")], "1"),
        |_, _| {
            let updates = (2..=1000).map(|rv| WatchEvent::Modified(cm("a", &rv.to_string())));
            WatchReply::Stay(updates.collect())
        },
    );
    let informer = SharedIndexInformer::new(source, options());
    let mut stream = informer.stream(HandlerOptions::default().coalescing());
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    until("all updates applied", || {
        informer
            .store()
            .get_by_key("demo/a")
            .and_then(|a| a.metadata.resource_version.clone())
            == Some("1000".into())
    })
    .await;
    assert_eq!(stream.registration().backlog(), 1, "one per object, unread");
    match stream.next().await {
        Some(Notification::Add { object, .. }) => {
            assert_eq!(object.metadata.resource_version.as_deref(), Some("1000"));
        }
        other => panic!("expected the latest state as an add: {other:?}"),
    }
    assert_eq!(informer.handler_count(), 1);
    drop(stream);
    assert_eq!(
        informer.handler_count(),
        0,
        "dropping the stream unregistered it"
    );
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn handlers_resync_at_their_own_period_even_shorter_or_added_late() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "5")], "5"),
        |_, _| WatchReply::Stay(vec![]),
    );
    let informer = SharedIndexInformer::new(source, options());
    let counter = || {
        let count = Arc::new(Mutex::new(0usize));
        let c = count.clone();
        let funcs =
            HandlerFuncs::new().on_update(move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
                if Arc::ptr_eq(&old, &new) {
                    *c.lock() += 1;
                }
            });
        (funcs, count)
    };
    let (early, early_count) = counter();
    informer.add_event_handler(
        early,
        HandlerOptions::default().resync(Duration::from_secs(5)),
    );
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_secs(30)).await;
    let (late, late_count) = counter();
    informer.add_event_handler(
        late,
        HandlerOptions::default().resync(Duration::from_secs(2)),
    );
    tokio::time::sleep(Duration::from_secs(30)).await;
    cancel.cancel();
    task.await.unwrap();
    let (early, late) = (*early_count.lock(), *late_count.lock());
    assert!(
        (9..=13).contains(&early),
        "every 5 s for 60 s, not every 60 s: {early}"
    );
    assert!(
        (12..=16).contains(&late),
        "every 2 s after being added at 30 s: {late}"
    );
}

#[tokio::test]
async fn a_registration_of_another_informer_is_refused() {
    let quiet = || {
        Scripted::new(
            |_| ListReply::Items(vec![], "1"),
            |_, _| WatchReply::Stay(vec![]),
        )
    };
    let a = SharedIndexInformer::new(quiet(), options());
    let b = SharedIndexInformer::new(quiet(), options());
    let registration = a.add_event_handler(HandlerFuncs::new(), HandlerOptions::default());
    assert!(b.remove_event_handler(&registration).await.is_err());
    assert_eq!(a.handler_count(), 1);
    a.remove_event_handler(&registration).await.unwrap();
    assert_eq!(a.handler_count(), 0);
}

#[tokio::test]
async fn a_panicking_handler_is_reported_with_its_name_and_the_key() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "5")], "5"),
        |_, _| WatchReply::Stay(vec![]),
    );
    let (informer, failures, cancel, task) = run(source, options());
    let registration = informer.add_event_handler(
        HandlerFuncs::new().on_add(|_: Arc<ConfigMap>, _| panic!("handler bug")),
        HandlerOptions::default().name("counter"),
    );
    registration
        .wait_for_sync(Duration::from_secs(10))
        .await
        .unwrap();
    until("reported", || !failures.lock().is_empty()).await;
    assert_eq!(
        failures.lock()[0],
        "handler: event handler counter panicked on demo/a: handler bug"
    );
    cancel.cancel();
    task.await.unwrap();
}

/// An empty first list syncs the queue with nothing to pop: the sync wait must still hear
/// of it at once (it used to wait out its whole timeout).
#[tokio::test(start_paused = true)]
async fn an_empty_first_list_ends_the_sync_wait_at_once() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![], "5"),
        |_, _| WatchReply::Stay(vec![]),
    );
    let (informer, _, cancel, task) = run(source, options());
    let started = tokio::time::Instant::now();
    informer
        .wait_for_sync(Duration::from_secs(3600))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    cancel.cancel();
    task.await.unwrap();
}
