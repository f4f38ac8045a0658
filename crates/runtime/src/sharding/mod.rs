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
//! Still to come, in this order: the elected sharder that labels each object with its
//! shard, per-shard informers filtered by that label, the drain handover that keeps two
//! replicas from ever reconciling one object at once, and `.sharded(ring)` on the manager.

mod key;
mod membership;
mod ring;

pub use self::{
    key::ShardKey,
    membership::{Members, RING_LABEL, shard_lease},
    ring::{Ring, TOKENS_PER_SHARD},
};
