//! A fleet of three servers of one kind — fake-apiservers, then real kube-apiservers: a hub
//! whose template is copied into two members by one fleet controller.
//!
//! - Both members converge to the hub's template; a member added while running is
//!   reconciled; a member removed while a reconcile of it hangs has that reconcile
//!   cancelled and leaves no task behind (the runtime's alive tasks, counted).
//! - Member `a` partitioned for 60 s (its proxy cut) while member `b` churns and the
//!   template changes: every change of `b` is reconciled while `a` is still cut off (the
//!   latency percentiles with and without the partition are printed for the record), and
//!   after healing, `a` converges exactly: its cache equals its server, and its copy follows
//!   the template.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use e2e::{Backend, assert_cache_matches, ensure_namespace, eventually, quick};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use kube_informer::{
    ObjectKey, ReadOnlyStore, Selectors,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, ControllerOptions},
    fleet::{
        Cluster, Fleet, FleetController,
        sources::{self, ClusterSender},
    },
};
use parking_lot::Mutex;
use serde_json::json;
use tokio::{task::JoinSet, time::Instant};

const HUB_NS: &str = "templates";
const NS: &str = "apps";
const PARTITION: Duration = Duration::from_secs(60);

/// When each member object was first reconciled, by `cluster/name`.
type Seen = Arc<Mutex<HashMap<String, Instant>>>;

struct Copier {
    cluster: String,
    client: kube::Client,
    templates: ReadOnlyStore<ConfigMap>,
    seen: Seen,
    cancelled: Arc<AtomicBool>,
}

/// Sets its flag when dropped before it finished: the reconcile was cancelled.
struct Cancelled(Arc<AtomicBool>, bool);

impl Drop for Cancelled {
    fn drop(&mut self) {
        if !self.1 {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

/// A single-cluster reconcile: `settings` is made to hold the hub template's data; `hang`
/// never finishes; anything else is only recorded.
async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Copier>) -> Result<Action, kube::Error> {
    let name = match &cm {
        Cached::Present(cm) => cm.name_any(),
        Cached::Gone(key) => key.name().to_owned(),
    };
    let entry = format!("{}/{name}", ctx.cluster);
    ctx.seen.lock().entry(entry).or_insert_with(Instant::now);
    if name == "hang" {
        let mut guard = Cancelled(ctx.cancelled.clone(), false);
        std::future::pending::<()>().await;
        guard.1 = true;
    }
    if name != "settings" {
        return Ok(Action::Done);
    }
    let Some(template) = ctx.templates.get_by_key(&format!("{HUB_NS}/settings")) else {
        return Ok(Action::Done);
    };
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), NS);
    let copy = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings"}, "data": template.data});
    let params = PatchParams::apply("fleet-copier").force();
    api.patch("settings", &params, &Patch::Apply(copy)).await?;
    Ok(Action::Done)
}

fn member_spec() -> InformerSpec<ConfigMap> {
    InformerSpec::new().selectors(Selectors::default().in_namespace(NS))
}

async fn color(backend: &Backend) -> Option<String> {
    let api: Api<ConfigMap> = Api::namespaced(backend.client(), NS);
    let cm = api.get_opt("settings").await.ok()??;
    cm.data?.get("color").cloned()
}

