//! # kube-informer-runtime
//!
//! What it takes to run a real operator, on top of [kube-informer](kube_informer)'s shared
//! informers and work queues: controller-runtime's and kube-runtime's parts, in one place.
//!
//! ## A first operator
//!
//! One controller that stamps every ConfigMap, in a [`Manager`] with health and metrics
//! endpoints on `:8081`, leader election, and a graceful shutdown on SIGTERM or Ctrl-C:
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::{Api, ResourceExt, api::{Patch, PatchParams}};
//! use kube_informer_runtime::{
//!     Action, Cached, ControllerOptions, LeaderElectionConfig, Manager, ManagerOptions,
//! };
//!
//! async fn reconcile(cm: Cached<ConfigMap>, client: Arc<kube::Client>) -> Result<Action, kube::Error> {
//!     let Cached::Present(cm) = cm else { return Ok(Action::Done) }; // deleted
//!     if cm.annotations().contains_key("example.com/seen") {
//!         return Ok(Action::Done);
//!     }
//!     let api: Api<ConfigMap> = Api::namespaced((*client).clone(), &cm.namespace().unwrap_or_default());
//!     let patch = serde_json::json!({"metadata": {"annotations": {"example.com/seen": "yes"}}});
//!     api.patch(&cm.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
//!     Ok(Action::Done)
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // The manager reports through `tracing`: without a subscriber it is silent.
//!     tracing_subscriber::fmt()
//!         .with_env_filter(
//!             tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
//!         )
//!         .init();
//!     let client = kube::Client::try_default().await?;
//!     let options = ManagerOptions::default().leader_election(LeaderElectionConfig::new("stamper"));
//!     let mut manager = Manager::new(client.clone(), options).await?;
//!     let controller = manager.controller::<ConfigMap>(ControllerOptions::default().name("stamper"));
//!     manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(client));
//!     manager.run().await?; // until SIGTERM/Ctrl-C; drains, releases the Lease
//!     Ok(())
//! }
//! ```
//!
//! The [testing guide](testing_guide)
//! runs the same controller in a `#[tokio::test]` on fake-apiserver, then on a real API
//! server with `kube-envtest`; `cargo run --example demo` runs two replicas of a larger one.
//!
//! - [`controller`]: a [`Controller`] of one kind, with owned
//!   children, watched objects, predicates, a typed reconcile input
//!   ([`Cached`]), an error policy, a context, metrics with
//!   controller-runtime's names, and a span per reconcile.
//! - [`finalizer`]: cleanup before deletion, idempotent under retries.
//! - [`events`]: a [`Recorder`](events::Recorder) of `events.k8s.io/v1` Events with
//!   client-go's aggregation and spam filter.
//! - [`lease`] and [`leader_election`]: client-go's Lease-based election.
//! - [`manager`]: the [`Manager`] that runs it all, with `/healthz`,
//!   `/readyz`, `/metrics`, leader gating and graceful shutdown.
//! - `webhook` (feature `webhook`, on by default): admission and conversion webhooks over
//!   HTTPS, with typed handlers and a certificate reloaded as it rotates (`tls`).
//! - [`sharding`]: N replicas each caching and reconciling ~1/N of the objects
//!   ([`ManagerOptions::sharded`]), never two on one object at once.
//!
//! The informer core (kube-informer) stays free of HTTP servers and signal handling: they
//! live here, with the manager.
//!
//! # The guarantee, and its limits
//!
//! With leader election on, **two replicas never reconcile at once**: the instant a leader
//! can no longer prove it leads (its renew deadline, counted from the start of its last
//! successful renewal, has passed), its manager cancels every reconcile in flight, awaits
//! them, and returns [`ManagerError::LeadershipLost`] — at least
//! `lease_duration − renew_deadline` (≥ 1 s, checked by
//! [`LeaderElectionConfig::validate`]) before another replica may acquire the Lease.
//! Dropping a manager's future (a killed task) stops everything it started.
//!
//! The limits: a reconcile is cancelled at its next `.await`, so it must be cancel-safe
//! (as controller-runtime's context cancellation implies); blocking code is not
//! interrupted, and an elector starved by it makes `/healthz` fail so the kubelet restarts
//! the pod. Shutdown keeps one deadline ([`ManagerOptions::shutdown_timeout`]): drain,
//! cancel what still runs, stop informers, release the Lease last and only if every
//! reconcile stopped; a second signal stops at once.
//!
//! The names most programs need are re-exported here; [`kube_informer`] itself is too, so
//! one dependency line brings both.

pub mod controller;
pub mod events;
pub mod finalizer;
pub mod fleet;
pub mod leader_election;
pub mod lease;
pub mod manager;
pub mod process_metrics;
pub mod rbac;
pub mod reconcile;
pub mod rest_metrics;
pub mod sharding;
#[cfg(feature = "opentelemetry")]
pub mod telemetry;
#[cfg(feature = "tls")]
pub mod tls;
mod util;
pub mod wait;
#[cfg(feature = "webhook")]
pub mod webhook;

pub use kube_informer;
pub use tokio_util::sync::CancellationToken;

pub use crate::{
    controller::{Controller, ControllerOptions},
    leader_election::LeaderElectionConfig,
    manager::{Manager, ManagerError, ManagerOptions},
    reconcile::{Action, Cached, Reconciler},
};

// The README's examples are compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The testing guide (`docs/testing.md`), here so that it is read beside the API and its
/// examples are compiled as doctests.
pub mod testing_guide {
    #![doc = include_str!("../docs/testing.md")]
}

// And the operations guide's manager setup.
#[doc = include_str!("../../../docs/operations.md")]
#[cfg(doctest)]
pub struct OperationsDoctests;

// And the fleet guide's worked example.
#[doc = include_str!("../../../docs/multicluster.md")]
#[cfg(doctest)]
pub struct MulticlusterDoctests;

// So is the migration guide's kube-informer program.
#[doc = include_str!("../../../docs/coming-from-kube-rs.md")]
#[cfg(doctest)]
pub struct ComingFromKubeRsDoctests;
