//! The sharding demo's run, on whatever cluster its client reaches (the embedded
//! fake-apiserver, or a real one): three replicas of one sharded manager split the
//! ConfigMaps of one namespace, replica-c is killed and the others take its objects once
//! its Lease expires, replica-d joins and takes its share through the drain handover, and
//! objects change all along. The verdict: every object is with a live replica, the caches
//! are disjoint and complete, and no object was ever reconciled by two replicas at once.
//! (`crates/e2e/tests/sharding_demo_real.rs` runs it on kube-apiserver.)

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use kube_informer::{
    Selectors,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
};
use kube_informer_runtime::{
    Action, Cached, CancellationToken, ControllerOptions, LeaderElectionConfig, Manager,
    ManagerOptions,
    rbac::{Rbac, Verb},
    sharding::{shard_label, shard_selectors},
};
use parking_lot::Mutex;
use serde_json::json;

/// ConfigMaps in the demo's namespace.
pub(crate) const OBJECTS: usize = 300;

/// Which replica runs a reconcile of each object now, what overlapped, and counts.
#[derive(Default)]
struct Ledger {
    running: HashMap<String, &'static str>,
    overlaps: Vec<String>,
    reconciles: BTreeMap<&'static str, usize>,
}

struct Running {
    ledger: Arc<Mutex<Ledger>>,
    key: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.ledger.lock().running.remove(&self.key);
    }
}

/// A replica: its manager's task (aborted to kill it) and its informers.
struct Replica {
    name: &'static str,
    factory: SharedInformerFactory,
    task: tokio::task::JoinHandle<()>,
    graceful: CancellationToken,
}

/// Replica `name`'s manager, not started: one sharded controller of ConfigMaps.
async fn manager(
    client: &kube::Client,
    namespace: &str,
    ledger: &Arc<Mutex<Ledger>>,
    name: &'static str,
) -> Manager {
    // Short Leases so that the demo shows a takeover in seconds (defaults: 15 s / 10 s / 2 s),
    // with 3 s between a cut-off replica's renew deadline and its Lease's expiry for its
    // step-down to land in, on a busy machine too.
    let lease = LeaderElectionConfig::new("unused")
        .namespace(namespace)
        .lease_duration(Duration::from_secs(6))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_secs(1));
    let options = ManagerOptions::default()
        .no_endpoints()
        .factory(FactoryOptions::default().selectors(Selectors::default().in_namespace(namespace)))
        .leader_election(lease)
        .sharded("configs", name)
        .sharding_period(Duration::from_millis(500));
    let mut manager = Manager::new(client.clone(), options)
        .await
        .expect("a manager");
    let controller = manager.controller::<ConfigMap>(ControllerOptions::default().name("configs"));
    let ledger = ledger.clone();
    // An ordinary reconcile: nothing in it knows about sharding.
    let reconcile = move |cached: Cached<ConfigMap>, _ctx: Arc<()>| {
        let ledger = ledger.clone();
        async move {
            let Cached::Present(cm) = cached else {
                return Ok::<_, kube::Error>(Action::Done);
            };
            let key = cm.metadata.name.clone().unwrap_or_default();
            {
                let mut ledger = ledger.lock();
                if let Some(other) = ledger.running.insert(key.clone(), name) {
                    ledger.overlaps.push(format!("{key}: {other} and {name}"));
                }
                *ledger.reconciles.entry(name).or_default() += 1;
            }
            // Out of the ledger when the reconcile ends, or is dropped with a killed replica.
            let _running = Running { ledger, key };
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(Action::Done)
        }
    };
    manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(()));
    manager
}

async fn start(
    client: &kube::Client,
    namespace: &str,
    ledger: &Arc<Mutex<Ledger>>,
    name: &'static str,
) -> Replica {
    let manager = self::manager(client, namespace, ledger, name).await;
    let factory = manager.factory().clone();
    let graceful = CancellationToken::new();
    let task = tokio::spawn({
        let graceful = graceful.clone();
        async move {
            if let Err(error) = manager.run_until(graceful, CancellationToken::new()).await {
                eprintln!("{name}: {error}");
            }
        }
    });
    Replica {
        name,
        factory,
        task,
        graceful,
    }
}

fn cached(replica: &Replica) -> BTreeSet<String> {
    let informer = replica.factory.informer_with::<ConfigMap>(
        InformerSpec::new().selectors(shard_selectors("configs", replica.name)),
    );
    informer
        .store()
        .list_keys()
        .into_iter()
        .map(|k| k.to_string())
        .collect()
}

/// The shard label of every object.
async fn placement(api: &Api<ConfigMap>) -> BTreeMap<String, String> {
    let label = shard_label("configs");
    let listed = api
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    listed
        .into_iter()
        .map(|cm| {
            let shard = cm.metadata.labels.and_then(|mut l| l.remove(&label));
            (
                cm.metadata.name.unwrap_or_default(),
                shard.unwrap_or_else(|| "-".into()),
            )
        })
        .collect()
}

