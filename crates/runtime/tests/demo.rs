//! The README's demo, run whole on tiny and empty simulated clusters: its verdict must be
//! "all match" whatever the size (a namespace without pods needs no summary).

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
    let plan = replicas::Plan {
        pods,
        seconds: 2,
        seed: 7,
    };
    if let Err(err) = replicas::simulated_cluster(plan, &CancellationToken::new()).await {
        panic!("the demo with {pods} pods failed: {err}");
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
