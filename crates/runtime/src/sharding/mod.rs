//! Sharded controllers: N replicas, each caching and reconciling about 1/N of the objects
//! (issue #27, being built).
//!
//! What is here:
//! - **Placement** that every replica computes alike without talking to the others:
//!   [`ShardKey`] (an object's own key, or its controller's, so an owner and its children
//!   share a shard) and [`Ring`] (a consistent-hash ring over the live shards: a joining
//!   shard takes about 1/N of the keys, a leaving one gives up only its own). Both follow
//!   the kubernetes-controller-sharding project, so its sharder and ours place an object
//!   on the same shard.
//! - **Membership** on Kubernetes itself, no other datastore: each replica holds a shard
//!   Lease ([`shard_lease`], renewed like leader election, stepping down at its renew
//!   deadline) and [`Members`] turns a ring's Leases into the [`Ring`] of live shards. A
//!   replica that cannot renew has stopped before any observer counts it dead (the
//!   argument is in [`Members`]' module docs, tested under random partitions).
//!
//! - **Server-side filtering**: a [`Sharder`] labels each object
//!   `shard.kube-informer.dev/<ring>=<shard>` ([`shard_label`]; children by their
//!   controller's key, [`Placement::Controller`]), and each replica's informers select
//!   their shard's label ([`shard_selectors`]), so the API server sends each replica only
//!   its ~1/N.
//!
//! - **Handover without two shards at once**: an object leaving a live shard is drained
//!   first ([`drain_label`]); the old shard lets go ([`standing`] says `Draining`,
//!   [`acknowledge_drain`] once no reconcile of it runs) before the sharder names the new
//!   one. A dead shard's objects move at once: it stopped reconciling before its Lease
//!   expired.
//!
//! - **The sharder's loop**: [`Sharder::run`] does a round per tick (the live shards, one
//!   metadata LIST from the API server's cache, the labels to write); run one per ring
//!   under leader election. A new object is labelled within a tick.
//!
//! - **A shard's controllers**, with the reconcile function unchanged: run them under the
//!   shard Lease, on informers that select the shard's label, through
//!   [`reconcile_sharded`] (reconciles its own objects, lets go of drained ones, never
//!   takes a move for a deletion). Its docs show the whole assembly.
//!
//! Still to come: `.sharded(ring)` on the manager doing that assembly and electing the
//! sharder in one option, the no-double-reconcile chaos test over random schedules, the
//! benchmark and the three-replica demo.

mod key;
mod membership;
mod reconcile;
mod ring;
mod rounds;
mod sharder;

pub use self::{
    key::ShardKey,
    membership::{Members, RING_LABEL, shard_lease},
    reconcile::reconcile_sharded,
    ring::{Ring, TOKENS_PER_SHARD},
    rounds::{Round, ShardedKind},
    sharder::{
        Applied, Move, Placement, Sharder, Standing, Step, acknowledge_drain, drain_label,
        shard_label, shard_selectors, standing,
    },
};
