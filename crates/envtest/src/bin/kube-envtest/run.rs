//! `kube-envtest run`: a real API server until Ctrl-C (or SIGTERM), its kubeconfig printed
//! as an `export KUBECONFIG=...` line; stopping removes the processes, their folder and the
//! kubeconfig it wrote.

use std::{path::PathBuf, process::ExitCode};

use clap::Args;
use kube_envtest::{ASSETS_ENV, Assets, Environment, EnvironmentOptions, Installer, RELEASE_INDEX};

/// What `kube-envtest run` takes.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The version when `KUBEBUILDER_ASSETS` is not set: `1.36.2`, `1.36.x` or `latest`
    /// (installed and cached as `kube-envtest install` does)
    #[arg(default_value = "latest")]
    version: String,
    /// Also write the kubeconfig here (removed on exit) [default: only inside the
    /// environment's own folder]
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Authorize requests with RBAC (`--authorization-mode=RBAC`), as a cluster does; the
    /// kubeconfig's user stays an admin (group `system:masters`)
    #[arg(long)]
    rbac: bool,
    /// An extra kube-apiserver flag, e.g. `--apiserver-arg=--feature-gates=...` (repeatable;
    /// `--name=value` replaces the environment's own flag of that name)
    #[arg(
        long = "apiserver-arg",
        value_name = "FLAG",
        allow_hyphen_values = true
    )]
    apiserver_args: Vec<String>,
    /// The release index to install from
    #[arg(long, value_name = "URL", default_value = RELEASE_INDEX)]
    index_url: String,
}

/// Starts the environment, prints how to reach it, and waits for Ctrl-C.
pub(crate) fn run(args: RunArgs) -> ExitCode {
    let assets = match assets(&args) {
        Ok(assets) => assets,
        Err(message) => {
            eprintln!("kube-envtest: {message}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("kube-envtest: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args, assets)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("kube-envtest: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The binaries: `KUBEBUILDER_ASSETS`'s when set, else `args.version` installed.
fn assets(args: &RunArgs) -> Result<Assets, String> {
    if std::env::var_os(ASSETS_ENV).is_some_and(|v| !v.is_empty()) {
        return Assets::from_env().map_err(|e| format!("{ASSETS_ENV}: {e}"));
    }
    eprintln!(
        "kube-envtest: {ASSETS_ENV} is not set; installing {} (cached after the first time)",
        args.version
    );
    Installer::new()
        .index_url(args.index_url.clone())
        .install(&args.version)
        .map_err(|e| e.to_string())
}

async fn serve(args: RunArgs, assets: Assets) -> Result<(), String> {
    let mut options = EnvironmentOptions::new().assets(assets);
    if args.rbac {
        options = options.apiserver_arg("--authorization-mode=RBAC");
    }
    for flag in &args.apiserver_args {
        options = options.apiserver_arg(flag.clone());
    }
    let env = Environment::start(options)
        .await
        .map_err(|e| format!("the API server did not start: {e}"))?;
    let kubeconfig = match &args.kubeconfig {
        Some(path) => {
            env.write_kubeconfig(path)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            path.clone()
        }
        None => env.kubeconfig_path().to_owned(),
    };
    eprintln!(
        "kube-envtest: kube-apiserver at {} ({}authorization; etcd at {}); logs in {}",
        env.url(),
        if args.rbac { "RBAC " } else { "no " },
        env.etcd_url(),
        env.dir().display(),
    );
    eprintln!("kube-envtest: running until Ctrl-C; in another shell:");
    println!("export KUBECONFIG={}", kubeconfig.display());
    let stopped = stop_signal().await;
    eprintln!("kube-envtest: {stopped}: stopping and removing everything");
    if args.kubeconfig.is_some() {
        let _ = std::fs::remove_file(&kubeconfig);
    }
    drop(env); // kills both processes, waits for them, removes their folder
    Ok(())
}

/// Waits for Ctrl-C (SIGINT) or SIGTERM; says which.
async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return "interrupted";
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "interrupted",
        _ = term.recv() => "terminated",
    }
}
