//! Sharded controllers in one process: three replicas of one manager split 300 ConfigMaps
//! (each caches and reconciles only its share), replica-c is killed and the others take its
//! objects once its Lease expires, replica-d joins and takes its share through the drain
//! handover; objects change all along. At the end the demo checks that every object is with
//! a live replica, that the caches are disjoint and complete, and that no object was ever
//! reconciled by two replicas at once.
//!
//! ```text
//! cargo run --example sharding                          # on the embedded fake-apiserver
//! cargo run --example sharding -- --kubeconfig PATH     # on a real cluster (or $KUBECONFIG)
//! cargo run --example sharding -- --print-rbac          # the Role a replica needs
//! ```
//!
//! On a real cluster it works in a namespace of its own, `kube-informer-sharding-demo`, which
//! it creates and deletes at the end (RBAC: namespaces create/delete; ConfigMaps and Leases
//! there).

mod demo;

use std::{path::PathBuf, process::ExitCode};

use fake_apiserver::{FakeApiServer, ServerConfig};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};

const NAMESPACE: &str = "kube-informer-sharding-demo";

/// The kubeconfig asked for: `--kubeconfig PATH`, else `$KUBECONFIG`, unless `--fake`.
fn kubeconfig() -> Result<Option<PathBuf>, String> {
    let mut args = std::env::args().skip(1);
    let mut path = None;
    let mut fake = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--kubeconfig" => {
                path = Some(PathBuf::from(
                    args.next().ok_or("--kubeconfig needs a path")?,
                ));
            }
            "--fake" => fake = true,
            "--print-rbac" => {}
            other => {
                return Err(format!(
                    "unknown argument {other:?} (--kubeconfig PATH, --fake, --print-rbac)"
                ));
            }
        }
    }
    if fake {
        return Ok(None);
    }
    Ok(path.or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from)))
}

async fn real_client(path: &std::path::Path) -> Result<kube::Client, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| format!("kubeconfig {} is not usable: {e}", path.display()))?;
    kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))
}

async fn on_real_cluster(path: &std::path::Path) -> Result<(), String> {
    let client = real_client(path).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))
            .expect("a Namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(|e| {
            format!(
                "cannot create namespace {NAMESPACE} (left from an earlier run? delete it): {e}"
            )
        })?;
    println!(
        "on the cluster of {}, in namespace {NAMESPACE}",
        path.display()
    );
    let ran = demo::run(&client, NAMESPACE).await;
    let cleaned = namespaces
        .delete(NAMESPACE, &DeleteParams::default())
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot delete namespace {NAMESPACE}: {e}"));
    ran.and(cleaned)
}

async fn on_fake_apiserver() -> Result<(), String> {
    let server = FakeApiServer::start(ServerConfig::default().namespaces([NAMESPACE]))
        .await
        .map_err(|e| format!("fake-apiserver: {e}"))?;
    let client = server.client().map_err(|e| e.to_string())?;
    println!("on the embedded fake-apiserver");
    let ran = demo::run(&client, NAMESPACE).await;
    server.shutdown().await;
    ran
}

#[tokio::main]
async fn main() -> ExitCode {
    let ran = match kubeconfig() {
        Err(usage) => Err(usage),
        Ok(_) if std::env::args().any(|a| a == "--print-rbac") => demo::rbac(NAMESPACE)
            .await
            .map(|rbac| print!("{}", rbac.yaml("sharding-demo"))),
        Ok(Some(path)) => on_real_cluster(&path).await,
        Ok(None) => on_fake_apiserver().await,
    };
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            println!("sharding demo FAILED: {problem}");
            ExitCode::FAILURE
        }
    }
}
