//! A real cluster. First the demo checks that it can reach the server and read (and, with
//! `--write`, write) what it needs, and stops with the cause when it cannot. Read-only: one
//! replica caches pods, Deployments and namespaces, and the verdict compares its caches with
//! the server. `--write`: the demo's namespace gets three Deployments, two leader-elected
//! replicas run the controllers, the leader is killed a third of the way in and one
//! Deployment deleted at two thirds, and the verdict checks what the controllers wrote
//! against the server; the demo's finalizers are removed on the way out.
#![allow(dead_code, unreachable_pub)]

use std::{collections::BTreeSet, path::Path, time::Duration};

use k8s_openapi::api::{
    apps::v1::Deployment,
    coordination::v1::Lease,
    core::v1::{ConfigMap, Namespace, Pod},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use kube_informer_runtime::{
    CancellationToken,
    rbac::{Rbac, Verb},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{
    Failure,
    controllers::{MANAGED_BY, REPORT_FINALIZER},
    replicas::{self, LEASE_SECONDS, Replica, Spec},
    verify,
};

/// The namespace the demo creates and writes in.
pub const DEMO_NAMESPACE: &str = "kube-informer-demo";

/// What a real-cluster run does.
#[derive(Debug, Clone)]
pub struct Plan {
    pub seconds: u64,
    pub write: bool,
    /// Existing namespaces to work in as well (`--namespace`).
    pub namespaces: Vec<String>,
    /// Cache pods as `Compact<Pod>` (`--compact`).
    pub compact: bool,
}

/// A client from the kubeconfig at `path`.
pub async fn connect(path: &Path) -> Result<kube::Client, Failure> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| format!("kubeconfig {} is not usable: {e}", path.display()))?;
    let url = config.cluster_url.clone();
    let client =
        kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))?;
    match client.apiserver_version().await {
        Ok(version) => {
            println!("cluster: {url} (Kubernetes {})", version.git_version);
            Ok(client)
        }
        Err(kube::Error::Api(s)) if s.code == 401 => Err(format!(
            "the API server at {url} refused the kubeconfig's credentials (401 Unauthorized): {}",
            s.message
        )
        .into()),
        Err(e) => Err(format!("cannot reach the API server at {url}: {}", causes(&e)).into()),
    }
}

/// An error and its causes, outermost first (`client error (Connect): tcp connect error:
/// Connection refused`): a transport error's own message names none of them.
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

/// Every namespace of `--namespace` exists (the demo creates only its own).
async fn check_namespaces(client: &kube::Client, namespaces: &[String]) -> Result<(), Failure> {
    let api = Api::<Namespace>::all(client.clone());
    for name in namespaces {
        match api.get_opt(name).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(format!(
                    "namespace {name} does not exist: --namespace names namespaces that exist \
                     (the demo creates only {DEMO_NAMESPACE})"
                )
                .into());
            }
            Err(e) => return Err(refused(&format!("get namespace {name}"), e)),
        }
    }
    Ok(())
}

/// What a request needs, said when the server refuses it.
fn refused(what: &str, error: kube::Error) -> Failure {
    match error {
        // RBAC's denials say "User ... cannot ...": name what the demo needs.
        kube::Error::Api(s) if s.code == 403 && s.message.contains(" cannot ") => format!(
            "{what}: forbidden (403): {}. The demo needs list/watch on pods, deployments \
             and namespaces; --write also needs create/patch/delete on namespaces, deployments, \
             configmaps, events.k8s.io events and coordination.k8s.io leases (the exact roles: \
             run it again with --print-rbac, and --write if writing)",
            s.message
        )
        .into(),
        kube::Error::Api(s) if s.code == 401 => {
            format!("{what}: the credentials were refused (401): {}", s.message).into()
        }
        kube::Error::Api(s) => format!("{what}: {} ({}): {}", s.reason, s.code, s.message).into(),
        other => format!("{what}: {other}").into(),
    }
}

