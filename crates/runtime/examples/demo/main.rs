//! The kube-informer demo: two replicas of an operator in one process, leader-elected, with
//! two controllers sharing one set of informers, health and metrics endpoints, events, a
//! finalizer — and the leader killed a third of the way through.
//!
//! ```text
//! cargo run --release --example demo                        # a simulated cluster (fake-apiserver)
//! cargo run --release --example demo -- --kubeconfig PATH   # a real cluster (read-only unless --write)
//! cargo run --release --example demo -- --help
//! ```

mod cleanup;
mod cluster;
mod controllers;
mod failure;
mod real;
mod replicas;
mod verify;

use std::{io::IsTerminal, path::PathBuf, process::ExitCode};

use clap::Parser;
use failure::Failure;
use kube_informer_runtime::{CancellationToken, manager::shutdown_signals};

/// Two leader-elected replicas of a controller manager on a churning cluster: the leader is
/// killed a third of the way in, the other takes over, and at the end what the controllers wrote is
/// checked against the server.
#[derive(Debug, Parser)]
#[command(
    name = "demo",
    version,
    after_help = "Logs: warnings and errors go to stderr; RUST_LOG=info (or debug, or \
                  kube_informer=debug) shows more.\n\
                  Ctrl-C (or SIGTERM) shuts the replicas down gracefully: reconciles drain, \
                  the Lease is released, --write's finalizers are removed. A second Ctrl-C \
                  exits at once.\n\
                  Exit status: 0 when the verdict holds; 1 when the cluster cannot be \
                  reached, refuses the credentials or the RBAC, a cache never syncs, no \
                  replica leads, or what was written disagrees with the server; 130 when \
                  interrupted."
)]
pub struct Args {
    /// Use the real cluster of this kubeconfig [default: $KUBECONFIG, if set; else a
    /// simulated cluster]
    #[arg(long, value_name = "PATH", conflicts_with = "fake")]
    kubeconfig: Option<PathBuf>,
    /// Use the simulated cluster (fake-apiserver) even if KUBECONFIG is set
    #[arg(long)]
    fake: bool,
    /// Start a real kube-apiserver and etcd on this machine (kube-envtest, from
    /// KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x` prints it), run
    /// --write there, and stop them at the end
    #[arg(long, conflicts_with_all = ["fake", "kubeconfig", "cleanup"])]
    envtest: bool,
    /// How long to run
    #[arg(long, default_value_t = 16, value_name = "N", value_parser = at_least_two_seconds)]
    seconds: u64,
    /// Pods in the simulated cluster (in Deployments of about ten)
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pods: u64,
    /// The simulated churn's seed: it picks which objects change and how, not when, so two
    /// runs with one seed need not match event for event
    #[arg(long, default_value_t = 1, value_name = "S")]
    seed: u64,
    /// On a real cluster, run two leader-elected replicas of the controllers and kill the
    /// leader: they write annotations, finalizers, ConfigMaps, Events and a Lease, only in
    /// the demo's own namespace (created, with three Deployments) and those named with
    /// --namespace (without --write, the demo only reads)
    #[arg(long)]
    write: bool,
    /// With --write, also work in this existing namespace (repeatable; never kube-*)
    #[arg(long = "namespace", value_name = "NS", value_parser = not_a_system_namespace)]
    namespaces: Vec<String>,
    /// Remove everything any run of the demo wrote on the cluster (its namespace, finalizers,
    /// annotations, ConfigMaps, Events, the Lease), then exit
    #[arg(long, conflicts_with = "write")]
    cleanup: bool,
    /// Cache pods as `Compact<Pod>` (their bytes and parsed metadata: about a quarter of a
    /// typed pod's memory); the controllers decode a pod only for its phase
    #[arg(long)]
    compact: bool,
    /// Keep each replica's caches in DIR/<replica> between runs (docs/warm-restarts.md):
    /// a restart resumes its watches from the snapshots instead of listing every pod. On the
    /// simulated cluster the killed leader comes back from it two thirds of the way in
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Print what to `kubectl apply -f` for this run (with --write: the controllers', the
    /// Lease's, the Events' and the demo's own setup): the namespace kube-informer-demo, the
    /// ServiceAccount kube-informer-demo there, the ClusterRole and Roles, and their
    /// bindings; then exit
    #[arg(long, conflicts_with = "cleanup")]
    print_rbac: bool,
}

fn at_least_two_seconds(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n >= 2 => Ok(n),
        Ok(_) => Err(
            "the demo needs at least 2 seconds (the leader is killed a third of the way in)".into(),
        ),
        Err(e) => Err(format!("not a number of seconds: {e}")),
    }
}

fn not_a_system_namespace(text: &str) -> Result<String, String> {
    if text.starts_with("kube-") {
        return Err(format!(
            "{text}: the demo never writes into kube-* namespaces"
        ));
    }
    Ok(text.to_owned())
}

impl Args {
    /// The kubeconfig to use, if any: the flag, else `$KUBECONFIG` (unless `--fake`).
    fn kubeconfig(&self) -> Option<PathBuf> {
        if self.fake {
            return None;
        }
        self.kubeconfig.clone().or_else(|| {
            std::env::var_os("KUBECONFIG")
                .filter(|k| !k.is_empty())
                .map(PathBuf::from)
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // Warnings and errors by default (a 403 on a reconcile or on the Lease shows); colours
    // only on a terminal.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // kube_client logs a failed connection itself; the demo reports it with the
                // cause, once.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("warn,kube_client::client::builder=off")
                }),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    // The first Ctrl-C/SIGTERM cancels `graceful` (the run winds down and says so), the
    // second `force` (exit at once).
    let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
    let run = async {
        match args.kubeconfig() {
            _ if args.print_rbac => real::print_rbac(&args.namespaces, args.write).await,
            _ if args.envtest => {
                let plan = real::Plan {
                    seconds: args.seconds,
                    write: true,
                    namespaces: args.namespaces.clone(),
                    compact: args.compact,
                };
                real::on_envtest(plan, &graceful).await
            }
            Some(path) if args.cleanup => cleanup::run(&path).await,
            Some(path) => {
                let plan = real::Plan {
                    seconds: args.seconds,
                    write: args.write,
                    namespaces: args.namespaces.clone(),
                    compact: args.compact,
                };
                real::run(plan, &path, &graceful).await
            }
            None if args.cleanup => {
                Err("--cleanup needs a real cluster (--kubeconfig or KUBECONFIG)".into())
            }
            None => {
                let plan = replicas::Plan {
                    pods: args.pods,
                    seconds: args.seconds,
                    seed: args.seed,
                    compact: args.compact,
                    cache_dir: args.cache_dir.clone(),
                };
                replicas::simulated_cluster(plan, &graceful).await
            }
        }
    };
    let outcome = tokio::select! {
        outcome = run => outcome,
        () = shutdown_signals(graceful.clone(), force.clone()) => unreachable!("it never returns"),
        () = force.cancelled() => {
            match args.kubeconfig() {
                Some(_) if args.write => eprintln!(
                    "second interrupt: exiting at once; the demo's finalizers may remain on its \
                     Deployments (run again with --cleanup to remove them and everything else \
                     it wrote)"
                ),
                _ => eprintln!("second interrupt: exiting at once"),
            }
            return ExitCode::from(130);
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Interrupted) => {
            eprintln!("interrupted: the replicas shut down gracefully");
            ExitCode::from(130)
        }
        Err(Failure::Error(message)) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
