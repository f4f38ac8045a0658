//! A real `kube-apiserver` and `etcd` on loopback, for tests: an "envtest" harness that needs
//! nothing but the two binaries.
//!
//! # What it is for
//!
//! - **Our tests**: kube-informer's behaviour against the real server (resource versions,
//!   streaming lists, bookmarks, `410 Gone` after compaction, an apiserver restart, a network
//!   partition), checked in the audit log, where fake-apiserver can only imitate.
//! - **Your controller's tests**: a real API server with real validation, defaulting,
//!   `resourceVersion` semantics and watches, in a few seconds, with no cluster, no
//!   container runtime and no Go toolchain. There is no scheduler and no controller-manager:
//!   pods stay `Pending`, namespaces stay `Terminating`, no service-account tokens appear
//!   (the `ServiceAccount` admission plugin is off for that reason).
//!
//! # Getting the binaries
//!
//! [`Environment`] finds `kube-apiserver` and `etcd` in the folder named by
//! `KUBEBUILDER_ASSETS`, the ecosystem's convention, or in the folder given with
//! [`EnvironmentOptions::assets`]. Ways to fill it:
//!
//! - this crate's installer: `cargo install --path crates/envtest` from a checkout (it is not
//!   on crates.io yet), then
//!   `eval "$(kube-envtest install 1.36.x)"` downloads them from the release index
//!   controller-tools publishes for envtest, checks their SHA-512, caches them (in
//!   `setup-envtest`'s folder, so either tool's downloads serve both) and prints the
//!   `export` line; from code, [`Installer`] (feature `install`, on by default);
//! - controller-runtime's `setup-envtest use -p path 1.36.x` (a Go tool) does the same.
//!
//! Tests should start with [`Environment::start_or_skip`]: without the binaries it prints a
//! prominent `SKIPPED` banner (past the test harness's capture) and returns `None`; with
//! `KUBE_ENVTEST_REQUIRED=1`, as CI sets, it panics instead, so the real-server tests can
//! never be skipped silently.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use futures_util::StreamExt as _;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams, WatchEvent, WatchParams};
//! use kube_envtest::{Environment, EnvironmentOptions};
//!
//! #[tokio::test]
//! async fn my_controller_survives_a_restart() -> Result<(), Box<dyn std::error::Error>> {
//!     let options = EnvironmentOptions::new().compaction_interval(Duration::from_secs(10));
//!     let Some(mut env) = Environment::start_or_skip(options).await? else { return Ok(()) };
//!
//!     let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
//!     let mut cm = ConfigMap::default();
//!     cm.metadata.name = Some("settings".into());
//!     let created = cms.create(&PostParams::default(), &cm).await?;
//!
//!     // The request is in the audit log, with its query parameters.
//!     let event = env
//!         .wait_for_audit_event(Duration::from_secs(5), |e| {
//!             e.verb == "create" && e.name() == Some("settings")
//!         })
//!         .await?;
//!     assert_eq!(event.code(), Some(201));
//!
//!     // Same port, same data: clients reconnect by themselves.
//!     env.restart_apiserver().await?;
//!     assert_eq!(cms.get("settings").await?.metadata.uid, created.metadata.uid);
//!
//!     // A partition: the watch through the proxy goes silent, and comes back on heal.
//!     let through_proxy: Api<ConfigMap> = Api::namespaced(env.partitionable_client(), "default");
//!     let mut watch = through_proxy.watch(&WatchParams::default(), "0").await?.boxed();
//!     env.proxy().partition();
//!     // ... assert your controller copes ...
//!     env.proxy().heal();
//!     while let Some(event) = watch.next().await {
//!         if let WatchEvent::Added(cm) = event? { println!("{:?}", cm.metadata.name); }
//!         break;
//!     }
//!     Ok(()) // dropping `env` kills both processes and removes its folder
//! }
//! ```
//!
//! # What the environment runs
//!
//! etcd (one member, `--unsafe-no-fsync`) and kube-apiserver on free `127.0.0.1` ports, in a
//! private temp folder, with in-process generated ECDSA P-256 keys: a CA, a serving
//! certificate for `127.0.0.1`/`::1`/`localhost` signed by it, and a service-account signing
//! key pair (TokenRequest works). Authentication is one random bearer token (user `admin`,
//! group `system:masters`), authorization `AlwaysAllow`. The audit log records every
//! request at level `Metadata` ([`audit`] explains the stages to filter on). Each process's
//! output goes to a log file in the folder; start errors quote its last lines.
//!
//! Faults: [`Environment::stop_apiserver`], [`Environment::terminate_apiserver`] (SIGTERM:
//! the old process stops listening but lingers, still serving the watches it has open, as
//! in a rollout),
//! [`Environment::kill_apiserver`], [`Environment::start_apiserver`] and
//! [`Environment::restart_apiserver`] (same port, same data), and a TCP [`Proxy`] that
//! partitions the network.
//!
//! # Compared with the other envtests
//!
//! - controller-runtime's `pkg/envtest` (Go) is the model: same binaries, same
//!   `KUBEBUILDER_ASSETS`, same idea of flags. Both install an operator's CRDs and webhook
//!   configurations from files ([`EnvironmentOptions::crds`], [`EnvironmentOptions::webhooks`]),
//!   wait until the CRDs are served, and point the webhooks at a local server
//!   ([`Environment::local_webhooks`]). It can also attach to an existing cluster; this
//!   crate cannot. It adds what informer tests need: the audit log parsed, restarts on the
//!   same port, and network partitions.
//! - kube-rs's `envtest` crate wraps controller-runtime's Go code through cgo, so building it
//!   needs a Go toolchain; this crate is plain Rust and needs only the two binaries at run
//!   time.
//!
//! # Cleanup
//!
//! Dropping an [`Environment`] (also on a test's panic) kills etcd and kube-apiserver with
//! SIGKILL, waits until they have exited, and removes the folder
//! ([`EnvironmentOptions::keep_dir`] keeps it for debugging). The child processes are also
//! spawned with tokio's `kill_on_drop`. If the test binary itself is killed with SIGKILL,
//! no destructor runs and the children outlive it (`pgrep -a kube-apiserver` finds them).
//! Keep an environment in a local variable, not in a `static`: statics are never dropped.

pub mod audit;

mod apiserver;
mod assets;
mod environment;
mod error;
mod etcd;
mod faults;
#[cfg(feature = "install")]
mod install;
mod kubeconfig;
mod manifests;
mod options;
mod pki;
mod process;
mod proxy;
mod tempdir;

pub use assets::{ASSETS_ENV, Assets, AssetsError, REQUIRED_ENV, required_by_env};
pub use audit::AuditEvent;
pub use environment::Environment;
pub use error::{Error, LogTail};
#[cfg(feature = "install")]
pub use install::{InstallError, Installer, NetworkTimeouts, RELEASE_INDEX};
pub use manifests::{LocalWebhooks, Manifest};
pub use options::EnvironmentOptions;
pub use pki::ServingCerts;
pub use proxy::{Proxy, TcpProxy};

// The README's example is compiled as a doctest, so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
