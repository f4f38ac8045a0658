//! The kube-informer demo: two replicas of an operator in one process, leader-elected, with
//! two controllers sharing one set of informers, health and metrics endpoints, events, a
//! finalizer — and the leader killed a third of the way through.
//!
//! ```text
//! cargo run --release --example demo                        # a simulated cluster (fake-apiserver)
//! cargo run --release --example demo -- --kubeconfig PATH   # a real cluster (read-only unless --write)
//! cargo run --release --example demo -- --help
//! ```

mod cluster;
mod controllers;
mod replicas;
mod verify;

use std::{path::PathBuf, process::ExitCode};

use clap::Parser;

/// Two leader-elected replicas of a controller manager on a churning cluster: the leader is
/// killed a third of the way in, the other takes over, and at the end what the controllers wrote is
/// checked against the server.
#[derive(Debug, Parser)]
#[command(name = "demo", version)]
pub struct Args {
    /// Use the real cluster of this kubeconfig [default: $KUBECONFIG, if set; else a
    /// simulated cluster]
    #[arg(long, value_name = "PATH", conflicts_with = "fake")]
    kubeconfig: Option<PathBuf>,
    /// Use the simulated cluster (fake-apiserver) even if KUBECONFIG is set
    #[arg(long)]
    fake: bool,
    /// How long to run
    #[arg(long, default_value_t = 16, value_name = "N", value_parser = clap::value_parser!(u64).range(2..))]
    seconds: u64,
    /// Pods in the simulated cluster (in Deployments of about ten)
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pods: u64,
    /// The simulated churn's seed
    #[arg(long, default_value_t = 1, value_name = "S")]
    seed: u64,
    /// On a real cluster, run the controllers: they write annotations and finalizers on
    /// Deployments, ConfigMaps, Events and a Lease (without it, the demo only reads)
    #[arg(long)]
    write: bool,
    /// The namespace of the leader-election Lease on a real cluster
    #[arg(long, default_value = "default", value_name = "NS")]
    lease_namespace: String,
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // The demo prints every failure itself; RUST_LOG=info (or debug) shows logs.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let outcome = match args.kubeconfig() {
        Some(path) => {
            let plan = replicas::RealPlan {
                seconds: args.seconds,
                write: args.write,
                lease_namespace: args.lease_namespace.clone(),
            };
            replicas::real_cluster(plan, &path).await
        }
        None => {
            let plan = replicas::Plan {
                pods: args.pods,
                seconds: args.seconds,
                seed: args.seed,
            };
            replicas::simulated_cluster(plan).await
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}
