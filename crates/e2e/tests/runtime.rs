//! The runtime's writes, accepted by both servers: Events as the recorder writes them (a
//! real server validates `events.k8s.io/v1` strictly), Leases as leader election writes
//! them, and the finalizer helper's patches. Verdicts are what the servers hold at the end,
//! never how long it took.

use std::{sync::Arc, time::Duration};

use e2e::{Backend, both, ensure_namespace};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::ConfigMap, events::v1::Event};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use kube_informer_runtime::{
    controller::Action,
    events::{EventType, NewEvent, Recorder, Reporter},
    finalizer::{Event as Finalizing, finalizer},
    leader_election::{LeaderElectionConfig, LeaderElector},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Polls `check` every 50 ms until it holds; gives up after a minute (a hang, not a verdict).
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..1200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

async fn config_map(api: &Api<ConfigMap>, name: &str) -> ConfigMap {
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap()
}

async fn events_are_accepted_and_repeats_become_a_series(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, "rt-events").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "rt-events");
    let cm = config_map(&cms, "subject").await;
    let recorder = Recorder::new(
        client.clone(),
        Reporter::new("e2e.example.com/tests", "replica-0"),
    );
    let events: Api<Event> = Api::namespaced(client.clone(), "rt-events");
    for _ in 0..3 {
        recorder.publish(
            &cm,
            NewEvent::new(EventType::Normal, "Synced", "Reconcile").note("in sync"),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let name = backend.name();
    eventually("the event and its series are written", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.unwrap();
            list.items
                .iter()
                .any(|e| e.series.as_ref().is_some_and(|s| s.count >= 2))
        }
    })
    .await;
    let list = events.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        list.items.len(),
        1,
        "{name}: one Event for three repeats: {:?}",
        list.items
    );
    let event = &list.items[0];
    assert_eq!(event.reason.as_deref(), Some("Synced"), "{name}");
    assert_eq!(
        event.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("subject"),
        "{name}"
    );
    assert_eq!(recorder.dropped(), 0, "{name}: nothing dropped");
}

both!(events_are_accepted_and_repeats_become_a_series);

fn elector(backend: &Backend, identity: &str) -> LeaderElector {
    let config = LeaderElectionConfig::new("e2e-leader")
        .namespace("rt-lease")
        .identity(identity)
        // The handover is by release, so the lease's length costs nothing here; long enough
        // that a renewal slowed by a busy machine never loses a's term on its own.
        .lease_duration(Duration::from_secs(15))
        .renew_deadline(Duration::from_secs(10))
        .retry_period(Duration::from_millis(500));
    let leases: Api<Lease> = Api::namespaced(backend.client(), "rt-lease");
    LeaderElector::new(leases, config).expect("a valid config")
}

async fn a_released_lease_passes_to_the_other_candidate(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, "rt-lease").await;
    let (a, b) = (
        Arc::new(elector(&backend, "a")),
        Arc::new(elector(&backend, "b")),
    );
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let run_a = tokio::spawn({
        let (a, cancel) = (a.clone(), cancel_a.clone());
        async move { a.run(cancel).await }
    });
    eventually("a leads", || std::future::ready(a.is_leading())).await;
    let run_b = tokio::spawn({
        let (b, cancel) = (b.clone(), cancel_b.clone());
        async move { b.run(cancel).await }
    });
    let leases: Api<Lease> = Api::namespaced(client.clone(), "rt-lease");
    let held = leases.get("e2e-leader").await.unwrap().spec.unwrap();
    assert_eq!(
        held.holder_identity.as_deref(),
        Some("a"),
        "{}",
        backend.name()
    );
    assert!(!b.is_leading(), "{}: never two leaders", backend.name());

    cancel_a.cancel();
    run_a.await.unwrap();
    assert!(!a.is_leading());
    eventually("b takes over", || std::future::ready(b.is_leading())).await;
    let taken = leases.get("e2e-leader").await.unwrap().spec.unwrap();
    assert_eq!(
        taken.holder_identity.as_deref(),
        Some("b"),
        "{}",
        backend.name()
    );
    assert_eq!(taken.lease_transitions, Some(1), "{}", backend.name());
    cancel_b.cancel();
    run_b.await.unwrap();
    let released = leases.get("e2e-leader").await.unwrap().spec.unwrap();
    assert_eq!(
        released.holder_identity.as_deref().unwrap_or(""),
        "",
        "{}: released",
        backend.name()
    );
}

