//! The README's demo on a real kube-apiserver (real only: what it checks is the real
//! cluster path). It refuses a bad token with the cause; read-only, its cache matches the
//! server; with --write it leads, survives the leader's kill, agrees with the server and
//! leaves no finalizer behind; --cleanup removes what it wrote.

#[path = "../../runtime/examples/demo/cleanup.rs"]
mod cleanup;
#[path = "../../runtime/examples/demo/cluster.rs"]
mod cluster;
#[path = "../../runtime/examples/demo/failure.rs"]
mod failure;
#[path = "../../runtime/examples/demo/real.rs"]
mod real;
#[path = "../../runtime/examples/demo/replicas.rs"]
mod replicas;

use crate::{
    demo::{controllers, verify},
    grant,
};

use failure::Failure;
use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease, core::v1::ConfigMap};
use kube::{Api, ResourceExt, api::ListParams};
use kube_envtest::{Environment, EnvironmentOptions};
use kube_informer_runtime::CancellationToken;

/// A kubeconfig of `env` that acts as `user`, written beside the environment's.
fn kubeconfig_as(env: &Environment, user: &str) -> std::path::PathBuf {
    let mut config = env.kubeconfig();
    for named in &mut config.auth_infos {
        if let Some(auth) = &mut named.auth_info {
            auth.impersonate = Some(user.to_owned());
        }
    }
    let path = env
        .kubeconfig_path()
        .with_file_name(format!("{user}-kubeconfig"));
    // JSON is YAML: kube reads it back as a kubeconfig.
    std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn a_refused_lease_preflight_leaves_no_namespace_behind() {
    let Some(env) = grant::rbac_server().await else {
        return;
    };
    // The namespaces' rules but nothing in the demo's namespace: it can create it, and then
    // not even dry-run a Lease there.
    let everything = real::rbac(&[], true).await.expect("the demo's RBAC");
    let cluster_only: kube_informer_runtime::rbac::Rbac = everything
        .permissions()
        .into_iter()
        .filter(|p| p.reach == kube_informer_runtime::rbac::Reach::Cluster)
        .collect();
    let user = "demo-without-leases";
    grant::grant(&env.client(), &cluster_only, user, user).await;
    let plan = real::Plan {
        seconds: 3,
        write: true,
        namespaces: Vec::new(),
        compact: false,
    };
    match real::run(plan, &kubeconfig_as(&env, user), &CancellationToken::new()).await {
        Err(Failure::Error(message)) => assert!(
            message.contains("create a Lease (dry run): forbidden (403)"),
            "{message}"
        ),
        other => panic!("a refused Lease must fail --write: {other:?}"),
    }
    // Deleted (Terminating: kube-envtest has no controller-manager to finish it).
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(env.client());
    let left = namespaces.get_opt(real::DEMO_NAMESPACE).await.unwrap();
    assert!(
        left.is_none_or(|ns| ns.metadata.deletion_timestamp.is_some()),
        "the namespace the run created must be deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn the_demo_runs_with_exactly_the_rbac_it_prints() {
    // Printed, applied with kubectl to a fresh server, and the demo run as the printed
    // ServiceAccount: the server refuses it nothing. A server per run: the second applies
    // the same namespace and names.
    for write in [false, true] {
        let Some(env) = grant::rbac_server().await else {
            return;
        };
        let manifest = real::rbac_manifest(&[], write)
            .await
            .expect("the demo's RBAC");
        let file = env.dir().join(format!("rbac-{write}.yaml"));
        std::fs::write(&file, &manifest).unwrap();
        if write {
            only_its_own_namespace_is_deleted(&manifest);
        }
        apply_as_admin(&env, &file, &manifest).await;
        let user = format!(
            "system:serviceaccount:{}:{}",
            real::DEMO_NAMESPACE,
            real::SERVICE_ACCOUNT
        );
        let rbac = real::rbac(&[], write).await.expect("the demo's RBAC");
        grant::until_authorized(&env.client(), &rbac, &user).await;
        let plan = real::Plan {
            seconds: 3,
            write,
            namespaces: Vec::new(),
            compact: false,
        };
        real::run(plan, &kubeconfig_as(&env, &user), &CancellationToken::new())
            .await
            .unwrap_or_else(|e| panic!("{user} with the printed RBAC (write: {write}): {e:?}"));
        let refused: Vec<_> = env
            .audit_requests()
            .unwrap()
            .into_iter()
            .filter(|e| {
                e.impersonated_user
                    .as_ref()
                    .is_some_and(|u| u.username == user)
            })
            .filter(|e| e.code() == Some(403))
            .map(|e| format!("{} {}", e.verb, e.request_uri))
            .collect();
        assert!(
            refused.is_empty(),
            "write: {write}: the printed RBAC was not enough: {refused:#?}"
        );
    }
}

/// The manifest grants `delete` on namespaces for the demo's own namespace only (by
/// `resourceNames`), never on every namespace.
fn only_its_own_namespace_is_deleted(manifest: &str) {
    let objects: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(manifest).expect("the printed manifest is YAML");
    let deletes: Vec<&serde_json::Value> = objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
        .flat_map(|role| role["rules"].as_array().into_iter().flatten())
        .filter(|rule| {
            let has = |field: &str, value: &str| {
                rule[field]
                    .as_array()
                    .is_some_and(|all| all.iter().any(|v| v == value || v == "*"))
            };
            has("resources", "namespaces") && has("verbs", "delete")
        })
        .collect();
    assert!(
        !deletes.is_empty(),
        "--write deletes its namespace:\n{manifest}"
    );
    for rule in deletes {
        assert_eq!(
            rule["resourceNames"],
            serde_json::json!([real::DEMO_NAMESPACE]),
            "delete on namespaces beyond the demo's own:\n{manifest}"
        );
    }
}

/// `kubectl apply -f file` against `env`, as an admin would. Where kubectl is not installed,
/// the same documents applied one by one, server-side, with the client (said on stderr), so
/// that the check runs on any machine. kubectl runs without client-side validation:
/// kube-envtest's server answers kubectl's OpenAPI download with 503 (the objects are
/// validated by the server anyway).
async fn apply_as_admin(env: &Environment, file: &std::path::Path, manifest: &str) {
    let kubeconfig = format!("--kubeconfig={}", env.kubeconfig_path().display());
    match std::process::Command::new("kubectl")
        .args([kubeconfig.as_str(), "apply", "--validate=false", "-f"])
        .arg(file)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "kubectl apply of --print-rbac failed: {}{}\n{manifest}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("kubectl is not installed: the manifest is applied with the client");
            apply_documents(env, manifest).await;
        }
        Err(e) => panic!("kubectl did not run: {e}"),
    }
}