/// Lists `K` where the demo looks (each namespace of `namespaces`, or the whole cluster).
pub async fn list<K>(
    client: &kube::Client,
    namespaces: Option<&[String]>,
) -> Result<Vec<K>, Failure>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let apis: Vec<Api<K>> = match namespaces {
        None => vec![Api::all(client.clone())],
        Some(namespaces) => namespaces
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect(),
    };
    let mut all = Vec::new();
    for api in apis {
        let listed = api.list(&ListParams::default()).await;
        all.extend(
            listed
                .map_err(|e| refused(&format!("list {}", K::plural(&())), e))?
                .items,
        );
    }
    Ok(all)
}

pub async fn run(plan: Plan, path: &Path, graceful: &CancellationToken) -> Result<(), Failure> {
    let client = connect(path).await?;
    if plan.write {
        write_run(client, plan, graceful).await
    } else {
        read_run(client, plan, graceful).await
    }
}

/// The namespaces a `--write` run works in: its own and those named.
fn spec_namespaces(named: &[String]) -> Vec<String> {
    let mut all = vec![DEMO_NAMESPACE.to_owned()];
    all.extend(named.iter().cloned());
    all
}

/// [`run`] on a real kube-apiserver and etcd started here (kube-envtest), stopped after.
pub async fn on_envtest(plan: Plan, graceful: &CancellationToken) -> Result<(), Failure> {
    use kube_envtest::{Environment, EnvironmentOptions};
    let env = Environment::start(EnvironmentOptions::new())
        .await
        .map_err(|e| format!("kube-envtest could not start a real API server: {e}"))?;
    println!(
        "kube-envtest: a real kube-apiserver at {}",
        env.config().cluster_url
    );
    let outcome = run(plan, env.kubeconfig_path(), graceful).await;
    drop(env); // its processes and folder go
    outcome
}

/// The ServiceAccount the printed RBAC is bound to (in [`DEMO_NAMESPACE`]).
pub const SERVICE_ACCOUNT: &str = "kube-informer-demo";

/// Everything to `kubectl apply -f` for a run with these flags as the ServiceAccount
/// `kube-informer-demo/kube-informer-demo`: its namespace, the account, [`rbac`]'s roles
/// and their bindings.
pub async fn rbac_manifest(namespaces: &[String], write: bool) -> Result<String, Failure> {
    let rbac = rbac(namespaces, write).await?;
    Ok(rbac.manifest("kube-informer-demo", DEMO_NAMESPACE, SERVICE_ACCOUNT))
}

/// Prints [`rbac_manifest`].
pub async fn print_rbac(namespaces: &[String], write: bool) -> Result<(), Failure> {
    print!("{}", rbac_manifest(namespaces, write).await?);
    Ok(())
}

/// The RBAC a run with these flags needs: its replica's (the manager's own
/// [`rbac`](kube_informer_runtime::Manager::rbac)) and the demo's setup (the namespace, its
/// Deployments, the Lease preflight). Nothing is sent to a server.
pub async fn rbac(namespaces: &[String], write: bool) -> Result<Rbac, Failure> {
    // The manager is built, not run: the client is never used.
    let config = kube::Config::new("https://127.0.0.1:6443".parse().expect("a URL"));
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let spec = match write {
        true => Spec {
            lease_namespace: Some(DEMO_NAMESPACE.into()),
            namespaces: Some(spec_namespaces(namespaces)),
            ..Spec::default()
        },
        false => Spec {
            lease_namespace: None,
            namespaces: (!namespaces.is_empty()).then(|| namespaces.to_vec()),
            ..Spec::default()
        },
    };
    let (manager, _) = replicas::manager(client, "print-rbac", &spec).await?;
    let mut rbac = manager.rbac();
    // Each --namespace is checked first (a get of that namespace alone).
    if !namespaces.is_empty() {
        rbac.allow_named("", "namespaces", &[], namespaces, &[Verb::Get]);
    }
    if write {
        let demo = [DEMO_NAMESPACE.to_owned()];
        // It creates its namespace (or finds it there), and deletes it only when it made
        // it and the Lease preflight then fails: no other namespace.
        rbac.allow("", "namespaces", &[], &[Verb::Create]);
        rbac.allow_named("", "namespaces", &[], &demo, &[Verb::Get, Verb::Delete]);
        // Its three Deployments, and the one it deletes to show the finalizer at work.
        rbac.allow("apps", "deployments", &demo, &[Verb::Create, Verb::Delete]);
        // The verdict compares the reports with the server's; the leader is read off the
        // Lease.
        let written: Vec<String> = spec_namespaces(namespaces);
        rbac.allow("", "configmaps", &written, &[Verb::List]);
        rbac.allow("coordination.k8s.io", "leases", &demo, &[Verb::Get]);
    }
    Ok(rbac)
}

