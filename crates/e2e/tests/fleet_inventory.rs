//! Fleets read from the cluster inventories that real producers fill, on three servers of
//! each kind (a hub, members a and b):
//!
//! - **Cluster API**: a namespace as Cluster API fills it — a `Cluster` (the v1beta2 CRD,
//!   v1beta1 served too, status as a subresource), its `<name>-kubeconfig` Secret, the
//!   `-ca`, `-etcd`, `-sa`, `-proxy` Secrets with the same label, and bootstrap-data
//!   Secrets made and deleted as a MachineDeployment rolls. Member a is engaged only once
//!   its control plane is initialized, stays engaged (same generation, no error) through
//!   the rollout and the CA Secret's deletion, has its new objects reconciled, and is
//!   disengaged when its `Cluster` is deleted.
//! - **ClusterProfile**: member b from a `ClusterProfile` and the kubeconfig Secret a
//!   cluster manager made for this consumer, engaged once `ControlPlaneHealthy`.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use e2e::{Backend, eventually};
use futures_util::Stream;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt, api::PostParams};
use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, ControllerOptions},
    fleet::{ClusterEvent, Fleet, FleetController, sources},
};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::task::JoinSet;

const CAPI_NS: &str = "capi-clusters";
const NS: &str = "apps";

/// The reconciles seen: `cluster/name`.
type Seen = Arc<Mutex<BTreeSet<String>>>;

fn crd(group: &str, plural: &str, kind: &str, versions: &[(&str, bool)]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(name, storage)| {
            json!({"name": name, "served": true, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}})
        })
        .collect();
    json!({
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced", "versions": versions,
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")}},
    })
}

