//! What a member kubeconfig may ask of the operator: by default, a kubeconfig that runs a
//! command is refused (a Secret's writer would run code in the operator), and the other
//! members go on; allowed, its exec plugin runs off the fleet's event loop, and a plugin
//! that fails is tried again with backoff until it works — the source never sends the same
//! kubeconfig twice.

use crate::common;

use common::{fleet_member as member, run_fleet, until};
use kube_informer::factory::FactoryOptions;
use kube_informer_runtime::{
    CancellationToken,
    fleet::{Fleet, MemberClients, sources},
};
use tokio::task::JoinSet;

/// A kubeconfig for `server` whose credentials come from `sh -c script`.
fn exec_kubeconfig(server: &str, script: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/sh",
            "args": ["-c", script], "interactiveMode": "Never",
        }}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    })
    .to_string()
}

const CREDENTIAL: &str = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_kubeconfig_is_refused_by_default_and_the_others_go_on() {
    let (up, other) = (member(&[]).await, member(&[]).await);
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    let (cancel, mut tasks) = (CancellationToken::new(), JoinSet::new());
    run_fleet(&mut tasks, &fleet, source, &cancel);
    let script = format!("echo '{CREDENTIAL}'");
    clusters.engage_kubeconfig("exec", exec_kubeconfig(up.url(), &script));
    clusters.engage("other", other.client().unwrap());
    until("the other member engaged", || {
        fleet.cluster("other").is_some()
    })
    .await;
    let errors = fleet.errors();
    assert!(
        errors.get("exec").is_some_and(|e| e.contains("allow_exec")),
        "{errors:?}"
    );
    assert!(
        fleet.cluster("exec").is_none(),
        "an exec kubeconfig engaged"
    );
    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_exec_plugin_that_fails_is_tried_again_until_it_works() {
    let server = member(&[]).await;
    let dir = std::env::temp_dir().join(format!("fleet-exec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ready = dir.join("ready");
    let _ = std::fs::remove_file(&ready);
    // Fails until the file exists (a token service down, then back).
    let script = format!("test -f {} && echo '{CREDENTIAL}'", ready.display());
    let clients = MemberClients::default().allow_exec(true);
    let fleet = Fleet::with_clients(FactoryOptions::default(), clients);
    let (clusters, source) = sources::from_code();
    let (cancel, mut tasks) = (CancellationToken::new(), JoinSet::new());
    run_fleet(&mut tasks, &fleet, source, &cancel);
    clusters.engage_kubeconfig("m", exec_kubeconfig(server.url(), &script));
    until("the plugin's failure recorded", || {
        fleet.errors().contains_key("m")
    })
    .await;
    assert!(fleet.cluster("m").is_none());
    // Nothing new from the source: the fleet itself tries again.
    std::fs::write(&ready, "").unwrap();
    until("engaged once the plugin works", || {
        fleet.cluster("m").is_some()
    })
    .await;
    assert!(fleet.errors().is_empty(), "{:?}", fleet.errors());
    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