/// One replica, no controllers: what it cached, against the server.
async fn read_run(
    client: kube::Client,
    plan: Plan,
    graceful: &CancellationToken,
) -> Result<(), Failure> {
    check_namespaces(&client, &plan.namespaces).await?;
    let namespaces = (!plan.namespaces.is_empty()).then(|| plan.namespaces.clone());
    // Refusals surface here with their cause, before any cache waits on them.
    list::<Pod>(&client, namespaces.as_deref()).await?;
    list::<Deployment>(&client, namespaces.as_deref()).await?;
    Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().limit(1))
        .await
        .map_err(|e| refused("list namespaces", e))?;
    println!(
        "read-only: one replica caches pods, deployments and namespaces; nothing is written (--write runs the controllers on two replicas)"
    );
    let spec = Spec {
        lease_namespace: None,
        namespaces: namespaces.clone(),
        compact: plan.compact,
        cache: None,
    };
    let replica = replicas::start(client.clone(), "replica-a", &spec, graceful).await?;
    println!(
        "{}: http://{}/healthz /readyz /metrics",
        replica.name, replica.addr
    );
    let outcome = async {
        replicas::wait_for_caches(&replica, Duration::from_secs(30)).await?;
        for second in 1..=plan.seconds {
            replicas::tick(graceful).await?;
            let (ready, _) = replicas::get(replica.addr, "/readyz").await;
            println!(
                "[{second:>3}s] readyz {ready}, cached: {}",
                replicas::cached(&replica)
            );
        }
        caches_match_server(&client, &replica, namespaces.as_deref()).await
    }
    .await;
    replicas::stop_all(vec![replica]).await;
    outcome
}