both!(a_released_lease_passes_to_the_other_candidate);

async fn the_finalizer_helper_adds_cleans_up_and_removes(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, "rt-final").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "rt-final");
    let name = backend.name();
    const FINALIZER: &str = "e2e.example.com/cleanup";
    let cm = Arc::new(config_map(&api, "guarded").await);
    let applied = finalizer(&api, FINALIZER, cm, |_| async {
        Ok::<_, kube::Error>(Action::Done)
    })
    .await
    .unwrap();
    assert!(
        matches!(applied, Action::Done | Action::RequeueAfter(_)),
        "{name}"
    );
    let cm = api.get("guarded").await.unwrap();
    assert_eq!(
        cm.metadata.finalizers.as_deref(),
        Some(&[FINALIZER.to_owned()][..]),
        "{name}"
    );

    api.delete("guarded", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = Arc::new(api.get("guarded").await.unwrap());
    assert!(
        deleting.metadata.deletion_timestamp.is_some(),
        "{name}: held by the finalizer"
    );
    let mut cleaned = false;
    finalizer(&api, FINALIZER, deleting, |event| {
        cleaned = matches!(event, Finalizing::Cleanup(_));
        async { Ok::<_, kube::Error>(Action::Done) }
    })
    .await
    .unwrap();
    assert!(cleaned, "{name}: cleanup ran");
    let gone = api.get_opt("guarded").await.unwrap();
    assert!(
        gone.is_none(),
        "{name}: removed with its finalizer: {gone:?}"
    );
}

both!(the_finalizer_helper_adds_cleans_up_and_removes);

/// A concurrent writer between the controller's read and its finalizer removal (an
/// unrelated annotation patch moves the resourceVersion) must not make the cleanup run
/// twice: the removal is retried alone. The controller here retries the reconcile with
/// the fresh object after any error, as a real one would.
async fn a_cleanup_runs_exactly_once_under_a_concurrent_writer(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, "rt-final-race").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "rt-final-race");
    let name = backend.name();
    const FINALIZER: &str = "e2e.example.com/once";
    for i in 0..3 {
        let object = format!("raced-{i}");
        let cm = Arc::new(config_map(&api, &object).await);
        finalizer(&api, FINALIZER, cm, |_| async {
            Ok::<_, kube::Error>(Action::Done)
        })
        .await
        .unwrap();
        api.delete(&object, &DeleteParams::default()).await.unwrap();
        // The controller's (soon stale) view of the terminating object.
        let mut seen = Arc::new(api.get(&object).await.unwrap());
        // Another writer changes the object after that read.
        let patch = json!({"metadata": {"annotations": {"other-writer": format!("{i}")}}});
        api.patch(
            &object,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
        let cleanups = std::sync::atomic::AtomicUsize::new(0);
        for _attempt in 0..5 {
            let result = finalizer(&api, FINALIZER, seen.clone(), |event| {
                if matches!(event, Finalizing::Cleanup(_)) {
                    cleanups.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                async { Ok::<_, kube::Error>(Action::Done) }
            })
            .await;
            if result.is_ok() {
                break;
            }
            match api.get_opt(&object).await.unwrap() {
                Some(fresh) => seen = Arc::new(fresh),
                None => break,
            }
        }
        assert_eq!(
            cleanups.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "{name}: {object} cleaned up exactly once"
        );
        let gone = api.get_opt(&object).await.unwrap();
        assert!(gone.is_none(), "{name}: {object} removed: {gone:?}");
    }
}

both!(a_cleanup_runs_exactly_once_under_a_concurrent_writer);
