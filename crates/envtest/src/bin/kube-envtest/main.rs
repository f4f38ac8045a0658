//! `kube-envtest install [VERSION]`: kube-apiserver and etcd for tests, from the release index
//! controller-tools publishes for envtest (what controller-runtime's `setup-envtest` reads),
//! checked against their SHA-512 and cached; prints the `export KUBEBUILDER_ASSETS=...` line.
//!
//! `kube-envtest run [VERSION]`: a real API server (kube-apiserver + etcd) on this machine
//! until Ctrl-C, with a kubeconfig for kubectl, the demo or your operator; nothing is left
//! behind when it stops.
//!
//! ```text
//! eval "$(kube-envtest install 1.36.x)"     # then: cargo test
//! kube-envtest install --print path latest  # just the folder
//! kube-envtest run 1.36.x --rbac            # then, in another shell: export KUBECONFIG=...
//! ```

mod run;

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand, ValueEnum};
use kube_envtest::{ASSETS_ENV, Installer, RELEASE_INDEX};

#[derive(Debug, Parser)]
#[command(
    name = "kube-envtest",
    version,
    about = "kube-apiserver and etcd for tests, installed and cached"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Install (or find in the cache) a version, and print how to use it
    Install {
        /// `1.36.2`, `1.36.x` (the newest patch of 1.36) or `latest`
        #[arg(default_value = "latest")]
        version: String,
        /// The release index to read
        #[arg(long, value_name = "URL", default_value = RELEASE_INDEX)]
        index_url: String,
        /// The cache folder [default: $KUBE_ENVTEST_CACHE, else setup-envtest's:
        /// $XDG_DATA_HOME/kubebuilder-envtest or ~/.local/share/kubebuilder-envtest]
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
        /// What to print
        #[arg(long, value_enum, default_value_t = Print::Env)]
        print: Print,
    },
    /// Run a real API server (kube-apiserver + etcd) until Ctrl-C, and print how to reach it
    Run(run::RunArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Print {
    /// `export KUBEBUILDER_ASSETS=<folder>`, for `eval`
    Env,
    /// The folder alone
    Path,
}

fn main() -> ExitCode {
    match Args::parse().command {
        Command::Install {
            version,
            index_url,
            cache_dir,
            print,
        } => install(version, index_url, cache_dir, print),
        Command::Run(args) => run::run(args),
    }
}

fn install(
    version: String,
    index_url: String,
    cache_dir: Option<PathBuf>,
    print: Print,
) -> ExitCode {
    let mut installer = Installer::new().index_url(index_url);
    if let Some(dir) = cache_dir {
        installer = installer.cache_dir(dir);
    }
    match installer.install(&version) {
        Ok(assets) => {
            let dir = assets.dir().display();
            match print {
                Print::Env => println!("export {ASSETS_ENV}={dir}"),
                Print::Path => println!("{dir}"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kube-envtest: {e}");
            ExitCode::FAILURE
        }
    }
}
