//! `kube-envtest run`: a real API server from one command, reachable through the kubeconfig
//! it prints, with RBAC when asked; Ctrl-C (SIGINT) stops it and leaves nothing behind.
//! Skipped loudly without `KUBEBUILDER_ASSETS` (a failure with `KUBE_ENVTEST_REQUIRED=1`).
#![cfg(feature = "cli")]

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use k8s_openapi::api::{core::v1::Namespace, rbac::v1::ClusterRole};
use kube::{
    Api,
    api::ListParams,
    config::{KubeConfigOptions, Kubeconfig},
};
use kube_envtest::Assets;
use nix::{sys::signal::Signal, unistd::Pid};

/// A line of the child's output, or a panic after a minute (a guard against a hang).
fn next_line(lines: &mpsc::Receiver<String>, what: &str) -> String {
    lines
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("kube-envtest run printed no {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_a_real_api_server_until_interrupted_and_leaves_nothing_behind() {
    let Some(assets) = Assets::from_env_or_skip("run_serves_a_real_api_server") else {
        return;
    };
    let kubeconfig = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("run-command-{}.kubeconfig", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-envtest"))
        .args(["run", "--rbac", "--kubeconfig"])
        .arg(&kubeconfig)
        .env(kube_envtest::ASSETS_ENV, assets.dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the kube-envtest binary");
    let (out_tx, out) = mpsc::channel();
    let (err_tx, err) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let readers = [
        std::thread::spawn(move || {
            stdout
                .lines()
                .map_while(Result::ok)
                .for_each(|l| drop(out_tx.send(l)))
        }),
        std::thread::spawn(move || {
            stderr
                .lines()
                .map_while(Result::ok)
                .for_each(|l| drop(err_tx.send(l)))
        }),
    ];

    // Only the export line goes to stdout, for `eval`.
    let export = next_line(&out, "export line");
    assert_eq!(
        export,
        format!("export KUBECONFIG={}", kubeconfig.display())
    );
    let started = next_line(&err, "start line");
    let folder = started
        .split("logs in ")
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no folder in {started:?}"));
    assert!(started.contains("RBAC authorization"), "{started}");
    assert!(folder.is_dir());

    // The kubeconfig reaches it, as an admin, with RBAC's default roles in place.
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let namespaces = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        namespaces
            .items
            .iter()
            .any(|ns| ns.metadata.name.as_deref() == Some("default"))
    );
    let roles = Api::<ClusterRole>::all(client);
    assert!(
        roles.get_opt("cluster-admin").await.unwrap().is_some(),
        "RBAC's bootstrap roles"
    );

    // Ctrl-C: it stops, exits 0, and removes its processes' folder and the kubeconfig.
    nix::sys::signal::kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let (done_tx, done) = mpsc::channel();
    let waiter = std::thread::spawn(move || drop(done_tx.send(child.wait())));
    let status = done
        .recv_timeout(Duration::from_secs(60))
        .expect("kube-envtest run did not stop on Ctrl-C")
        .unwrap();
    assert!(status.success(), "{status}");
    waiter.join().unwrap();
    for reader in readers {
        reader.join().unwrap();
    }
    assert!(!kubeconfig.exists(), "the kubeconfig it wrote is removed");
    assert!(!folder.exists(), "the environment's folder is removed");
}
