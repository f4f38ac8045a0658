//! A fleet under leader election, as it is deployed: two replicas (two managers electing on
//! the hub), each with its fleet of the same two members engaged from kubeconfigs, a
//! fleet controller added to each. Both replicas answer `/readyz` 200 (the standby's
//! member caches are warm: a rolling update can proceed). The leader is killed (its task
//! dropped, its Lease left to expire): the standby takes over and its first reconcile of
//! each member is served from the caches it kept — no LIST of either member after the
//! kill (each member's request log, the audit log on real servers). The failover time is
//! printed, not asserted.

use std::{sync::Arc, time::Duration};

use e2e::{Backend, eventually};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt, api::PostParams};
use kube_informer::{
    Selectors,
    factory::{FactoryOptions, InformerSpec},
};
use kube_informer_runtime::{
    CancellationToken, Manager, ManagerOptions,
    controller::{Action, Cached, ControllerOptions},
    fleet::{Cluster, Fleet, FleetController, sources},
    leader_election::LeaderElectionConfig,
};
use parking_lot::Mutex;
use serde_json::json;

const NS: &str = "apps";

/// Which replica reconciled which `cluster/name`, in order.
type Ledger = Arc<Mutex<Vec<(&'static str, String)>>>;

async fn reconcile(
    cm: Cached<ConfigMap>,
    ctx: Arc<(&'static str, String, Ledger)>,
) -> Result<Action, kube::Error> {
    if let Cached::Present(cm) = cm {
        let entry = format!("{}/{}", ctx.1, cm.name_any());
        ctx.2.lock().push((ctx.0, entry));
    }
    Ok(Action::Done)
}

/// A replica: a manager electing on the hub, its fleet of `a` and `b`, the controller.
async fn replica(
    hub: &Backend,
    members: [&Backend; 2],
    name: &'static str,
    ledger: &Ledger,
) -> (Manager, sources::ClusterSender) {
    let lease = LeaderElectionConfig::new("fleet-standby")
        .namespace("fleet-system")
        .identity(name)
        .lease_duration(Duration::from_secs(6))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500));
    let options = ManagerOptions::for_tests().leader_election(lease);
    let mut manager = Manager::new(hub.informer_client(), options).await.unwrap();
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    for (member, backend) in ["a", "b"].into_iter().zip(members) {
        clusters.engage_kubeconfig(member, backend.kubeconfig());
    }
    manager.add_fleet(&fleet, source);
    let in_apps = || InformerSpec::new().selectors(Selectors::default().in_namespace(NS));
    let options = ControllerOptions::default().name("fleet-standby");
    let controller = FleetController::<ConfigMap>::new_with(&fleet, in_apps, options);
    let ledger = ledger.clone();
    let make_ctx =
        move |cluster: &Cluster| Arc::new((name, cluster.name().to_owned(), ledger.clone()));
    manager.add_fleet_controller(controller, make_ctx, reconcile, |_, _, _| Action::Retry);
    (manager, clusters)
}

/// The syncs (LISTs, streaming lists) of ConfigMaps `member` has served.
fn syncs(member: &Backend) -> usize {
    let requests = member.requests();
    let configmaps = requests
        .iter()
        .filter(|r| r.resource.as_deref() == Some("configmaps"));
    configmaps.filter(|r| r.is_sync()).count()
}

async fn create(member: &Backend, name: &str) {
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<ConfigMap>::namespaced(member.client(), NS)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

async fn standby_is_warm_and_takes_over_without_a_relist(hub: Backend, a: Backend, b: Backend) {
    e2e::ensure_namespace(&hub.client(), "fleet-system").await;
    for member in [&a, &b] {
        e2e::ensure_namespace(&member.client(), NS).await;
        create(member, "first").await;
    }
    let ledger: Ledger = Arc::default();
    let mut running = Vec::new();
    let mut endpoints = Vec::new();
    let mut senders = Vec::new();
    for name in ["replica-0", "replica-1"] {
        let (manager, clusters) = replica(&hub, [&a, &b], name, &ledger).await;
        let mut endpoint = manager.endpoints();
        let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
        running.push((
            name,
            tokio::spawn(async move { manager.run_until(graceful, force).await }),
        ));
        endpoints.push(endpoint.wait_for(Option::is_some).await.unwrap().unwrap());
        senders.push(clusters);
    }
    eventually("the leader reconciled both members", || {
        let ledger = ledger.lock();
        ["a/first", "b/first"]
            .iter()
            .all(|key| ledger.iter().any(|(_, seen)| seen == key))
    })
    .await;
    let leader = ledger.lock()[0].0;
    // Both ready: the standby's members are synced too. A replica is ready as soon as one
    // member it reads is (a member nothing reads from yet is idle, not down), so each
    // member's own line is waited for, not only the 200.
    let members_ok = |text: &str| {
        ["a", "b"]
            .iter()
            .all(|c| text.contains(&format!("[+]fleet cluster {c} ok")))
    };
    for addr in &endpoints {
        let mut answer = (0, String::new());
        for _ in 0..600 {
            answer = e2e::probe(*addr, "/readyz?verbose").await;
            if answer.0 == 200 && members_ok(&answer.1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(answer.0, 200, "a replica is not ready: {}", answer.1);
        assert!(members_ok(&answer.1), "{}", answer.1);
    }
    let before = [syncs(&a), syncs(&b)];
    assert!(
        before.iter().all(|n| *n >= 2),
        "each replica listed each member: {before:?}"
    );

    // Kill the leader: its task dropped, its Lease left to expire.
    let at = running
        .iter()
        .position(|(name, _)| *name == leader)
        .unwrap();
    let (_, killed) = running.remove(at);
    killed.abort();
    assert!(killed.await.unwrap_err().is_cancelled());
    let killed_at = std::time::Instant::now();
    let standby = if leader == "replica-0" {
        "replica-1"
    } else {
        "replica-0"
    };
    for member in [&a, &b] {
        create(member, "second").await;
    }
    eventually("the new leader reconciled each member's change", || {
        let ledger = ledger.lock();
        ["a/second", "b/second"].iter().all(|key| {
            ledger
                .iter()
                .any(|(by, seen)| *by == standby && seen == key)
        })
    })
    .await;
    eprintln!(
        "{}: failover to the first reconcile of both members in {:?} (Lease 6 s)",
        hub.name(),
        killed_at.elapsed()
    );
    assert_eq!(
        [syncs(&a), syncs(&b)],
        before,
        "the new leader listed a member again"
    );

    for (_, replica) in running {
        replica.abort();
        let _ = replica.await;
    }
    drop(senders);
}

e2e::three!(standby_is_warm_and_takes_over_without_a_relist);
