//! The demo's replicas: managers with leader election and the two controllers, their
//! endpoints polled for the progress lines, the leader killed a third of the way in; and
//! the simulated cluster's run.
#![allow(dead_code, unreachable_pub)]

use std::{net::SocketAddr, time::Duration};

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Namespace, Pod},
};
use kube::ResourceExt;
use kube_informer::{
    FactoryOptions, SharedIndexInformer, compact::Compact, informer::SyncError,
    list_watch::Selectors, snapshot::CacheDir,
};
use kube_informer_runtime::{
    CancellationToken,
    leader_election::{LeaderElectionConfig, LeaderElector},
    manager::{Manager, ManagerOptions},
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Failure, cluster, controllers, verify};

/// What a simulated run does.
#[derive(Debug, Clone)]
pub struct Plan {
    pub pods: u64,
    pub seconds: u64,
    pub seed: u64,
    /// Cache pods as `Compact<Pod>` (`--compact`).
    pub compact: bool,
    /// Keep each replica's pod cache here (`--cache-dir`); the killed leader then comes
    /// back from it two thirds of the way in.
    pub cache_dir: Option<std::path::PathBuf>,
}

/// A replica's manager task, aborted when dropped: a run that fails, panics or is dropped
/// half-way (a second Ctrl-C, a failing test) never leaves a manager running behind it.
pub struct ManagerTask(
    Option<tokio::task::JoinHandle<Result<(), kube_informer_runtime::manager::ManagerError>>>,
);

impl ManagerTask {
    pub fn is_finished(&self) -> bool {
        self.0
            .as_ref()
            .is_none_or(tokio::task::JoinHandle::is_finished)
    }

    /// Kills the manager (no release: its future is dropped at its next await).
    pub fn abort(&self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }

    /// Waits for the manager to end.
    pub async fn join(
        mut self,
    ) -> Result<Result<(), kube_informer_runtime::manager::ManagerError>, tokio::task::JoinError>
    {
        self.0.take().expect("joined once").await
    }
}

impl Drop for ManagerTask {
    fn drop(&mut self) {
        self.abort();
    }
}

/// The Lease the replicas elect a leader with.
pub const LEASE: &str = "demo";
/// How long a killed leader's Lease holds before the standby takes over.
pub const LEASE_SECONDS: u64 = 6;

/// One replica: its manager's task, endpoints, elector and caches.
pub struct Replica {
    pub name: String,
    pub addr: SocketAddr,
    pub elector: Option<LeaderElector>,
    pub stop: CancellationToken,
    pub task: ManagerTask,
    pub pods: Pods,
    pub deployments: SharedIndexInformer<Deployment>,
    pub namespaces: SharedIndexInformer<Namespace>,
    pub errors: controllers::Errors,
}

/// A replica's pod cache: whole pods, or compact ones (`--compact`).
pub enum Pods {
    Whole(SharedIndexInformer<Pod>),
    Compact(SharedIndexInformer<Compact<Pod>>),
}

impl Pods {
    /// The factory's pod informer of the kind `spec` says (kept in the factory's cache
    /// directory, if it has one).
    fn of(manager: &Manager, spec: &Spec) -> Self {
        match spec.compact {
            true => Self::Compact(manager.factory().informer()),
            false => Self::Whole(manager.factory().informer()),
        }
    }

    async fn wait_for_sync(&self, timeout: Duration) -> Result<(), SyncError> {
        match self {
            Self::Whole(pods) => pods.wait_for_sync(timeout).await,
            Self::Compact(pods) => pods.wait_for_sync(timeout).await,
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Whole(pods) => pods.store().len(),
            Self::Compact(pods) => pods.store().len(),
        }
    }

    /// Each cached pod's namespace and name.
    pub fn keys(&self) -> Vec<(Option<String>, String)> {
        fn keys<P: kube::Resource + Clone + Send + Sync + 'static>(
            pods: &SharedIndexInformer<P>,
        ) -> Vec<(Option<String>, String)> {
            let list = pods.store().list();
            list.iter().map(|p| (p.namespace(), p.name_any())).collect()
        }
        match self {
            Self::Whole(pods) => keys(pods),
            Self::Compact(pods) => keys(pods),
        }
    }
}

