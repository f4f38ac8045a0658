//! The README's demo, run whole on tiny and empty simulated clusters, over typed and compact
//! pod caches: its verdict must be "all match" whatever the size (a namespace without pods
//! needs no summary).

#[path = "../examples/demo/cluster.rs"]
mod cluster;
#[path = "../examples/demo/controllers.rs"]
mod controllers;
#[path = "../examples/demo/failure.rs"]
mod failure;
#[path = "../examples/demo/replicas.rs"]
mod replicas;
#[path = "../examples/demo/verify.rs"]
mod verify;

use failure::Failure;
use kube_informer_runtime::CancellationToken;

async fn demo(pods: u64) {
    run(pods, false).await;
}

async fn run(pods: u64, compact: bool) {
    let plan = replicas::Plan {
        pods,
        seconds: 2,
        seed: 7,
        compact,
        cache_dir: None,
    };
    if let Err(err) = replicas::simulated_cluster(plan, &CancellationToken::new()).await {
        panic!("the demo with {pods} pods (compact: {compact}) failed: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_cluster_matches() {
    demo(0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_pod_cluster_matches() {
    demo(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_pod_cluster_matches() {
    demo(4).await;
}

/// `--compact`: the controllers read `Compact<Pod>` caches (the index, the owner mapping and
/// the listers on metadata, the phase decoded) and reach the same verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_pod_cluster_matches_over_compact_pods() {
    run(4, true).await;
}

/// `--cache-dir`: the killed leader comes back from its snapshot two thirds of the way in,
/// with no LIST of pods (the demo fails if it lists them), and the verdict still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_killed_leader_comes_back_from_its_cache_directory() {
    let dir = tempfile::tempdir().unwrap();
    let plan = replicas::Plan {
        pods: 40,
        seconds: 3,
        seed: 7,
        compact: false,
        cache_dir: Some(dir.path().to_owned()),
    };
    if let Err(err) = replicas::simulated_cluster(plan, &CancellationToken::new()).await {
        panic!("the demo with a cache directory failed: {err}");
    }
}

/// A dropped replica (a failing run, a second Ctrl-C) takes its manager with it: the
/// endpoints it served stop answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_replica_stops_its_manager() {
    let server = fake_apiserver::FakeApiServer::start(fake_apiserver::ServerConfig::default())
        .await
        .unwrap();
    let spec = replicas::Spec::default();
    let never = CancellationToken::new();
    let replica = replicas::start(server.client().unwrap(), "r", &spec, &never)
        .await
        .unwrap();
    let addr = replica.addr;
    assert_eq!(replicas::get(addr, "/healthz").await.0, 200);
    drop(replica);
    let mut stopped = false;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if replicas::get(addr, "/healthz").await.0 == 0 {
            stopped = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(stopped, "the dropped replica's manager still serves {addr}");
}
