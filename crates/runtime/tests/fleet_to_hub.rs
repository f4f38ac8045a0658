//! From members back to the hub: a hub controller that watches objects in every member of a
//! fleet (`Controller::watches_fleet`) reconciles the hub object they map to — when one
//! changes, when a member joins, and when a member leaves.

use crate::common;

use std::sync::Arc;

use common::{fleet_member as member, run_fleet, until};
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    ResourceExt,
    api::{Api, Patch, PatchParams},
};
use kube_informer::{
    ObjectKey,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, Controller, ControllerOptions},
    fleet::{Fleet, sources},
};
use serde_json::json;
use tokio::task::JoinSet;

struct Hub {
    client: kube::Client,
    fleet: Fleet,
}

/// Writes into the hub's placement the members holding a ConfigMap labelled with its name.
async fn gather(placement: Cached<ConfigMap>, hub: Arc<Hub>) -> Result<Action, kube::Error> {
    let Cached::Present(placement) = placement else {
        return Ok(Action::Done);
    };
    let name = placement.name_any();
    let mut holding = Vec::new();
    for (cluster, member) in hub.fleet.clusters() {
        let store = member.factory().informer::<ConfigMap>().store();
        let labelled = |cm: &Arc<ConfigMap>| cm.labels().get("placement") == Some(&name);
        if store.list().iter().any(labelled) {
            holding.push(cluster);
        }
    }
    let api: Api<ConfigMap> = Api::namespaced(hub.client.clone(), "placements");
    let status = json!({"data": {"members": holding.join(",")}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(status))
        .await?;
    Ok(Action::Done)
}

fn members(hub: &FakeApiServer) -> Option<String> {
    let cm = hub
        .get(&Gvr::core("configmaps"), Some("placements"), "web")
        .ok()?;
    cm["data"]["members"].as_str().map(str::to_owned)
}

fn label(server: &FakeApiServer, name: &str) {
    let patch = json!({"metadata": {"labels": {"placement": "web"}}});
    server
        .patch(&Gvr::core("configmaps"), Some("shop"), name, patch)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_objects_reconcile_the_hub_object_they_map_to() {
    let hub = FakeApiServer::start(ServerConfig::default().namespaces(["placements"]))
        .await
        .unwrap();
    let placement = json!({"metadata": {"name": "web"}});
    hub.create(&Gvr::core("configmaps"), Some("placements"), placement)
        .unwrap();
    let (east, west, north) = (
        member(&["app"]).await,
        member(&["app"]).await,
        member(&["app"]).await,
    );
    label(&east, "app");

    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    run_fleet(&mut tasks, &fleet, source, &cancel);
    clusters.engage("east", east.client().unwrap());
    clusters.engage("west", west.client().unwrap());

    let hub_client = hub.client().unwrap();
    let hub_factory = SharedInformerFactory::new(hub_client.clone(), FactoryOptions::default());
    let only_placements = InformerSpec::new()
        .selectors(kube_informer::Selectors::default().in_namespace("placements"));
    let options = ControllerOptions::default().name("placement-status");
    let controller = Controller::<ConfigMap>::new_with(&hub_factory, only_placements, options)
        .watches_fleet(&fleet, |_cluster: &str, cm: &ConfigMap| {
            let placement = cm.labels().get("placement");
            let key = placement.map(|name| ObjectKey::new(Some("placements"), name));
            key.into_iter().collect()
        });
    let ctx = Arc::new(Hub {
        client: hub_client,
        fleet: fleet.clone(),
    });
    let stop = cancel.clone();
    tasks.spawn(async move {
        controller
            .run(gather, |_, _, _| Action::Retry, ctx, stop)
            .await
            .unwrap();
    });

    until("east holds the placement", || {
        members(&hub).as_deref() == Some("east")
    })
    .await;
    label(&west, "app");
    until("a change in west reaches the hub", || {
        members(&hub).as_deref() == Some("east,west")
    })
    .await;
    label(&north, "app");
    clusters.engage("north", north.client().unwrap());
    until("a member that joins is followed", || {
        members(&hub).as_deref() == Some("east,north,west")
    })
    .await;
    clusters.remove("east");
    until("a member that leaves is dropped", || {
        members(&hub).as_deref() == Some("north,west")
    })
    .await;

    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    hub_factory.shutdown().await;
}