/// What a replica runs.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    /// Run the controllers, leader-elected on the Lease [`LEASE`] in this namespace.
    pub lease_namespace: Option<String>,
    /// Cache (and write) only these namespaces; `None`: the whole cluster.
    pub namespaces: Option<Vec<String>>,
    /// Cache pods as `Compact<Pod>`.
    pub compact: bool,
    /// Keep the caches here between runs (`--cache-dir`).
    pub cache: Option<CacheDir>,
}

/// The manager of a replica as `spec` describes it (not started): the caches the progress
/// lines read and, when `spec` has a Lease, both controllers under leader election. `name`
/// is its identity in the Lease.
pub async fn manager(
    client: kube::Client,
    name: &str,
    spec: &Spec,
) -> Result<(Manager, controllers::Errors), String> {
    let mut factory = FactoryOptions::default();
    if let Some(namespaces) = &spec.namespaces {
        let selectors = Selectors::default().in_namespaces(namespaces.iter().cloned());
        factory = factory.selectors(selectors);
    }
    // Every informer of the replica (pods, deployments, namespaces, the controllers')
    // keeps its cache there.
    if let Some(cache) = &spec.cache {
        factory = factory.cache_dir(cache.clone());
    }
    let mut options = ManagerOptions::default()
        .bind(([127, 0, 0, 1], 0).into())
        .factory(factory);
    if let Some(lease_namespace) = &spec.lease_namespace {
        let election = LeaderElectionConfig::new(LEASE)
            .namespace(lease_namespace)
            .identity(name)
            .lease_duration(Duration::from_secs(LEASE_SECONDS))
            // 3 s between a cut-off leader's step-down and its Lease's expiry: room for a
            // busy machine's late timer, where 1 s was not.
            .renew_deadline(Duration::from_secs(3))
            .retry_period(Duration::from_millis(500));
        options = options.leader_election(election);
    }
    let mut manager = Manager::new(client, options)
        .await
        .map_err(|e| e.to_string())?;
    // The caches the progress lines read exist on every replica, leading or not.
    Pods::of(&manager, spec);
    manager.factory().informer::<Deployment>();
    manager.factory().informer::<Namespace>();
    let errors = controllers::Errors::default();
    if spec.lease_namespace.is_some() {
        let recorder = manager.recorder("demo.kube-informer.io/ready-pods");
        let scope = controllers::Scope {
            namespaces: spec.namespaces.clone(),
            errors: errors.clone(),
        };
        match spec.compact {
            true => controllers::install::<Compact<Pod>>(&mut manager, recorder, scope),
            false => controllers::install::<Pod>(&mut manager, recorder, scope),
        }
    }
    Ok((manager, errors))
}

/// Starts replica `name` ([`manager`]). It stops when `graceful` (or its own `stop`) is
/// cancelled.
pub async fn start(
    client: kube::Client,
    name: &str,
    spec: &Spec,
    graceful: &CancellationToken,
) -> Result<Replica, String> {
    let (manager, errors) = manager(client, name, spec).await?;
    let pods = Pods::of(&manager, spec);
    let deployments = manager.factory().informer::<Deployment>();
    let namespaces = manager.factory().informer::<Namespace>();
    let mut endpoints = manager.endpoints();
    let elector = manager.elector().cloned();
    let stop = graceful.child_token();
    let task = ManagerTask(Some(tokio::spawn(
        manager.run_until(stop.clone(), CancellationToken::new()),
    )));
    let addr = endpoints
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|addr| *addr)
        .ok_or("the endpoints were not bound")?;
    Ok(Replica {
        name: name.to_owned(),
        addr,
        elector,
        stop,
        task,
        pods,
        deployments,
        namespaces,
        errors,
    })
}

/// Waits up to `timeout` for the replica's caches, naming the one that did not sync and why.
pub async fn wait_for_caches(replica: &Replica, timeout: Duration) -> Result<(), String> {
    let failed = |e: kube_informer::informer::SyncError| {
        format!("{}: a cache did not sync: {e}", replica.name)
    };
    replica.pods.wait_for_sync(timeout).await.map_err(failed)?;
    replica
        .deployments
        .wait_for_sync(timeout)
        .await
        .map_err(failed)?;
    replica
        .namespaces
        .wait_for_sync(timeout)
        .await
        .map_err(failed)?;
    Ok(())
}