async fn report(second: u64, api: &Api<ConfigMap>, replicas: &[&Replica], ledger: &Mutex<Ledger>) {
    let placement = placement(api).await;
    let mut line = format!("[{second:2}s]");
    for replica in replicas {
        let labelled = placement.values().filter(|s| *s == replica.name).count();
        let reconciles = ledger
            .lock()
            .reconciles
            .get(replica.name)
            .copied()
            .unwrap_or(0);
        line += &format!(
            "  {}: {labelled:3} objects, {:3} cached, {reconciles:4} reconciles",
            replica.name,
            cached(replica).len()
        );
    }
    let unplaced = placement.values().filter(|s| *s == "-").count();
    println!("{line}  (unplaced: {unplaced})");
}

/// Reports once a second for `seconds`, counting on from `from`.
async fn phase(
    from: u64,
    seconds: u64,
    api: &Api<ConfigMap>,
    replicas: &[&Replica],
    ledger: &Mutex<Ledger>,
) -> u64 {
    for second in from + 1..=from + seconds {
        tokio::time::sleep(Duration::from_secs(1)).await;
        report(second, api, replicas, ledger).await;
    }
    from + seconds
}

/// What is wrong with where the objects are: each must be labelled for a live replica, and
/// the replicas' caches must hold every object exactly once.
async fn placement_problems(
    api: &Api<ConfigMap>,
    live: &BTreeSet<&str>,
    replicas: &[&Replica],
) -> Vec<String> {
    let placement = placement(api).await;
    let mut problems = Vec::new();
    if let Some((key, shard)) = placement.iter().find(|(_, s)| !live.contains(s.as_str())) {
        problems.push(format!("{key} is with {shard}, not a live replica"));
    }
    let caches: Vec<BTreeSet<String>> = replicas.iter().map(|r| cached(r)).collect();
    let union: BTreeSet<&String> = caches.iter().flatten().collect();
    if union.len() != OBJECTS || caches.iter().map(BTreeSet::len).sum::<usize>() != OBJECTS {
        problems.push("the caches are not disjoint and complete".into());
    }
    problems
}

/// Runs the demo in `namespace` (it must exist and be empty of ConfigMaps), printing a line
/// a second; `Err` with what went wrong if the verdict is not clean.
/// The RBAC a run needs in `namespace`: one replica's (its caches, its shard Lease, the
/// sharder's Leases and labels) and the demo's own changes to the ConfigMaps. Nothing is
/// sent to a server.
pub(crate) async fn rbac(namespace: &str) -> Result<Rbac, String> {
    let config = kube::Config::new("https://127.0.0.1:6443".parse().expect("a URL"));
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut rbac = manager(&client, namespace, &ledger, "replica").await.rbac();
    let namespaces = [namespace.to_owned()];
    rbac.allow("", "configmaps", &namespaces, &[Verb::Create, Verb::Patch]);
    Ok(rbac)
}

pub(crate) async fn run(client: &kube::Client, namespace: &str) -> Result<(), String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    for i in 0..OBJECTS {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:03}")}}))
                .expect("a ConfigMap");
        api.create(&PostParams::default(), &cm)
            .await
            .map_err(|e| format!("cannot create ConfigMap cm-{i:03}: {e}"))?;
    }
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    println!("{OBJECTS} ConfigMaps; three replicas of one sharded manager (ring \"configs\")");
    let a = start(client, namespace, &ledger, "replica-a").await;
    let b = start(client, namespace, &ledger, "replica-b").await;
    let c = start(client, namespace, &ledger, "replica-c").await;

    // Churn: objects change all along, so reconciles run while objects move.
    let stop_churn = CancellationToken::new();
    let churn = tokio::spawn({
        let (api, stop) = (api.clone(), stop_churn.clone());
        async move {
            let mut n = 0u64;
            while !stop.is_cancelled() {
                n += 1;
                let name = format!("cm-{:03}", (n * 7919) % OBJECTS as u64);
                let patch = json!({"data": {"n": n.to_string()}});
                let _ = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });

    let mut second = phase(0, 4, &api, &[&a, &b, &c], &ledger).await;
    println!("killing replica-c (no goodbye: its Lease is left to expire)");
    c.task.abort();
    let _ = c.task.await;
    second = phase(second, 7, &api, &[&a, &b], &ledger).await;
    println!("replica-d joins");
    let d = start(client, namespace, &ledger, "replica-d").await;
    phase(second, 5, &api, &[&a, &b, &d], &ledger).await;
    stop_churn.cancel();
    let _ = churn.await;

    // The verdict. Placement and caches are read once they have settled (a move still in
    // its drain, or a cache a moment behind, is not a fault): at most a minute, then what
    // is still wrong is reported.
    let live: BTreeSet<&str> = ["replica-a", "replica-b", "replica-d"].into();
    let settle_by = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut problems = loop {
        let problems = placement_problems(&api, &live, &[&a, &b, &d]).await;
        if problems.is_empty() || tokio::time::Instant::now() >= settle_by {
            break problems;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let overlaps = ledger.lock().overlaps.clone();
    if !overlaps.is_empty() {
        problems.push(format!("reconciled by two replicas at once: {overlaps:?}"));
    }
    for replica in [a, b, d] {
        replica.graceful.cancel();
        let _ = replica.task.await;
    }
    if problems.is_empty() {
        println!(
            "verdict: every object is with a live replica, the caches are disjoint and complete, and no object was ever reconciled by two replicas at once"
        );
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