/// Every document of `manifest`, in order, applied server-side.
async fn apply_documents(env: &Environment, manifest: &str) {
    use kube::{
        api::{DynamicObject, Patch, PatchParams},
        core::GroupVersionKind,
        discovery::pinned_kind,
    };
    let objects: Vec<DynamicObject> =
        serde_saphyr::from_multiple(manifest).expect("the printed manifest is YAML");
    assert!(!objects.is_empty(), "an empty manifest:\n{manifest}");
    let client = env.client();
    for object in objects {
        let types = object.types.clone().expect("apiVersion and kind");
        let gvk = GroupVersionKind::try_from(&types).expect("a group, version and kind");
        let (resource, _) = pinned_kind(&client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("{gvk:?} is not served: {e}"));
        let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            &object.name_any(),
            &PatchParams::apply("e2e-admin"),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} {}: {e}", types.kind, object.name_any()));
    }
}

/// A real API server, or `None` (skipped loudly) without the binaries.
async fn real_server() -> Option<Environment> {
    Environment::start_or_skip(EnvironmentOptions::new())
        .await
        .expect("the real API server starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn the_demo_on_a_real_cluster_reports_writes_and_cleans_up() {
    let Some(env) = real_server().await else {
        return;
    };
    let path = env.kubeconfig_path().to_owned();
    let client = env.client();
    let never = CancellationToken::new();

    let bad = path.with_file_name("bad-kubeconfig");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(env.token(), "not-the-token");
    std::fs::write(&bad, text).unwrap();
    let plan = |write, compact| real::Plan {
        seconds: 3,
        write,
        namespaces: Vec::new(),
        compact,
    };
    match real::run(plan(false, false), &bad, &never).await {
        Err(Failure::Error(message)) => assert!(message.contains("401"), "{message}"),
        other => panic!("a refused token must fail the run: {other:?}"),
    }

    // Over typed and over compact pod caches (`--compact`): the same verdicts.
    for compact in [false, true] {
        real::run(plan(false, compact), &path, &never)
            .await
            .unwrap_or_else(|e| panic!("read-only (compact: {compact}): {e:?}"));
        real::run(plan(true, compact), &path, &never)
            .await
            .unwrap_or_else(|e| panic!("--write (compact: {compact}): {e:?}"));
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), real::DEMO_NAMESPACE);
    let left = deployments.list(&ListParams::default()).await.unwrap();
    assert!(!left.items.is_empty());
    for d in &left.items {
        assert!(
            d.finalizers().is_empty(),
            "{}: {:?}",
            d.name_any(),
            d.finalizers()
        );
    }

    cleanup::run(&path).await.expect("--cleanup");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), real::DEMO_NAMESPACE);
    let ours = config_maps.list(&ListParams::default()).await.unwrap();
    assert!(
        ours.items
            .iter()
            .all(|c| c.name_any() == "kube-root-ca.crt"),
        "{:?}",
        ours.items
    );
    let leases: Api<Lease> = Api::namespaced(client, real::DEMO_NAMESPACE);
    assert!(leases.get_opt(replicas::LEASE).await.unwrap().is_none());

    // The cleaned-up namespace stays Terminating here (no controller-manager): a new --write
    // says so instead of failing on a bare 403 later.
    match real::run(plan(true, false), &path, &never).await {
        Err(Failure::Error(message)) => assert!(message.contains("being deleted"), "{message}"),
        other => panic!("a Terminating namespace must stop --write: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn the_demo_refuses_what_it_cannot_do_and_says_why() {
    let Some(env) = real_server().await else {
        return;
    };
    let path = env.kubeconfig_path().to_owned();
    let never = CancellationToken::new();
    let plan = |write, namespaces: &[&str]| real::Plan {
        seconds: 3,
        write,
        namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        compact: false,
    };

    // A namespace that does not exist is refused, read-only or writing, and --write then
    // has created nothing.
    for write in [false, true] {
        match real::run(plan(write, &["nope"]), &path, &never).await {
            Err(Failure::Error(message)) => {
                assert!(
                    message.contains("namespace nope does not exist"),
                    "{message}"
                )
            }
            other => panic!("--namespace nope must fail the run: {other:?}"),
        }
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(env.client());
    assert!(
        namespaces
            .get_opt(real::DEMO_NAMESPACE)
            .await
            .unwrap()
            .is_none()
    );

    // A closed port names the cause.
    let closed = path.with_file_name("closed-kubeconfig");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(&format!(":{}", env.port()), ":1");
    std::fs::write(&closed, text).unwrap();
    match real::run(plan(false, &[]), &closed, &never).await {
        Err(Failure::Error(message)) => {
            assert!(
                message.to_lowercase().contains("connection refused"),
                "{message}"
            )
        }
        other => panic!("a closed port must fail the run: {other:?}"),
    }

    assert_eq!(verify::plural(1, "namespaces"), "1 namespace");
    assert_eq!(verify::plural(2, "Leases"), "2 Leases");
}
