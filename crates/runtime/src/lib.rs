//! # kube-informer-runtime
//!
//! What it takes to run a real operator, on top of [kube-informer](kube_informer)'s shared
//! informers and work queues: controller-runtime's and kube-runtime's parts, in one place.
//!
//! - [`controller`]: a [`Controller`](controller::Controller) of one kind, with owned
//!   children, watched objects, predicates, a typed reconcile input
//!   ([`Cached`](controller::Cached)), an error policy, a context, metrics with
//!   controller-runtime's names, and a span per reconcile.
//! - [`finalizer`]: cleanup before deletion, idempotent under retries.
//! - [`events`]: a [`Recorder`](events::Recorder) of `events.k8s.io/v1` Events with
//!   client-go's aggregation and spam filter.
//! - [`lease`] and [`leader_election`]: client-go's Lease-based election.
//! - [`manager`]: the [`Manager`](manager::Manager) that runs it all, with `/healthz`,
//!   `/readyz`, `/metrics`, leader gating and graceful shutdown.
//!
//! The informer core (kube-informer) stays free of HTTP servers and signal handling: they
//! live here, with the manager.

pub mod controller;
pub mod events;
pub mod finalizer;
pub mod leader_election;
pub mod lease;
pub mod manager;

// The README's examples are compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

// So is the migration guide's kube-informer program.
#[doc = include_str!("../../../docs/coming-from-kube-rs.md")]
#[cfg(doctest)]
pub struct ComingFromKubeRsDoctests;
