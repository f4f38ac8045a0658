//! The demo's controllers (ready-pods with its finalizer and events, namespace summaries)
//! on both servers: a small cluster built through the API as a real one is (pods owned by
//! ReplicaSets, status written through `/status`), churned while the manager runs, and at
//! the end what the controllers wrote agrees with the server's objects.

// Also what `demo_real` runs.
#[path = "../../runtime/examples/demo/controllers.rs"]
pub(crate) mod controllers;
#[path = "../../runtime/examples/demo/verify.rs"]
pub(crate) mod verify;

use std::time::Duration;

use e2e::{Backend, both, ensure_namespace};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Namespace, Pod},
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use kube_informer_runtime::manager::{Manager, ManagerOptions};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const NAMESPACES: [&str; 2] = ["team-0", "team-1"];

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}},
    }))
    .unwrap()
}

/// Pod `i` of Deployment `app`, owned by its ReplicaSet as on a real cluster.
fn pod(app: &str, i: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{app}-7d4b9-{i}"),
                     "labels": {"app": app, "pod-template-hash": "7d4b9"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-7d4b9"),
                                          "uid": format!("00000000-0000-4000-8000-{:012}", i), "controller": true}]},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }))
    .unwrap()
}

async fn set_phase(pods: &Api<Pod>, name: &str, phase: &str) {
    let patch = json!({"status": {"phase": phase}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("a status patch");
}

async fn objects(client: &Client) -> [Vec<Value>; 4] {
    async fn all<K>(client: &Client) -> Vec<Value>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let list = Api::<K>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        list.items
            .iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect()
    }
    [
        all::<Pod>(client).await,
        all::<Deployment>(client).await,
        all::<ConfigMap>(client).await,
        all::<Namespace>(client).await,
    ]
}

async fn the_demo_controllers_agree_with_the_server(backend: Backend) {
    let client = backend.client();
    for ns in NAMESPACES {
        ensure_namespace(&client, ns).await;
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        for app in ["web", "db"] {
            deployments
                .create(&PostParams::default(), &deployment(app))
                .await
                .unwrap();
            for i in 0..3 {
                pods.create(&PostParams::default(), &pod(app, i))
                    .await
                    .unwrap();
            }
            set_phase(&pods, &format!("{app}-7d4b9-0"), "Running").await;
        }
    }

    let options = ManagerOptions::default().bind(([127, 0, 0, 1], 0).into());
    let mut manager = Manager::new(backend.informer_client(), options)
        .await
        .unwrap();
    let recorder = manager.recorder("e2e.kube-informer.io/ready-pods");
    controllers::install::<Pod>(&mut manager, recorder, controllers::Scope::default());
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(stop.clone(), CancellationToken::new()));

    // Churn while it runs: pods start and fail, one goes, one comes, a Deployment goes
    // (its finalizer must clean up its report first).
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team-0");
    set_phase(&pods, "web-7d4b9-1", "Running").await;
    set_phase(&pods, "db-7d4b9-0", "Failed").await;
    pods.delete("web-7d4b9-2", &DeleteParams::default())
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("db", 7))
        .await
        .unwrap();
    // The finalizer must be on db before it is deleted, or its cleanup goes untested.
    let team_1 = Api::<Deployment>::namespaced(client.clone(), "team-1");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !team_1
        .get("db")
        .await
        .unwrap()
        .metadata
        .finalizers
        .unwrap_or_default()
        .iter()
        .any(|f| f == controllers::REPORT_FINALIZER)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the demo never put its finalizer on team-1/db"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    team_1.delete("db", &DeleteParams::default()).await.unwrap();

    let mut last = Vec::new();
    for _ in 0..600 {
        let [p, d, c, n] = objects(&client).await;
        let verdict = verify::verify_objects(&p, &d, &c, &n, |ns| ns.starts_with("team-"));
        if verdict.mismatches.is_empty() && verdict.deployments == 3 {
            stop.cancel();
            run.await.unwrap().unwrap();
            return;
        }
        last = verdict.mismatches;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{}: the controllers never agreed with the server: {last:?}",
        backend.name()
    );
}

both!(the_demo_controllers_agree_with_the_server);
