//! A fleet controller isolates its members with no option set: a member whose reconciles
//! hang and a member whose server accepts connections and never answers leave every
//! other member's changes reconciled; a panic in one member's `make_ctx` leaves the others
//! running; a cluster filter follows only the members it accepts.

use crate::common;

use std::sync::Arc;

use common::{fleet_member as member, run_fleet, until};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube_informer::factory::FactoryOptions;
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, ControllerOptions},
    fleet::{Cluster, Fleet, FleetController, sources},
};
use parking_lot::Mutex;
use tokio::task::JoinSet;

type Seen = Arc<Mutex<Vec<String>>>;

/// Objects named `hang*` never finish their reconcile.
async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<(String, Seen)>) -> Result<Action, kube::Error> {
    if let Cached::Present(cm) = cm {
        ctx.1.lock().push(format!("{}/{}", ctx.0, cm.name_any()));
        if cm.name_any().starts_with("hang") {
            std::future::pending::<()>().await;
        }
    }
    Ok(Action::Done)
}

struct Running {
    fleet: Fleet,
    clusters: sources::ClusterSender,
    seen: Seen,
    cancel: CancellationToken,
    tasks: JoinSet<()>,
}

impl Running {
    fn start(
        controller: impl FnOnce(&Fleet) -> FleetController<ConfigMap>,
        make_ctx: impl Fn(&Cluster, &Seen) -> Arc<(String, Seen)> + Send + Sync + 'static,
    ) -> Self {
        let fleet = Fleet::new(FactoryOptions::default());
        let (clusters, source) = sources::from_code();
        let (seen, cancel, mut tasks) = (Seen::default(), CancellationToken::new(), JoinSet::new());
        run_fleet(&mut tasks, &fleet, source, &cancel);
        let seen_by = seen.clone();
        let make_ctx = move |cluster: &Cluster| make_ctx(cluster, &seen_by);
        let run =
            controller(&fleet).run(make_ctx, reconcile, |_, _, _| Action::Retry, cancel.clone());
        tasks.spawn(run);
        Self {
            fleet,
            clusters,
            seen,
            cancel,
            tasks,
        }
    }

    fn saw(&self, entry: &str) -> bool {
        self.seen.lock().iter().any(|s| s == entry)
    }

    fn count(&self, prefix: &str) -> usize {
        self.seen
            .lock()
            .iter()
            .filter(|s| s.starts_with(prefix))
            .count()
    }

    async fn stop(mut self) {
        self.cancel.cancel();
        while let Some(done) = self.tasks.join_next().await {
            done.unwrap();
        }
    }
}

fn named(cluster: &Cluster, seen: &Seen) -> Arc<(String, Seen)> {
    Arc::new((cluster.name().to_owned(), seen.clone()))
}

/// A member whose API server accepts connections and never answers a byte.
async fn silent_member(tasks: &mut JoinSet<()>) -> kube::Client {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tasks.spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_option_set_a_hung_member_and_a_silent_one_leave_the_others_reconciled() {
    let stuck = member(&["hang-1", "hang-2", "hang-3", "hang-4"]).await;
    let healthy = member(&["a", "b", "c", "d", "e"]).await;
    // The defaults only: two workers, nothing about groups or deadlines.
    let options = || ControllerOptions::default().name("fleet-defaults");
    let running = Running::start(|fleet| FleetController::new(fleet, options()), named);
    let mut servers = JoinSet::new();
    running
        .clusters
        .engage("silent", silent_member(&mut servers).await);
    running.clusters.engage("stuck", stuck.client().unwrap());
    until("a stuck reconcile", || running.count("stuck/") > 0).await;
    running
        .clusters
        .engage("healthy", healthy.client().unwrap());
    until("every healthy object reconciled", || {
        ["a", "b", "c", "d", "e"]
            .iter()
            .all(|n| running.saw(&format!("healthy/{n}")))
    })
    .await;
    assert_eq!(
        running.count("stuck/"),
        1,
        "the stuck member held one worker of two"
    );
    running.stop().await;
    servers.abort_all();
    while servers.join_next().await.is_some() {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_make_ctx_for_one_member_leaves_the_others_running() {
    let (bad, good) = (member(&["x"]).await, member(&["y"]).await);
    let make_ctx = |cluster: &Cluster, seen: &Seen| {
        assert_ne!(cluster.name(), "bad", "make_ctx refuses this member");
        named(cluster, seen)
    };
    let options = ControllerOptions::default().name("fleet-panics");
    let running = Running::start(|fleet| FleetController::new(fleet, options), make_ctx);
    running.clusters.engage("bad", bad.client().unwrap());
    running.clusters.engage("good", good.client().unwrap());
    until("the good member reconciled", || running.saw("good/y")).await;
    // Another member engaged after the panic is followed too: the controller lives on.
    let later = member(&["z"]).await;
    running.clusters.engage("later", later.client().unwrap());
    until("a later member reconciled", || running.saw("later/z")).await;
    assert_eq!(running.count("bad/"), 0);
    running.stop().await; // every task ended without a panic
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_filter_follows_only_the_members_it_accepts() {
    let (prod, dev) = (member(&["p"]).await, member(&["d"]).await);
    let prod_only = |fleet: &Fleet| {
        FleetController::new(fleet, ControllerOptions::default().name("fleet-prod"))
            .clusters(|c| c.labels().get("env").is_some_and(|env| env == "prod"))
    };
    let running = Running::start(prod_only, named);
    let label = |env: &str| [("env".to_owned(), env.to_owned())].into();
    running
        .clusters
        .engage_labelled("dev", dev.client().unwrap(), label("dev"));
    running
        .clusters
        .engage_labelled("prod", prod.client().unwrap(), label("prod"));
    until("prod reconciled", || running.saw("prod/p")).await;
    // dev was engaged first, so the controller had seen it when it followed prod: had it
    // followed dev too, dev's factory would have been asked for the controller's informer.
    let dev_factory = running.fleet.cluster("dev").unwrap().factory().clone();
    assert!(dev_factory.watched().is_empty(), "dev was followed");
    assert_eq!(running.count("dev/"), 0);
    // dev relabelled prod: followed from then on.
    running
        .clusters
        .engage_labelled("dev", dev.client().unwrap(), label("prod"));
    until("dev reconciled once it passes", || running.saw("dev/d")).await;
    running.stop().await;
}