/// What the replica's caches hold.
pub fn cached(replica: &Replica) -> String {
    format!(
        "{} pods, {} deployments, {} namespaces",
        replica.pods.len(),
        replica.deployments.store().len(),
        replica.namespaces.store().len()
    )
}

/// Sleeps a second, or returns [`Failure::Interrupted`] (after saying so) on Ctrl-C.
pub async fn tick(graceful: &CancellationToken) -> Result<(), Failure> {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(1)) => Ok(()),
        () = graceful.cancelled() => {
            eprintln!("\ninterrupt: shutting down gracefully (Ctrl-C again to exit at once)");
            Err(Failure::Interrupted)
        }
    }
}

/// Which replica leads, if any.
pub fn leader(replicas: &[Replica]) -> Option<&Replica> {
    replicas.iter().find(|r| {
        !r.task.is_finished() && r.elector.as_ref().is_some_and(LeaderElector::is_leading)
    })
}

/// Kills the leader (its task aborted: no release), as a crashed pod would stop; its name.
pub fn kill_leader(replicas: &[Replica]) -> Option<String> {
    let leader = leader(replicas)?;
    leader.task.abort();
    println!(
        "       killed {} (the leader): no release; the standby takes over once its {LEASE_SECONDS} s lease runs out",
        leader.name
    );
    Some(leader.name.clone())
}

/// The killed replica `name` restarted from its cache directory (under a new identity in
/// the Lease: its old one may still hold it), and what that cost the server.
async fn come_back(
    server: &fake_apiserver::FakeApiServer,
    name: &str,
    spec: &Spec,
    graceful: &CancellationToken,
) -> Result<Replica, String> {
    let lists_of_pods = || {
        let requests = server.requests();
        let lists = requests.iter().filter(|r| {
            r.resource.as_deref() == Some("pods")
                && r.verb == Some(fake_apiserver::Verb::List)
                && r.param("limit") != Some("1")
        });
        lists.count()
    };
    let lists_before = lists_of_pods();
    let started = std::time::Instant::now();
    let back = start(
        server.client().map_err(|e| e.to_string())?,
        &format!("{name}-again"),
        spec,
        graceful,
    )
    .await?;
    back.pods
        .wait_for_sync(Duration::from_secs(60))
        .await
        .map_err(|e| format!("{}: {e}", back.name))?;
    let lists = lists_of_pods() - lists_before;
    println!(
        "       {name} came back as {} from its cache directory: {} pods synced in {} ms with {lists} LISTs of pods (a cold start lists them all)",
        back.name,
        back.pods.len(),
        started.elapsed().as_millis(),
    );
    if lists > 0 {
        return Err(format!(
            "{} listed the pods: its snapshot was not used",
            back.name
        ));
    }
    Ok(back)
}

/// Waits until a snapshot is in `dir` (written every second while the cache changes).
async fn wait_for_snapshot(dir: &std::path::Path) -> Result<(), String> {
    for _ in 0..600 {
        let written = std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.path().extension().is_some_and(|x| x == "snapshot"))
        });
        if written {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("no snapshot in {} after a minute", dir.display()))
}

/// Prints each controller's reconcile errors (count and the last one) seen on `replicas`.
pub fn print_errors(replicas: &[Replica]) {
    for r in replicas {
        for (controller, (count, last)) in r.errors.snapshot() {
            println!(
                "  {}: {controller}: {count} reconcile errors, the last: {last}",
                r.name
            );
        }
    }
}

/// Stops every replica gracefully (reconciles drain, the Lease is released) and waits.
pub async fn stop_all(replicas: Vec<Replica>) {
    for r in &replicas {
        r.stop.cancel();
    }
    for r in replicas {
        // A killed replica's task ends cancelled: nothing to say.
        if let Ok(Err(e)) = r.task.join().await {
            eprintln!("{}: {e}", r.name);
        }
    }
}

/// `GET path` on an endpoint: (status, body); (0, "") if unreachable.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return (0, String::new());
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return (0, String::new());
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    let code = response
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

pub fn status(replicas: &[Replica], ready: &[u16]) -> String {
    let parts: Vec<String> = replicas
        .iter()
        .zip(ready)
        .map(|(r, code)| {
            let leads = r.elector.as_ref().is_some_and(LeaderElector::is_leading);
            let state = if r.task.is_finished() {
                "dead"
            } else if leads {
                "LEADER"
            } else {
                "standby"
            };
            format!("{} {state} readyz {code}", r.name)
        })
        .collect();
    parts.join(", ")
}

