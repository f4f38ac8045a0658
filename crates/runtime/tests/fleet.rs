//! A fleet on fake-apiservers: clusters engaged and disengaged while running, from code,
//! from a folder of kubeconfig files and from kubeconfig Secrets in a hub. A disengaged
//! member's informers stop and no task of it is left; a rotated token keeps the member's
//! client and informers (no relist); a broken kubeconfig is an error of that cluster only.

use crate::common;

use std::time::Duration;

use base64::Engine as _;
use common::{fleet_member as member, get, run_fleet, until};
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::factory::FactoryOptions;
use kube_informer_runtime::{
    CancellationToken,
    fleet::{Fleet, sources},
};
use serde_json::json;
use tokio::task::JoinSet;

fn kubeconfig(server: &FakeApiServer, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{{name: k, cluster: {{server: \"{}\"}}}}]\n\
         users: [{{name: u, user: {{token: {token}}}}}]\n\
         contexts: [{{name: c, context: {{cluster: k, user: u, namespace: shop}}}}]\n",
        server.url()
    )
}

/// Watches ConfigMaps in every cluster the fleet engages, as a fleet controller would.
async fn cache_every_member(fleet: Fleet, cancel: CancellationToken) {
    let mut changes = fleet.changes();
    let mut seen = std::collections::BTreeMap::new();
    loop {
        let clusters = changes.borrow_and_update().clone();
        for (name, cluster) in &clusters {
            if seen.get(name) != Some(&cluster.generation()) {
                cluster.factory().informer::<ConfigMap>();
                cluster.factory().start();
                seen.insert(name.clone(), cluster.generation());
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
    }
}

fn cached(fleet: &Fleet, name: &str) -> usize {
    fleet
        .cluster(name)
        .map_or(0, |c| c.factory().informer::<ConfigMap>().store().len())
}

fn lists_and_watches(server: &FakeApiServer) -> usize {
    let requests = server.requests();
    requests
        .iter()
        .filter(|r| matches!(r.verb, Some(Verb::List | Verb::Watch)))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_from_code_engage_and_a_removed_one_leaves_no_task() {
    let (east, west) = (member(&["e1", "e2"]).await, member(&["w1"]).await);
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    run_fleet(&mut tasks, &fleet, source, &cancel);
    tasks.spawn(cache_every_member(fleet.clone(), cancel.clone()));

    clusters.engage("west", west.client().unwrap());
    until("west cached", || cached(&fleet, "west") == 1).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    clusters.engage("east", east.client().unwrap());
    until("east cached", || cached(&fleet, "east") == 2).await;
    assert!(
        metrics.num_alive_tasks() > before,
        "east runs tasks of its own"
    );
    let east_cluster = fleet.cluster("east").unwrap();
    let informer = east_cluster.factory().informer::<ConfigMap>();

    clusters.remove("east");
    until("east disengaged", || fleet.cluster("east").is_none()).await;
    assert!(east_cluster.disengaged().is_cancelled());
    drop((east_cluster, informer));
    // Its informers, reflectors and connections end: the runtime is back to west's tasks.
    until("east's tasks ended", || metrics.num_alive_tasks() <= before).await;
    assert_eq!(cached(&fleet, "west"), 1, "west untouched");

    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert!(
        fleet.clusters().is_empty(),
        "stopping disengages every member"
    );
}

/// Killed rather than cancelled, the fleet's `run` still lets its members go: they are
/// disengaged and their tasks end, though clones of the fleet live on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_run_disengages_its_members() {
    let east = member(&["e1"]).await;
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    let cancel = CancellationToken::new();
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let running = tokio::spawn({
        let fleet = fleet.clone();
        async move { fleet.run(source, CancellationToken::new()).await }
    });
    let caching = tokio::spawn(cache_every_member(fleet.clone(), cancel.clone()));
    clusters.engage("east", east.client().unwrap());
    until("east cached", || cached(&fleet, "east") == 1).await;
    let east_cluster = fleet.cluster("east").unwrap();

    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert!(fleet.clusters().is_empty(), "east disengaged");
    assert!(east_cluster.disengaged().is_cancelled());
    cancel.cancel();
    caching.await.unwrap();
    drop(east_cluster);
    until("east's tasks ended", || metrics.num_alive_tasks() <= before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_folder_rotates_tokens_in_place_and_isolates_a_broken_file() {
    let (east, west) = (member(&["e1"]).await, member(&["w1", "w2"]).await);
    let dir = std::env::temp_dir().join(format!("fleet-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("east.yaml"), kubeconfig(&east, "t1")).unwrap();
    std::fs::write(dir.join("west.yaml"), kubeconfig(&west, "t1")).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a cluster").unwrap();

    let fleet = Fleet::new(FactoryOptions::default());
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let source = sources::kubeconfig_dir(&dir, Duration::from_millis(20));
    run_fleet(&mut tasks, &fleet, source, &cancel);
    tasks.spawn(cache_every_member(fleet.clone(), cancel.clone()));
    until("both cached", || {
        cached(&fleet, "east") == 1 && cached(&fleet, "west") == 2
    })
    .await;
    assert_eq!(fleet.clusters().len(), 2, "notes.txt is not a cluster");
    let mut applied = fleet.applied();

    // West's token rotates: same client, same informers, no new LIST or watch.
    let generation = fleet.cluster("west").unwrap().generation();
    let requests = lists_and_watches(&west);
    let seen = *applied.borrow_and_update();
    std::fs::write(dir.join("west.yaml"), kubeconfig(&west, "t2")).unwrap();
    applied.wait_for(|n| *n > seen).await.unwrap();
    assert_eq!(fleet.cluster("west").unwrap().generation(), generation);
    assert_eq!(lists_and_watches(&west), requests, "a rotation relisted");
    assert!(fleet.errors().is_empty());

    // East's file turns to garbage: an error of east only; east keeps working, west too.
    let seen = *applied.borrow_and_update();
    std::fs::write(dir.join("east.yaml"), "clusters: [garbage").unwrap();
    applied.wait_for(|n| *n > seen).await.unwrap();
    let errors = fleet.errors();
    assert_eq!(errors.keys().collect::<Vec<_>>(), ["east"]);
    assert!(
        errors["east"].contains("not a usable kubeconfig"),
        "{errors:?}"
    );
    assert!(
        fleet.cluster("east").is_some(),
        "east keeps its working credentials"
    );
    assert_eq!(cached(&fleet, "west"), 2);

    // A new server for east: a new engagement (and its error cleared).
    let moved = member(&["m1", "m2", "m3"]).await;
    std::fs::write(dir.join("east.yaml"), kubeconfig(&moved, "t1")).unwrap();
    until("east moved", || cached(&fleet, "east") == 3).await;
    assert!(fleet.errors().is_empty());

    // Its file removed: disengaged.
    std::fs::remove_file(dir.join("east.yaml")).unwrap();
    until("east disengaged", || fleet.cluster("east").is_none()).await;

    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_secrets_in_the_hub_engage_and_disengage_members() {
    let hub = FakeApiServer::start(ServerConfig::default().namespaces(["fleet-system"]))
        .await
        .unwrap();
    let a = member(&["a1"]).await;
    let hub_factory = kube_informer::factory::SharedInformerFactory::new(
        hub.client().unwrap(),
        FactoryOptions::default(),
    );
    let source = sources::kubeconfig_secrets(&hub_factory, "fleet-system");
    hub_factory.start();
    let fleet = Fleet::new(FactoryOptions::default());
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    run_fleet(&mut tasks, &fleet, source, &cancel);
    tasks.spawn(cache_every_member(fleet.clone(), cancel.clone()));

    let secrets = Gvr::core("secrets");
    let encoded = base64::engine::general_purpose::STANDARD.encode(kubeconfig(&a, "t1"));
    hub.create(&secrets, Some("fleet-system"), json!({
        "metadata": {"name": "member-a", "labels": {"sigs.k8s.io/multicluster-runtime-kubeconfig": "true", "env": "prod"}},
        "data": {"kubeconfig": encoded},
    }))
    .unwrap();
    // A Secret that does not opt in is not a cluster, not even Cluster API's.
    for (name, labels) in [
        ("other", json!({})),
        (
            "capi-kubeconfig",
            json!({"cluster.x-k8s.io/cluster-name": "capi"}),
        ),
    ] {
        let secret = json!({"metadata": {"name": name, "labels": labels}, "data": {"value": encoded, "kubeconfig": encoded}});
        hub.create(&secrets, Some("fleet-system"), secret).unwrap();
    }
    until("member-a cached", || cached(&fleet, "member-a") == 1).await;
    assert_eq!(fleet.clusters().len(), 1);
    let labels = fleet.cluster("member-a").unwrap().labels().clone();
    assert_eq!(labels.get("env").map(String::as_str), Some("prod"));

    hub.delete(&secrets, Some("fleet-system"), "member-a")
        .unwrap();
    until("member-a disengaged", || {
        fleet.cluster("member-a").is_none()
    })
    .await;

    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    hub_factory.shutdown().await;
}

/// Under a manager: each member's health in `/metrics`; one member unreachable keeps the
/// operator ready, every member unreachable does not; a kubeconfig that never worked is
/// listed with its error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managers_fleet_reports_each_member_and_stays_ready_while_one_is_down() {
    use kube_informer_runtime::{Manager, ManagerOptions};
    let hub = member(&[]).await;
    let up = member(&["u1"]).await;
    let mut manager = Manager::new(hub.client().unwrap(), ManagerOptions::for_tests())
        .await
        .unwrap();
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    manager.add_fleet(&fleet, source);
    let mut endpoints = manager.endpoints();
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let (stop, force) = (CancellationToken::new(), CancellationToken::new());
    tasks.spawn({
        let stop = stop.clone();
        async move { manager.run_until(stop, force).await.unwrap() }
    });
    tasks.spawn(cache_every_member(fleet.clone(), cancel.clone()));
    let addr = endpoints.wait_for(Option::is_some).await.unwrap().unwrap();

    let dead = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    clusters.engage("down", kube::Client::try_from(dead).unwrap());
    clusters.engage_kubeconfig("broken", "clusters: [garbage");
    until("down engaged", || fleet.cluster("down").is_some()).await;
    until("broken reported", || fleet.errors().contains_key("broken")).await;
    // Only an unreachable member: not ready.
    let (code, body) = get(addr, "/readyz?verbose").await;
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("no member cluster is ready: down"), "{body}");

    clusters.engage("up", up.client().unwrap());
    until("up cached", || cached(&fleet, "up") == 1).await;
    let mut ready = get(addr, "/readyz").await.0;
    while ready != 200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        ready = get(addr, "/readyz").await.0;
    }
    // Each member has its line; the unreachable one's failure does not fail the replica.
    let (code, body) = get(addr, "/readyz?verbose").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[+]fleet cluster up ok"), "{body}");
    assert!(
        body.contains("[-]fleet cluster down failed: not synced"),
        "{body}"
    );
    assert!(
        body.contains("[-]fleet cluster broken failed: its kubeconfig cannot be used"),
        "{body}"
    );
    let (_, metrics) = get(addr, "/metrics").await;
    for line in [
        r#"fleet_cluster_engaged{cluster="up"} 1"#,
        r#"fleet_cluster_ready{cluster="up"} 1"#,
        r#"fleet_cluster_engaged{cluster="down"} 1"#,
        r#"fleet_cluster_ready{cluster="down"} 0"#,
        r#"fleet_cluster_engaged{cluster="broken"} 0"#,
        r#"fleet_cluster_kubeconfig_error{cluster="broken"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    let health = fleet.health();
    let names: Vec<&str> = health.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["broken", "down", "up"]);

    cancel.cancel();
    stop.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

#[allow(dead_code)]
#[path = "../examples/fleet.rs"]
mod fleet_example;

/// The fleet example's verdict fails when a member misses the hub's template or holds an
/// old one, and holds once every member has it.
#[tokio::test]
async fn the_fleet_examples_verdict_fails_when_a_member_misses_the_template() {
    let mut members = Vec::new();
    let mut servers = Vec::new();
    for name in ["east", "west"] {
        let server = FakeApiServer::start(ServerConfig::default().namespaces(["fleet-example"]))
            .await
            .unwrap();
        members.push((name.to_owned(), server.memory_client()));
        servers.push(server);
    }
    let red = Some([("color".to_owned(), "red".to_owned())].into());
    let settings =
        |color: &str| json!({"metadata": {"name": "settings"}, "data": {"color": color}});
    let cms = Gvr::core("configmaps");
    servers[0]
        .create(&cms, Some("fleet-example"), settings("red"))
        .unwrap();
    let missing = fleet_example::check(&members, &red).await.unwrap_err();
    assert!(
        missing.contains("west: no fleet-example/settings"),
        "{missing}"
    );
    servers[1]
        .create(&cms, Some("fleet-example"), settings("blue"))
        .unwrap();
    let stale = fleet_example::check(&members, &red).await.unwrap_err();
    assert!(stale.starts_with("west: settings"), "{stale}");
    servers[1]
        .update(&cms, Some("fleet-example"), settings("red"))
        .unwrap();
    let lines = fleet_example::check(&members, &red).await.unwrap();
    assert_eq!(lines.len(), 2);
}