/// The verdict of a read-only run: the cache holds what the server lists (retried for a few
/// seconds, since a live cluster changes while it is listed).
async fn caches_match_server(
    client: &kube::Client,
    replica: &Replica,
    namespaces: Option<&[String]>,
) -> Result<(), Failure> {
    let keys = |items: Vec<(Option<String>, String)>| -> BTreeSet<String> {
        items
            .into_iter()
            .map(|(ns, n)| format!("{}/{n}", ns.unwrap_or_default()))
            .collect()
    };
    let mut last = String::new();
    for _ in 0..60 {
        let pods = keys(
            list::<Pod>(client, namespaces)
                .await?
                .iter()
                .map(|p| (p.namespace(), p.name_any()))
                .collect(),
        );
        let deployments = keys(
            list::<Deployment>(client, namespaces)
                .await?
                .iter()
                .map(|d| (d.namespace(), d.name_any()))
                .collect(),
        );
        let cached_pods = keys(replica.pods.keys());
        let cached_deployments = keys(
            replica
                .deployments
                .store()
                .list()
                .iter()
                .map(|d| (d.namespace(), d.name_any()))
                .collect(),
        );
        last = format!(
            "pods {} cached / {} on the server, deployments {} / {}",
            cached_pods.len(),
            pods.len(),
            cached_deployments.len(),
            deployments.len()
        );
        if pods == cached_pods && deployments == cached_deployments {
            println!("\nverdict: the cache matches the server: {last}");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("\nverdict: MISMATCH: {last}");
    Err(format!("the cache does not match the server: {last}").into())
}

/// The demo's namespace and Deployments, checked writable before anything runs. A namespace
/// this run created is deleted again when a check fails.
async fn prepare(client: &kube::Client, plan: &Plan) -> Result<(), Failure> {
    check_namespaces(client, &plan.namespaces).await?;
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": {"name": DEMO_NAMESPACE, "labels": {MANAGED_BY.0: MANAGED_BY.1}},
    }))
    .expect("a Namespace");
    let namespaces = Api::<Namespace>::all(client.clone());
    let created = match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => true,
        Err(kube::Error::Api(s)) if s.code == 409 => false,
        Err(e) => return Err(refused(&format!("create namespace {DEMO_NAMESPACE}"), e)),
    };
    if let Ok(Some(existing)) = namespaces.get_opt(DEMO_NAMESPACE).await
        && existing.metadata.deletion_timestamp.is_some()
    {
        return Err(format!(
            "namespace {DEMO_NAMESPACE} is being deleted (Terminating, after --cleanup): \
             run again once it is gone; a server without a controller-manager (kube-envtest) \
             never finishes deleting a namespace, so start a fresh one"
        )
        .into());
    }
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let lease: Lease =
        serde_json::from_value(json!({"metadata": {"name": "demo-preflight"}})).expect("a Lease");
    if let Err(e) = Api::<Lease>::namespaced(client.clone(), DEMO_NAMESPACE)
        .create(&dry_run, &lease)
        .await
    {
        if created {
            // Nothing else is in it yet: leave nothing behind.
            let _ = namespaces.delete(DEMO_NAMESPACE, &Default::default()).await;
        }
        return Err(refused("create a Lease (dry run)", e));
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
    for i in 0..3 {
        let name = format!("web-{i}");
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {MANAGED_BY.0: MANAGED_BY.1}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}},
        }))
        .expect("a Deployment");
        match deployments
            .create(&PostParams::default(), &deployment)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(refused(&format!("create deployment {name}"), e)),
        }
    }
    Ok(())
}

/// Two replicas of the controllers, the leader killed, the verdict.
async fn write_run(
    client: kube::Client,
    plan: Plan,
    graceful: &CancellationToken,
) -> Result<(), Failure> {
    prepare(&client, &plan).await?;
    let namespaces = spec_namespaces(&plan.namespaces);
    println!(
        "writing only in: {} (the Lease {}/{})",
        namespaces.join(", "),
        DEMO_NAMESPACE,
        replicas::LEASE
    );
    let spec = Spec {
        lease_namespace: Some(DEMO_NAMESPACE.into()),
        namespaces: Some(namespaces.clone()),
        compact: plan.compact,
        cache: None,
    };
    let mut replicas = vec![replicas::start(client.clone(), "replica-a", &spec, graceful).await?];
    let outcome = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        replicas.push(replicas::start(client.clone(), "replica-b", &spec, graceful).await?);
        for r in &replicas {
            println!("{}: http://{}/healthz /readyz /metrics", r.name, r.addr);
            replicas::wait_for_caches(r, Duration::from_secs(30)).await?;
        }
        println!("cached: {}", replicas::cached(&replicas[0]));
        await_leader(&client, &replicas, graceful).await?;
        let kill_at = (plan.seconds / 3).max(1);
        let delete_at = (2 * plan.seconds / 3).max(kill_at + 1);
        for second in 1..=plan.seconds {
            replicas::tick(graceful).await?;
            let mut ready = Vec::new();
            for r in &replicas {
                ready.push(replicas::get(r.addr, "/readyz").await.0);
            }
            println!("[{second:>3}s] {}", replicas::status(&replicas, &ready));
            if second == kill_at {
                replicas::kill_leader(&replicas);
            }
            if second == delete_at {
                let api: Api<Deployment> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
                api.delete("web-2", &DeleteParams::default())
                    .await
                    .map_err(|e| refused("delete deployment web-2", e))?;
                println!(
                    "       deleted {DEMO_NAMESPACE}/web-2: its finalizer deletes its report first"
                );
            }
        }
        if replicas::leader(&replicas).is_none() {
            await_leader(&client, &replicas, graceful).await?;
        }
        written_matches_server(&client, &namespaces).await
    }
    .await;
    replicas::print_errors(&replicas);
    replicas::stop_all(replicas).await;
    let removed = remove_finalizers(&client, &namespaces).await?;
    println!(
        "removed the demo's finalizer from {removed} Deployments (--cleanup removes everything else it wrote)"
    );
    outcome
}

