//! The sharder's loop on fake-apiserver: objects created while it runs are labelled for
//! the live shards, and a killed replica's objects go to the living ones once its Lease
//! has expired. (Placement, filtering and the drain handover on both servers:
//! `e2e/tests/sharding.rs`.)

use std::{sync::Arc, time::Duration};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_informer_runtime::{
    CancellationToken,
    leader_election::LeaderElector,
    lease::MemoryLeases,
    sharding::{LiveShards, Placement, ShardedKind, Sharder, shard_label},
};
use serde_json::json;

/// The sharder's loop on short Leases: objects created while it runs are labelled, and
/// when a replica is killed (its Lease no longer renewed) its objects go to the living
/// ones once its Lease has expired, without a drain (a dead shard reconciles nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharders_loop_labels_new_objects_and_moves_a_dead_shards_objects() {
    // Decoding inline is process-wide and set once: every test of this binary asks for it,
    // so the paused tests below get it whichever test runs first.
    let _ = kube_informer::list_watch::set_decoding_threads(0);
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["demo"]))
        .await
        .unwrap();
    let cms = Gvr::core("configmaps");
    let leases = Arc::new(MemoryLeases::default());
    // Long enough that a living shard's elector, starved for seconds on a busy machine, is
    // not taken for dead (at 3 s its objects could move); c's Lease still expires within
    // the minute the waits allow.
    let short = |name: &str| {
        kube_informer_runtime::sharding::shard_lease("web", name)
            .lease_duration(Duration::from_secs(10))
            .renew_deadline(Duration::from_secs(7))
            .retry_period(Duration::from_secs(1))
    };
    let mut replicas = Vec::new();
    for name in ["a", "b", "c"] {
        let elector = LeaderElector::new(leases.clone(), short(name)).unwrap();
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (e, c) = (elector.clone(), cancel.clone());
            async move { e.run(c).await }
        });
        elector.leading().wait_for(|l| *l).await.unwrap();
        replicas.push((name, cancel, task));
    }
    let live = LiveShards::new(leases.clone(), "web");
    let kinds = [ShardedKind::of::<ConfigMap>(
        server.client().unwrap(),
        Some("demo"),
        Placement::Own,
    )];
    let stop = CancellationToken::new();
    let sharder = tokio::spawn({
        let stop = stop.clone();
        async move {
            Sharder::new("web")
                .run(&live, &kinds, Duration::from_millis(100), stop)
                .await;
        }
    });
    for i in 0..60 {
        server
            .create(
                &cms,
                Some("demo"),
                json!({"metadata": {"name": format!("cm-{i}")}}),
            )
            .unwrap();
    }
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let label = shard_label("web");
    let shards_of = || async {
        let mut by_shard = std::collections::BTreeMap::<String, usize>::new();
        for cm in api.list(&Default::default()).await.unwrap().items {
            let shard = cm
                .metadata
                .labels
                .and_then(|mut l| l.remove(&label))
                .unwrap_or_default();
            *by_shard.entry(shard).or_default() += 1;
        }
        by_shard
    };
    let wait_for = |want: &'static [&'static str]| async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let by_shard = shards_of().await;
            if by_shard.keys().map(String::as_str).eq(want.iter().copied()) {
                return by_shard;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "shards {by_shard:?}, want {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let three = wait_for(&["a", "b", "c"]).await;
    assert_eq!(three.values().sum::<usize>(), 60);

    // Kill c: its task aborted, its Lease left as it was.
    let (_, _, task) = replicas.pop().unwrap();
    task.abort();
    let _ = task.await;
    let two = wait_for(&["a", "b"]).await;
    assert_eq!(two.values().sum::<usize>(), 60);
    assert!(
        two["a"] >= three["a"] && two["b"] >= three["b"],
        "a living shard lost objects"
    );

    stop.cancel();
    sharder.await.unwrap();
    for (_, cancel, task) in replicas {
        cancel.cancel();
        task.await.unwrap();
    }
}

