//! The sharding example's run on a real kube-apiserver (real only: the fake is what
//! `cargo run --example sharding` uses by default, and `crates/runtime/tests/demo.rs`-style
//! runs of it would repeat `sharded_managers.rs`). Three replicas split 300 ConfigMaps, one
//! is killed and taken over, one joins, objects change all along; the verdict must be clean.

#[path = "../../runtime/examples/sharding/demo.rs"]
mod demo;

use e2e::ensure_namespace;
use kube_envtest::{Environment, EnvironmentOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn the_sharding_demo_on_a_real_cluster_gives_a_clean_verdict() {
    let Some(env) = Environment::start_or_skip(EnvironmentOptions::new())
        .await
        .expect("the real API server starts")
    else {
        return;
    };
    let client = env.client();
    ensure_namespace(&client, "sharding-demo").await;
    demo::run(&client, "sharding-demo")
        .await
        .expect("a clean verdict");
}
