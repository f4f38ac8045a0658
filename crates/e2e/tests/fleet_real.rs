//! A fleet over real kube-apiservers (kube-envtest): a hub whose kubeconfig Secret (the
//! generic source's opt-in label) engages a member (real TLS, a service account's token),
//! a fleet controller reconciling the member's objects through that member's client; the
//! Secret rotated to another token keeps the member's informers (no new LIST or watch,
//! read from the member's audit log) while the next request carries the new token; a
//! garbage Secret is that member's error only; the Secret deleted disengages it.

use std::{sync::Arc, time::Duration};

use e2e::eventually;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, ResourceExt, api::PostParams};
use kube_envtest::{Environment, EnvironmentOptions};
use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, ControllerOptions},
    fleet::{Cluster, Fleet, FleetController, sources},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio::task::JoinSet;

const HUB_NS: &str = "fleet-system";
const NS: &str = "apps";

async fn post(client: &kube::Client, path: &str, body: serde_json::Value) -> serde_json::Value {
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    client.request(request).await.unwrap()
}

/// A token of the member's service account `name`.
async fn token_for(member: &kube::Client, name: &str) -> String {
    let path = format!("/api/v1/namespaces/{NS}/serviceaccounts");
    post(member, &path, json!({"metadata": {"name": name}})).await;
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}});
    let answer = post(member, &format!("{path}/{name}/token"), request).await;
    answer["status"]["token"].as_str().unwrap().to_owned()
}

/// The member's kubeconfig with `token` in place of the admin's.
fn kubeconfig(member: &Environment, token: &str) -> String {
    let mut kubeconfig = serde_json::to_value(member.kubeconfig()).unwrap();
    kubeconfig["users"][0]["user"] = json!({"token": token});
    kubeconfig.to_string()
}

fn secret(kubeconfig: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": "member-a", "labels": {"sigs.k8s.io/multicluster-runtime-kubeconfig": "true"}},
        "stringData": {"kubeconfig": kubeconfig},
    }))
    .unwrap()
}

/// The member's audit: LISTs and watches of ConfigMaps by `user`, and any request by it.
fn by(member: &Environment, user: &str) -> (usize, usize) {
    let events = member.audit_requests().unwrap();
    let mine: Vec<_> = events.iter().filter(|e| e.user.username == user).collect();
    let informer = mine
        .iter()
        .filter(|e| {
            matches!(e.verb.as_str(), "list" | "watch")
                && e.object_ref.as_ref().and_then(|o| o.resource.as_deref()) == Some("configmaps")
        })
        .count();
    (informer, mine.len())
}

struct Ctx {
    client: kube::Client,
    seen: Arc<Mutex<Vec<String>>>,
}

/// A single-cluster reconcile: reads its object back through its cluster's client.
async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    if let Cached::Present(cm) = cm {
        let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), NS);
        api.get(&cm.name_any()).await?;
        ctx.seen.lock().push(cm.name_any());
    }
    Ok(Action::Done)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn a_hub_secret_engages_a_real_member_and_rotates_its_token_in_place() {
    let (Some(hub), Some(member)) = (
        Environment::start_or_skip(EnvironmentOptions::new())
            .await
            .unwrap(),
        Environment::start_or_skip(EnvironmentOptions::new())
            .await
            .unwrap(),
    ) else {
        return;
    };
    e2e::ensure_namespace(&hub.client(), HUB_NS).await;
    e2e::ensure_namespace(&member.client(), NS).await;
    let (first, second) = (
        token_for(&member.client(), "fleet-1").await,
        token_for(&member.client(), "fleet-2").await,
    );
    let (user_1, user_2) = (
        format!("system:serviceaccount:{NS}:fleet-1"),
        format!("system:serviceaccount:{NS}:fleet-2"),
    );
    let secrets: Api<Secret> = Api::namespaced(hub.client(), HUB_NS);
    secrets
        .create(
            &PostParams::default(),
            &secret(&kubeconfig(&member, &first)),
        )
        .await
        .unwrap();

    let hub_factory = SharedInformerFactory::new(hub.client(), FactoryOptions::default());
    let source = sources::kubeconfig_secrets(&hub_factory, HUB_NS);
    hub_factory.start();
    let fleet = Fleet::new(FactoryOptions::default());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    tasks.spawn({
        let (fleet, cancel) = (fleet.clone(), cancel.clone());
        async move { fleet.run(source, cancel).await }
    });
    let make_ctx = {
        let seen = seen.clone();
        move |cluster: &Cluster| {
            Arc::new(Ctx {
                client: cluster.client().clone(),
                seen: seen.clone(),
            })
        }
    };
    let controller =
        FleetController::<ConfigMap>::new(&fleet, ControllerOptions::default().name("fleet-real"));
    tasks.spawn(controller.run(make_ctx, reconcile, |_, _, _| Action::Retry, cancel.clone()));

    let configmaps: Api<ConfigMap> = Api::namespaced(member.client(), NS);
    let create = |name: &str| {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        let configmaps = configmaps.clone();
        async move {
            configmaps
                .create(&PostParams::default(), &cm)
                .await
                .unwrap()
        }
    };
    create("before").await;
    eventually("the member's object reconciled", || {
        seen.lock().iter().any(|s| s == "before")
    })
    .await;
    // The audit log is written as requests complete (a watch when it starts): wait for it.
    eventually("the member's informer watched as fleet-1", || {
        by(&member, &user_1).0 >= 1
    })
    .await;

    // The Secret rotated to another token: the same client and informers (no LIST or
    // watch as fleet-2); the next reconcile's GET goes as fleet-2.
    let mut applied = fleet.applied();
    let count = *applied.borrow_and_update();
    let mut rotated = secrets.get("member-a").await.unwrap();
    rotated.data = None;
    rotated.string_data = secret(&kubeconfig(&member, &second)).string_data;
    secrets
        .replace("member-a", &PostParams::default(), &rotated)
        .await
        .unwrap();
    applied.wait_for(|n| *n > count).await.unwrap();
    create("after").await;
    eventually("reconciled after the rotation", || {
        seen.lock().iter().any(|s| s == "after")
    })
    .await;
    eventually("the member's audit shows fleet-2's GET", || {
        by(&member, &user_2).1 > 0
    })
    .await;
    assert_eq!(
        by(&member, &user_2).0,
        0,
        "the rotation relisted or rewatched"
    );
    assert!(fleet.errors().is_empty());

    // Garbage: an error of member-a, which keeps working.
    let count = *applied.borrow_and_update();
    let mut garbage = secrets.get("member-a").await.unwrap();
    garbage.data = None;
    garbage.string_data = secret("clusters: [garbage").string_data;
    secrets
        .replace("member-a", &PostParams::default(), &garbage)
        .await
        .unwrap();
    applied.wait_for(|n| *n > count).await.unwrap();
    assert!(fleet.errors()["member-a"].contains("not a usable kubeconfig"));
    create("still").await;
    eventually("reconciled with the working credentials", || {
        seen.lock().iter().any(|s| s == "still")
    })
    .await;

    // Deleted: disengaged.
    secrets
        .delete("member-a", &Default::default())
        .await
        .unwrap();
    let mut changes = fleet.changes();
    tokio::time::timeout(Duration::from_secs(60), changes.wait_for(|c| c.is_empty()))
        .await
        .expect("member-a disengaged")
        .unwrap();

    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    hub_factory.shutdown().await;
}