/// A new object is labelled when its event reaches the sharder's cache, not at the next
/// round: with rounds an hour apart, on a paused clock over an in-memory server (the clock
/// moves only when everything is idle), it is labelled within a few milliseconds.
#[test]
fn a_new_object_is_labelled_on_its_event_not_at_the_next_round() {
    let _ = kube_informer::list_watch::set_decoding_threads(0);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = FakeApiServer::start(ServerConfig::default().namespaces(["demo"]))
            .await
            .unwrap();
        let cms = Gvr::core("configmaps");
        let leases = Arc::new(MemoryLeases::default());
        let elector = LeaderElector::new(
            leases.clone(),
            kube_informer_runtime::sharding::shard_lease("web", "a"),
        )
        .unwrap();
        let cancel = CancellationToken::new();
        let member = tokio::spawn({
            let (e, c) = (elector.clone(), cancel.clone());
            async move { e.run(c).await }
        });
        elector.leading().wait_for(|l| *l).await.unwrap();
        server
            .create(&cms, Some("demo"), json!({"metadata": {"name": "before"}}))
            .unwrap();
        let live = LiveShards::new(leases.clone(), "web");
        let kinds = [ShardedKind::of::<ConfigMap>(
            server.memory_client(),
            Some("demo"),
            Placement::Own,
        )];
        let stop = CancellationToken::new();
        let sharder = Sharder::new("web");
        let run = sharder.run(&live, &kinds, Duration::from_secs(3600), stop.clone());
        let check = async {
            let label = shard_label("web");
            let labelled = |name: &str| {
                server.get(&cms, Some("demo"), name).unwrap()["metadata"]["labels"][&label] == "a"
            };
            let polls_until = |name: &'static str| async move {
                for poll in 0.. {
                    if labelled(name) {
                        return poll;
                    }
                    assert!(poll < 360_000, "{name} never labelled");
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                unreachable!()
            };
            // The first round, at once.
            polls_until("before").await;
            server
                .create(&cms, Some("demo"), json!({"metadata": {"name": "after"}}))
                .unwrap();
            let start = tokio::time::Instant::now();
            polls_until("after").await;
            let took = start.elapsed();
            assert!(
                took < Duration::from_millis(100),
                "labelled after {took:?}: at a round, not on its event"
            );
            stop.cancel();
        };
        tokio::join!(run, check);
        cancel.cancel();
        member.await.unwrap();
        server.shutdown().await;
    });
}

/// The sharder's future dropped (an election lost, a manager killed), not cancelled:
/// every task it started ends with it (its informer's watch and its handler's delivery).
#[test]
fn a_dropped_sharder_leaves_no_task_behind() {
    let _ = kube_informer::list_watch::set_decoding_threads(0);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = FakeApiServer::start(ServerConfig::default().namespaces(["demo"]))
            .await
            .unwrap();
        let cms = Gvr::core("configmaps");
        server
            .create(&cms, Some("demo"), json!({"metadata": {"name": "one"}}))
            .unwrap();
        let leases = Arc::new(MemoryLeases::default());
        let live = LiveShards::new(leases.clone(), "web");
        let kinds = [ShardedKind::of::<ConfigMap>(
            server.memory_client(),
            Some("demo"),
            Placement::Own,
        )];
        let alive = || {
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks()
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let before = alive();
        let sharder = Sharder::new("web");
        let run = sharder.run(
            &live,
            &kinds,
            Duration::from_secs(1),
            CancellationToken::new(),
        );
        tokio::select! {
            () = run => panic!("the sharder returned uncancelled"),
            () = tokio::time::sleep(Duration::from_secs(3)) => {}
        }
        // Dropped by the select. What it started ends once the runtime has run it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(alive(), before, "tasks left behind by a dropped sharder");
        server.shutdown().await;
    });
}
