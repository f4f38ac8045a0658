//! `informer-bench operator`: an operator's memory on a cluster of N pods owned by
//! ReplicaSets (100 each), side by side with the peers' informers of the same pods, on one
//! fake-apiserver in this process. Unlike the replay server, fake-apiserver serves every
//! kind and a streaming list, so the factory's own first-sync path (a streaming list) runs
//! here beside a paged LIST.

use std::collections::{BTreeMap, HashMap};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::{
    clients::{Impl, Outcome, PODS_PER_OWNER},
    orchestrate::{self, Scenario},
    traffic,
};

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Pods in the cluster.
    pub(crate) pods: usize,
    /// Runs per client, interleaved (the table shows medians).
    pub(crate) runs: usize,
    /// The clients compared.
    pub(crate) clients: Vec<Impl>,
}

impl Plan {
    /// The clients compared by default.
    pub(crate) const CLIENTS: [Impl; 7] = [
        Impl::ClientNode,
        Impl::KubeRs,
        Impl::TypedDefaults,
        Impl::TypedDefaultsPaged,
        Impl::CompactProtobuf,
        Impl::Controller,
        Impl::ControllerCompact,
    ];
}

/// Runs the plan and prints the table.
pub(crate) fn run(plan: &Plan) -> Result<(), String> {
    orchestrate::on_one_thread(run_plan(plan))
}

async fn run_plan(plan: &Plan) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let clients = orchestrate::runnable(&plan.clients);
    eprintln!(
        "seeding {} pods owned by {} ReplicaSets...",
        plan.pods,
        plan.pods.div_ceil(PODS_PER_OWNER)
    );
    let server = seeded(plan.pods).await?;
    let scenario = Scenario {
        n: plan.pods,
        m: 0,
        k: 1,
    };
    // Not measured: fake-apiserver encodes each object as protobuf the first time a client
    // asks and keeps it, which would otherwise land on the first protobuf client's first run.
    eprintln!("warming the server's protobuf encodings (one unmeasured sync)...");
    orchestrate::run_client(
        &exe,
        Impl::TypedDefaultsPaged,
        server.url(),
        &scenario,
        0,
        traffic::Objects::Pods,
    )
    .await?;
    let mut outcomes: BTreeMap<String, Vec<Outcome>> = BTreeMap::new();
    for run in 0..plan.runs {
        for client in &clients {
            let server_cpu = crate::measure::cpu_time();
            let outcome = orchestrate::run_client(
                &exe,
                *client,
                server.url(),
                &scenario,
                0,
                traffic::Objects::Pods,
            )
            .await?;
            let server_cpu = crate::measure::cpu_time().saturating_sub(server_cpu);
            eprintln!(
                "  run {} {client:>18}: synced {:.2} s, peak {} MiB, cpu {:.1} s, server cpu {:.1} s",
                run + 1,
                outcome.sync.as_secs_f64(),
                outcome.peak_rss_kib / 1024,
                outcome.cpu.as_secs_f64(),
                server_cpu.as_secs_f64(),
            );
            outcomes
                .entry(client.to_string())
                .or_default()
                .push(outcome);
        }
    }
    let medians: Vec<(Impl, Outcome)> = clients
        .iter()
        .map(|c| (*c, orchestrate::median(&outcomes[&c.to_string()])))
        .collect();
    println!("{}", table(plan.pods, &medians));
    server.shutdown().await;
    Ok(())
}

/// The markdown table, memory as a ratio to client-node's informer.
fn table(pods: usize, rows: &[(Impl, Outcome)]) -> String {
    let node = rows
        .iter()
        .find(|(c, _)| *c == Impl::ClientNode)
        .map(|(_, o)| o.peak_rss_kib);
    let mut out = format!(
        "| {pods} pods, {} ReplicaSets | first sync s | peak RSS MiB | KiB/pod | ÷ client-node | CPU s |\n|---|---:|---:|---:|---:|---:|\n",
        pods.div_ceil(PODS_PER_OWNER)
    );
    for (client, o) in rows {
        let ratio = node.map_or("—".into(), |n| {
            format!("{:.2}", o.peak_rss_kib as f64 / n as f64)
        });
        out.push_str(&format!(
            "| {client} | {:.2} | {:.0} | {:.1} | {ratio} | {:.1} |\n",
            o.sync.as_secs_f64(),
            o.peak_rss_kib as f64 / 1024.0,
            o.peak_rss_kib as f64 / pods as f64,
            o.cpu.as_secs_f64(),
        ));
    }
    out
}

/// A fresh server holding `pods` pods (as `informer-bench`'s traffic renders them, with a
/// controller's and a kubelet's managedFields), each owned by one of its namespace's
/// ReplicaSets.
async fn seeded(pods: usize) -> Result<FakeApiServer, String> {
    let owners = pods.div_ceil(PODS_PER_OWNER);
    let server = FakeApiServer::start(ServerConfig::default())
        .await
        .map_err(|e| e.to_string())?;
    // The last one owns what is left when `pods` is not a multiple of 100.
    let replicas = |owner: usize| PODS_PER_OWNER.min(pods - owner * PODS_PER_OWNER);
    let replica_sets = (0..owners).map(|owner| replica_set(owner, replicas(owner)));
    server
        .seed(&Gvr::new("apps", "v1", "replicasets"), replica_sets)
        .map_err(|e| e.to_string())?;
    // The server gave each its uid, which its pods' owner references name.
    let listed = kube::Api::<ReplicaSet>::all(server.memory_client())
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?;
    let uids: HashMap<String, String> = listed
        .into_iter()
        .map(|rs| (rs.name_any(), rs.uid().unwrap_or_default()))
        .collect();
    let pods = (0..pods).map(|i| {
        let mut pod: Value =
            serde_json::from_slice(&traffic::pod_bytes(i, 1, 0)).expect("rendered as JSON");
        let owner = i / PODS_PER_OWNER;
        let meta = &mut pod["metadata"];
        for field in ["uid", "resourceVersion", "creationTimestamp"] {
            meta.as_object_mut().expect("an object").remove(field); // the server's to set
        }
        meta["namespace"] = namespace(owner).into();
        meta["ownerReferences"][0]["name"] = owner_name(owner).into();
        meta["ownerReferences"][0]["uid"] = uids[&owner_name(owner)].clone().into();
        pod
    });
    server
        .seed(&Gvr::core("pods"), pods)
        .map_err(|e| e.to_string())?;
    Ok(server)
}

fn namespace(owner: usize) -> String {
    format!("team-{}", owner % 50)
}

fn owner_name(owner: usize) -> String {
    format!("web-{owner:05}-7d9c5b8f6")
}

/// ReplicaSet `owner` as a Deployment makes it, wanting `replicas` pods.
fn replica_set(owner: usize, replicas: usize) -> Value {
    let labels = json!({"app": "web", "pod-template-hash": "7d9c5b8f6"});
    let mut template = fake_apiserver::fixtures::realistic_pod(owner);
    template["metadata"] = json!({"labels": labels});
    template
        .as_object_mut()
        .expect("an object")
        .remove("status");
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": owner_name(owner),
            "namespace": namespace(owner),
            "labels": labels,
            "annotations": {"deployment.kubernetes.io/revision": "3"},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": template,
        },
        "status": {"replicas": replicas, "readyReplicas": replicas},
    })
}