async fn until_color(what: &str, backend: &Backend, want: &str) {
    for _ in 0..1200 {
        if color(backend).await.as_deref() == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{}: never: {what}", backend.name());
}

async fn set_template(hub: &Backend, color: &str) {
    let api: Api<ConfigMap> = Api::namespaced(hub.client(), HUB_NS);
    let template = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings"}, "data": {"color": color}});
    let params = PatchParams::apply("test").force();
    api.patch("settings", &params, &Patch::Apply(template))
        .await
        .unwrap();
}

/// Creates `count` objects `<prefix>-<i>` in `backend`, one every 50 ms; when each was
/// written.
async fn churn(backend: &Backend, prefix: &str, count: usize) -> HashMap<String, Instant> {
    let api: Api<ConfigMap> = Api::namespaced(backend.client(), NS);
    let mut written = HashMap::new();
    for i in 0..count {
        let name = format!("{prefix}-{i}");
        let cm = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
        written.insert(name, Instant::now());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    written
}

/// The p50 and p99 of how long after its write each object was first reconciled in `b`.
fn percentiles(seen: &Seen, written: &HashMap<String, Instant>) -> (Duration, Duration) {
    let seen = seen.lock();
    let mut latencies: Vec<Duration> = written
        .iter()
        .map(|(name, at)| seen[&format!("b/{name}")].saturating_duration_since(*at))
        .collect();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

fn all_seen(seen: &Seen, written: &HashMap<String, Instant>) -> bool {
    let seen = seen.lock();
    written
        .keys()
        .all(|name| seen.contains_key(&format!("b/{name}")))
}

async fn a_hub_and_two_members(hub: Backend, a: Backend, b: Backend) {
    let server = hub.name();
    ensure_namespace(&hub.client(), HUB_NS).await;
    for member in [&a, &b] {
        ensure_namespace(&member.client(), NS).await;
    }
    set_template(&hub, "blue").await;
    let hub_factory = SharedInformerFactory::new(hub.client(), FactoryOptions::default());
    let templates = hub_factory.informer::<ConfigMap>();
    hub_factory.start();

    let fleet = Fleet::new(FactoryOptions::default().reflector(quick()));
    let (clusters, source) = sources::from_code();
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    tasks.spawn({
        let (fleet, cancel) = (fleet.clone(), cancel.clone());
        async move { fleet.run(source, cancel).await }
    });
    let options = ControllerOptions::default()
        .name("copier")
        .workers(4)
        .max_in_flight_per_group(Some(2))
        .reconcile_timeout(Some(Duration::from_secs(5)))
        .backoff(Duration::from_millis(100), Duration::from_secs(2));
    let controller = FleetController::<ConfigMap>::new_with(&fleet, member_spec, options)
        .watches_hub(&templates, |template: &ConfigMap| {
            vec![ObjectKey::new(Some(NS), &template.name_any())]
        });
    let (seen, cancelled): (Seen, _) = (Arc::default(), Arc::new(AtomicBool::new(false)));
    let make_ctx = {
        let (seen, cancelled, store) = (seen.clone(), cancelled.clone(), templates.store());
        move |cluster: &Cluster| {
            Arc::new(Copier {
                cluster: cluster.name().to_owned(),
                client: cluster.client().clone(),
                templates: store.clone(),
                seen: seen.clone(),
                cancelled: cancelled.clone(),
            })
        }
    };
    let stop = cancel.clone();
    tasks.spawn(controller.run(make_ctx, reconcile, |_, _, _| Action::Retry, stop));

    clusters.engage("a", a.informer_client());
    until_color("a has the template", &a, "blue").await;
    a_member_added_then_removed_mid_reconcile(&fleet, &clusters, &b, &seen, &cancelled).await;
    clusters.engage("b", b.informer_client());
    until_color("b engaged again", &b, "blue").await;

    let baseline = churn(&b, "before", 40).await;
    eventually("b's changes reconciled", || all_seen(&seen, &baseline)).await;
    let (p50, p99) = percentiles(&seen, &baseline);
    eprintln!("{server}: b's reconcile latency, a healthy: p50 {p50:?}, p99 {p99:?}");

    // `a` cut off for a minute; meanwhile the template changes, `a` is written to directly
    // (its cache must catch up after), and `b` churns.
    let cut = Instant::now();
    a.partition();
    set_template(&hub, "red").await;
    let a_api: Api<ConfigMap> = Api::namespaced(a.client(), NS);
    let mut fence = String::new();
    for i in 0..10 {
        let cm =
            serde_json::from_value(json!({"metadata": {"name": format!("direct-{i}")}})).unwrap();
        let created = a_api.create(&PostParams::default(), &cm).await.unwrap();
        fence = created.resource_version().unwrap_or_default();
    }
    until_color("b follows the template while a is cut off", &b, "red").await;
    let during = churn(&b, "during", 40).await;
    eventually("b's changes reconciled", || all_seen(&seen, &during)).await;
    assert!(
        cut.elapsed() < PARTITION,
        "{server}: b's churn outlasted the partition; the scenario proves nothing"
    );
    let (p50, p99) = percentiles(&seen, &during);
    eprintln!("{server}: b's reconcile latency, a partitioned: p50 {p50:?}, p99 {p99:?}");
    tokio::time::sleep(PARTITION.saturating_sub(cut.elapsed())).await;
    a.heal();

    until_color("a follows the template after healing", &a, "red").await;
    // The cache is compared once it has seen the last write to a: the copier's, made after
    // the healing and so after the direct ones (waiting for those alone compared a cache
    // that had not yet seen the copier's write).
    let copied = a_api.get("settings").await.unwrap();
    let copied: u64 = copied.resource_version().unwrap().parse().unwrap();
    let fence = copied.max(fence.parse().unwrap()).to_string();
    let store = fleet
        .cluster("a")
        .expect("a is engaged")
        .factory()
        .informer_with(member_spec())
        .store();
    assert_cache_matches(server, &store, &a_api, &fence).await;

    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    hub_factory.shutdown().await;
}

/// `b` engaged while running is reconciled; removed while its reconcile of `hang` hangs,
/// that reconcile is cancelled and every task `b` started ends.
async fn a_member_added_then_removed_mid_reconcile(
    fleet: &Fleet,
    clusters: &ClusterSender,
    b: &Backend,
    seen: &Seen,
    cancelled: &AtomicBool,
) {
    // The test's own client to b keeps a pooled connection (a task of this runtime): made
    // before counting, reused after.
    let api: Api<ConfigMap> = Api::namespaced(b.client(), NS);
    let hang = serde_json::from_value(json!({"metadata": {"name": "hang"}})).unwrap();
    api.create(&PostParams::default(), &hang).await.unwrap();
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    // A client of b's own: when b goes, nothing else holds its connections.
    clusters.engage("b", b.new_informer_client());
    until_color("b, added while running, has the template", b, "blue").await;
    eventually("b's hang reconcile started", || {
        seen.lock().contains_key("b/hang")
    })
    .await;
    assert!(!cancelled.load(Ordering::SeqCst));
    clusters.remove("b");
    eventually("b's reconcile cancelled", || {
        cancelled.load(Ordering::SeqCst)
    })
    .await;
    eventually("b disengaged", || fleet.cluster("b").is_none()).await;
    eventually("b's tasks ended", || metrics.num_alive_tasks() <= before).await;
    api.delete("hang", &Default::default()).await.unwrap();
}

e2e::three!(a_hub_and_two_members);