/// The simulated cluster: two replicas, churn, the leader killed a third of the way in, the
/// verdict.
pub async fn simulated_cluster(args: Plan, graceful: &CancellationToken) -> Result<(), Failure> {
    let shape = if args.pods == 0 {
        "no pods: nothing churns".to_owned()
    } else {
        format!(
            "{} pods in Deployments on {} nodes, churning",
            args.pods,
            cluster::NODES
        )
    };
    println!("cluster: simulated by fake-apiserver ({shape})");
    let server = cluster::simulated(args.pods, args.seed).await?;
    let client = || server.client().map_err(|e| e.to_string());
    let spec = Spec {
        lease_namespace: Some("default".into()),
        namespaces: None,
        compact: args.compact,
        cache: None,
    };
    // Each replica's cache in a directory of its own, for the server of this run only.
    let cached = |name: &str| Spec {
        cache: args.cache_dir.as_ref().map(|dir| CacheDir {
            every: Duration::from_secs(1),
            ..CacheDir::new(dir.join(name), server.url())
        }),
        ..spec.clone()
    };
    let mut replicas = vec![start(client()?, "replica-a", &cached("replica-a"), graceful).await?];
    tokio::time::sleep(Duration::from_millis(300)).await;
    replicas.push(start(client()?, "replica-b", &cached("replica-b"), graceful).await?);
    for r in &replicas {
        println!("{}: http://{}/healthz /readyz /metrics", r.name, r.addr);
    }
    let stop_churn = CancellationToken::new();
    let churn = (args.pods > 0)
        .then(|| cluster::churn(server.clone(), args.pods, args.seed, stop_churn.clone()));
    let kill_at = (args.seconds / 3).max(1);
    let back_at = (args.seconds * 2 / 3).max(kill_at + 1);
    let mut killed = None;
    let mut ran = Ok(());
    for second in 1..=args.seconds {
        if let Err(interrupted) = tick(graceful).await {
            ran = Err(interrupted);
            break;
        }
        let mut ready = Vec::new();
        for r in &replicas {
            ready.push(get(r.addr, "/readyz").await.0);
        }
        println!("[{second:>3}s] {}", status(&replicas, &ready));
        if second == kill_at {
            if let (Some(dir), Some(leader)) = (&args.cache_dir, leader(&replicas)) {
                // Killed once it has written its pods: what it comes back from.
                wait_for_snapshot(&dir.join(&leader.name)).await?;
            }
            killed = kill_leader(&replicas);
        }
        if second == back_at
            && args.cache_dir.is_some()
            && let Some(name) = killed.take()
        {
            let back = come_back(&server, &name, &cached(&name), graceful).await?;
            replicas.push(back);
        }
    }
    stop_churn.cancel();
    let writes = match churn {
        Some(churn) => churn.await.unwrap_or(0),
        None => 0,
    };
    if ran.is_err() {
        stop_all(replicas).await;
        return ran;
    }
    println!("\nchurn stopped after {writes} writes; waiting for the controllers to catch up");
    let mut verdict = verify::verify(&server);
    for _ in 0..300 {
        if verdict.mismatches.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        verdict = verify::verify(&server);
    }
    let events = server
        .list(&fake_apiserver::Gvr::new("events.k8s.io", "v1", "events"))
        .map_or(0, |e| e.len());
    println!("events recorded (events.k8s.io/v1): {events}");
    if let Some(r) = replicas.iter().find(|r| !r.task.is_finished()) {
        print_metrics(r).await;
    }
    print_errors(&replicas);
    stop_all(replicas).await;
    Ok(verify::report(&verdict)?)
}

/// The survivor's reconcile counters, from its `/metrics`.
pub async fn print_metrics(replica: &Replica) {
    let (_, metrics) = get(replica.addr, "/metrics").await;
    println!("{} (leader at the end) metrics:", replica.name);
    let wanted = [
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
    ];
    for line in metrics
        .lines()
        .filter(|l| wanted.iter().any(|w| l.starts_with(w)))
    {
        println!("  {line}");
    }
}
