//! # kube-informer-runtime
//!
//! What it takes to run a real operator, on top of [kube-informer](kube_informer)'s shared
//! informers and work queues: controller-runtime's and kube-runtime's parts, in one place.
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
pub mod leader_election;
pub mod lease;
pub mod manager;

pub use kube_informer;
pub use tokio_util::sync::CancellationToken;

pub use crate::{
    controller::{Action, Cached, Controller, ControllerOptions},
    leader_election::LeaderElectionConfig,
    manager::{Manager, ManagerError, ManagerOptions},
};

// The README's examples are compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

// So is the migration guide's kube-informer program.
#[doc = include_str!("../../../docs/coming-from-kube-rs.md")]
#[cfg(doctest)]
pub struct ComingFromKubeRsDoctests;