/// Waits for a leader, up to three lease durations; when none comes, says who holds the
/// Lease, or that it could not be taken.
async fn await_leader(
    client: &kube::Client,
    replicas: &[Replica],
    graceful: &CancellationToken,
) -> Result<(), Failure> {
    for _ in 0..3 * LEASE_SECONDS {
        if let Some(leader) = replicas::leader(replicas) {
            println!("{} leads", leader.name);
            return Ok(());
        }
        replicas::tick(graceful).await?;
    }
    let lease = Api::<Lease>::namespaced(client.clone(), DEMO_NAMESPACE)
        .get_opt(replicas::LEASE)
        .await
        .ok()
        .flatten();
    let holder = lease
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty());
    let why = match holder {
        Some(holder) => format!(
            "it is held by {holder:?} (until that holder stops renewing it for its lease duration)"
        ),
        None => "it could not be taken (the warnings above say why; the demo needs \
                 get/create/update on leases.coordination.k8s.io)"
            .to_owned(),
    };
    Err(format!(
        "no replica became the leader within {} s: the Lease {DEMO_NAMESPACE}/{}: {why}",
        3 * LEASE_SECONDS,
        replicas::LEASE
    )
    .into())
}

/// The verdict of a writing run, retried while the controllers catch up.
async fn written_matches_server(
    client: &kube::Client,
    namespaces: &[String],
) -> Result<(), Failure> {
    let mut verdict = verify::Verdict::default();
    for _ in 0..60 {
        let pods: Vec<Value> = list::<Pod>(client, Some(namespaces))
            .await?
            .iter()
            .map(value)
            .collect();
        let deployments: Vec<Value> = list::<Deployment>(client, Some(namespaces))
            .await?
            .iter()
            .map(value)
            .collect();
        let config_maps: Vec<Value> = list::<ConfigMap>(client, Some(namespaces))
            .await?
            .iter()
            .map(value)
            .collect();
        let all_namespaces: Vec<Value> = namespaces
            .iter()
            .map(|n| json!({"metadata": {"name": n}}))
            .collect();
        verdict = verify::verify_objects(&pods, &deployments, &config_maps, &all_namespaces, |n| {
            namespaces.iter().any(|ns| ns == n)
        });
        if verdict.mismatches.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(verify::report(&verdict)?)
}

fn value<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).expect("a Kubernetes object serializes")
}

/// Removes the demo's finalizer from the Deployments of `namespaces` (so that deleting one
/// later does not wait for the demo), with a strategic merge patch that removes it alone.
pub async fn remove_finalizers(
    client: &kube::Client,
    namespaces: &[String],
) -> Result<usize, Failure> {
    let mut removed = 0;
    for deployment in list::<Deployment>(client, Some(namespaces)).await? {
        if !deployment
            .finalizers()
            .iter()
            .any(|f| f == REPORT_FINALIZER)
        {
            continue;
        }
        let api: Api<Deployment> =
            Api::namespaced(client.clone(), &deployment.namespace().unwrap_or_default());
        let patch =
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [REPORT_FINALIZER]}});
        match api
            .patch(
                &deployment.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => removed += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(refused(
                    &format!("remove the finalizer of {}", deployment.name_any()),
                    e,
                ));
            }
        }
    }
    Ok(removed)
}