async fn send(client: &kube::Client, method: &str, path: &str, body: Option<Value>) -> Value {
    let builder = http::Request::builder().method(method).uri(path);
    let (builder, body) = match body {
        Some(body) if method == "PATCH" => (
            builder.header("content-type", "application/merge-patch+json"),
            body,
        ),
        Some(body) => (builder.header("content-type", "application/json"), body),
        None => (builder, Value::Null),
    };
    let body = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(&body).unwrap()
    };
    client
        .request(builder.body(body).unwrap())
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// A Secret as Cluster API makes them: its label, its type, `data`.
fn capi_secret(name: &str, cluster: &str, data: Value) -> Value {
    json!({"metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "type": "cluster.x-k8s.io/secret", "stringData": data})
}

fn reconciling(fleet: &Fleet, seen: &Seen, cancel: &CancellationToken, tasks: &mut JoinSet<()>) {
    let seen_by = seen.clone();
    let make_ctx = move |cluster: &kube_informer_runtime::fleet::Cluster| {
        Arc::new((cluster.name().to_owned(), seen_by.clone()))
    };
    async fn reconcile(
        cm: Cached<ConfigMap>,
        ctx: Arc<(String, Seen)>,
    ) -> Result<Action, kube::Error> {
        if let Cached::Present(cm) = cm {
            ctx.1.lock().insert(format!("{}/{}", ctx.0, cm.name_any()));
        }
        Ok(Action::Done)
    }
    let spec = || {
        kube_informer::factory::InformerSpec::new()
            .selectors(kube_informer::Selectors::default().in_namespace(NS))
    };
    let options = ControllerOptions::default().name("inventory");
    let controller = FleetController::<ConfigMap>::new_with(fleet, spec, options);
    tasks.spawn(controller.run(make_ctx, reconcile, |_, _, _| Action::Retry, cancel.clone()));
}

fn run_fleet(
    fleet: &Fleet,
    source: impl Stream<Item = ClusterEvent> + Send + 'static,
    cancel: &CancellationToken,
    tasks: &mut JoinSet<()>,
) {
    let (fleet, cancel) = (fleet.clone(), cancel.clone());
    tasks.spawn(async move { fleet.run(source, cancel).await });
}

async fn create_cm(member: &Backend, name: &str) {
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<ConfigMap>::namespaced(member.client(), NS)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

async fn inventories(hub: Backend, a: Backend, b: Backend) {
    let hub_client = hub.client();
    for (group, plural, kind, versions) in [
        (
            "cluster.x-k8s.io",
            "clusters",
            "Cluster",
            &[("v1beta1", false), ("v1beta2", true)][..],
        ),
        (
            "multicluster.x-k8s.io",
            "clusterprofiles",
            "ClusterProfile",
            &[("v1alpha1", true)][..],
        ),
    ] {
        e2e::install_crd(&hub_client, crd(group, plural, kind, versions)).await;
    }
    e2e::ensure_namespace(&hub_client, CAPI_NS).await;
    for member in [&a, &b] {
        e2e::ensure_namespace(&member.client(), NS).await;
    }
    let secrets = format!("/api/v1/namespaces/{CAPI_NS}/secrets");
    let clusters = format!("/apis/cluster.x-k8s.io/v1beta2/namespaces/{CAPI_NS}/clusters");
    // Cluster API's namespace before the control plane is up: the Cluster, its
    // certificates, the kubeconfig, a bootstrap Secret per Machine.
    send(
        &hub_client,
        "POST",
        &clusters,
        Some(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "a", "labels": {"env": "prod"}},
            "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}}},
        })),
    )
    .await;
    for suffix in ["ca", "etcd", "sa", "proxy"] {
        let data = json!({"tls.crt": "-----BEGIN CERTIFICATE-----", "tls.key": "-----BEGIN PRIVATE KEY-----"});
        send(
            &hub_client,
            "POST",
            &secrets,
            Some(capi_secret(&format!("a-{suffix}"), "a", data)),
        )
        .await;
    }
    send(
        &hub_client,
        "POST",
        &secrets,
        Some(capi_secret(
            "a-kubeconfig",
            "a",
            json!({"value": a.kubeconfig()}),
        )),
    )
    .await;
    let bootstrap = |name: &str| {
        capi_secret(
            name,
            "a",
            json!({"value": "#cloud-config\nruncmd: [kubeadm join]", "format": "cloud-config"}),
        )
    };
    for machine in ["a-md-0-7x2kq", "a-md-0-p9c4n", "a-control-plane-rz5ll"] {
        send(&hub_client, "POST", &secrets, Some(bootstrap(machine))).await;
    }

    let hub_factory = SharedInformerFactory::new(hub.informer_client(), FactoryOptions::default());
    let capi = sources::cluster_api(&hub_factory, Some(CAPI_NS))
        .await
        .expect("Cluster API is served");
    let profiles = sources::ClusterProfiles::with_secrets("my-operator")
        .namespace(CAPI_NS)
        .source(&hub_factory);
    hub_factory.start();
    let (capi_fleet, profile_fleet) = (
        Fleet::new(FactoryOptions::default()),
        Fleet::new(FactoryOptions::default()),
    );
    let seen: Seen = Arc::default();
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    run_fleet(&capi_fleet, capi, &cancel, &mut tasks);
    run_fleet(&profile_fleet, profiles, &cancel, &mut tasks);
    reconciling(&capi_fleet, &seen, &cancel, &mut tasks);
    reconciling(&profile_fleet, &seen, &cancel, &mut tasks);
    create_cm(&a, "first").await;
    create_cm(&b, "first").await;

    // Nothing is engaged before the control plane is initialized: every Secret seen,
    // none taken for a kubeconfig.
    hub_factory
        .wait_for_sync(std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let mut applied = capi_fleet.applied();
    assert!(
        capi_fleet.clusters().is_empty(),
        "engaged before its control plane was up"
    );
    assert!(capi_fleet.errors().is_empty(), "{:?}", capi_fleet.errors());
    let status = json!({"status": {"phase": "Provisioned", "initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true}}});
    send(
        &hub_client,
        "PATCH",
        &format!("{clusters}/a/status"),
        Some(status),
    )
    .await;
    eventually("a engaged and its object reconciled", || {
        seen.lock().contains("capi-clusters/a/first")
    })
    .await;
    let engaged = capi_fleet.cluster("capi-clusters/a").expect("a engaged");
    assert_eq!(
        engaged.labels().get("env").map(String::as_str),
        Some("prod")
    );

    // A MachineDeployment rolls: old bootstrap Secrets deleted, new ones made; the CA
    // Secret deleted and made anew. Then the kubeconfig Secret rewritten with the same
    // credentials (a reformatted document): once that is applied, every Secret event
    // before it was seen too (one informer, in order).
    for machine in ["a-md-0-7x2kq", "a-md-0-p9c4n"] {
        send(&hub_client, "DELETE", &format!("{secrets}/{machine}"), None).await;
    }
    for machine in ["a-md-0-w8f3z", "a-md-0-k2j6d"] {
        send(&hub_client, "POST", &secrets, Some(bootstrap(machine))).await;
    }
    send(&hub_client, "DELETE", &format!("{secrets}/a-ca"), None).await;
    let count = *applied.borrow_and_update();
    let reformatted = format!("{}\n", a.kubeconfig());
    send(
        &hub_client,
        "PATCH",
        &format!("{secrets}/a-kubeconfig"),
        Some(json!({"stringData": {"value": reformatted}})),
    )
    .await;
    applied.wait_for(|n| *n > count).await.unwrap();
    let still = capi_fleet
        .cluster("capi-clusters/a")
        .expect("a still engaged after the rollout");
    assert_eq!(
        still.generation(),
        engaged.generation(),
        "a was engaged anew"
    );
    assert!(capi_fleet.errors().is_empty(), "{:?}", capi_fleet.errors());
    create_cm(&a, "after-rollout").await;
    eventually("a's new object reconciled", || {
        seen.lock().contains("capi-clusters/a/after-rollout")
    })
    .await;

    // ClusterProfile: b engaged once healthy, through the Secret made for this consumer.
    let profiles =
        format!("/apis/multicluster.x-k8s.io/v1alpha1/namespaces/{CAPI_NS}/clusterprofiles");
    send(
        &hub_client,
        "POST",
        &profiles,
        Some(json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": "b", "labels": {"x-k8s.io/cluster-manager": "test"}},
            "spec": {"displayName": "b", "clusterManager": {"name": "test"}},
        })),
    )
    .await;
    send(&hub_client, "POST", &secrets, Some(json!({
        "metadata": {"name": "b-for-my-operator", "labels": {"x-k8s.io/cluster-inventory-consumer": "my-operator", "x-k8s.io/cluster-profile": "b"}},
        "stringData": {"Config": b.kubeconfig()},
    }))).await;
    let healthy = json!({"status": {"conditions": [{"type": "ControlPlaneHealthy", "status": "True", "reason": "Healthy", "message": "", "lastTransitionTime": "2026-11-28T00:00:00Z"}]}});
    send(
        &hub_client,
        "PATCH",
        &format!("{profiles}/b/status"),
        Some(healthy),
    )
    .await;
    eventually("b engaged from its profile and reconciled", || {
        seen.lock().contains("capi-clusters/b/first")
    })
    .await;

    // The Cluster deleted: a disengaged.
    send(&hub_client, "DELETE", &format!("{clusters}/a"), None).await;
    let mut changes = capi_fleet.changes();
    changes.wait_for(BTreeMap::is_empty).await.unwrap();

    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    hub_factory.shutdown().await;
}

e2e::three!(inventories);
