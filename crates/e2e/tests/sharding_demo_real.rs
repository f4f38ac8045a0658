//! The sharding example's run on a real kube-apiserver (real only: the fake is what
//! `cargo run --example sharding` uses by default, and `crates/runtime/tests/demo.rs`-style
//! runs of it would repeat `sharded_managers.rs`). Three replicas split 300 ConfigMaps, one
//! is killed and taken over, one joins, objects change all along; the verdict must be clean.
//! It runs under RBAC as a user given exactly the roles `--print-rbac` prints, and the server
//! refuses it nothing.

#[path = "../../runtime/examples/sharding/demo.rs"]
mod demo;
use crate::grant;

use e2e::ensure_namespace;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn the_sharding_demo_on_a_real_cluster_gives_a_clean_verdict() {
    let Some(env) = grant::rbac_server().await else {
        return;
    };
    let admin = env.client();
    ensure_namespace(&admin, "sharding-demo").await;
    let rbac = demo::rbac("sharding-demo").await.expect("the demo's RBAC");
    grant::grant(&admin, &rbac, "sharding-demo", "sharding-demo").await;
    let client = grant::impersonating(&env, "sharding-demo");
    demo::run(&client, "sharding-demo")
        .await
        .expect("a clean verdict");
    let refused: Vec<String> = env
        .audit_requests()
        .unwrap()
        .into_iter()
        .filter(|e| e.code() == Some(403))
        .map(|e| format!("{} {}", e.verb, e.request_uri))
        .collect();
    assert!(
        refused.is_empty(),
        "the printed RBAC was not enough: {refused:#?}"
    );
}
