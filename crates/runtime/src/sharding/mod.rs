//! Sharded controllers: N replicas, each caching and reconciling about 1/N of the objects,
//! with Kubernetes itself as the coordinator (Leases and labels, no other datastore).
//!
//! # Turning it on
//!
//! One option on the manager, and the reconcile function does not change:
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
//! use kube_informer_runtime::{Action, Cached, ControllerOptions, Manager, ManagerOptions};
//!
//! async fn reconcile(d: Cached<Deployment>, _ctx: Arc<()>) -> Result<Action, kube::Error> {
//!     Ok(Action::Done) // exactly as without sharding
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let me = std::env::var("POD_NAME")?; // unique and stable: a StatefulSet's pod name
//! let client = kube::Client::try_default().await?;
//! let options = ManagerOptions::default().sharded("deployments", me);
//! let mut manager = Manager::new(client, options).await?;
//! let controller = manager
//!     .controller::<Deployment>(ControllerOptions::default().name("deployments"))
//!     .owns::<ReplicaSet>(); // children follow their owner to its shard
//! manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(()));
//! manager.run().await?;
//! # Ok(()) }
//! ```
//!
//! The [sharding page](https://github.com/kube-informer/kube-informer/blob/main/docs/sharding.md)
//! explains the design, its guarantees, its timing and its limits at more length.
//!
//! # How it works, and what it guarantees
//!
//! - **Membership**: each replica holds its shard Lease `<ring>-<shard>` ([`shard_lease`],
//!   labelled [`RING_LABEL`]), renewed as leader election renews; its controllers run only
//!   while it holds it and are halted the moment it cannot renew. [`LiveShards`] turns the
//!   ring's Leases into the [`Ring`] of live shards, counting a Lease alive while it
//!   changed within its duration *on the observer's clock*; so a replica that cannot renew
//!   has stopped `lease − renew` (≥ 1 s) before anyone counts it dead.
//! - **Placement**: [`ShardKey`] is an object's `group/kind/namespace/name`, or its
//!   controller's for an owned child, so a family shares a shard; [`Ring`] is a
//!   consistent-hash ring (XXH64, 1000 points per shard: every share within 7% of 1/N):
//!   a joining shard takes ~1/N of the objects and only for itself, a leaving one gives up
//!   only its own.
//! - **Server-side filtering**: one replica, elected on `<ring>-sharder`, labels every
//!   object of the sharded kinds `shard.kube-informer.dev/<ring>=<shard>` ([`Sharder`],
//!   [`shard_label`]) from a slim metadata cache of its own: a new object as soon as its
//!   event arrives, and every object again each
//!   [`sharding_period`](crate::ManagerOptions::sharding_period) (5 s) against the live
//!   shards. Each replica's informers select their label ([`shard_selectors`]), so its
//!   cache, its watch traffic and its reconciles are ~1/N.
//! - **Handover without two replicas at once**: an object leaving a *live* shard is
//!   drained first ([`drain_label`]); the old shard lets go ([`acknowledge_drain`]) inside
//!   the object's own reconcile slot, so no reconcile of it runs there any more; only then
//!   is the new shard named. A *dead* shard's objects move at once (it stopped first).
//!   [`reconcile_sharded`] does the shard's half around the unchanged reconcile, and never
//!   takes an object that moved away for a deleted one.
//! - **Only the sharder hands objects over**: the sharder names each object's holder in an
//!   annotation it alone writes ([`holder_annotation`]), with the label; a shard reconciles
//!   an object only when the label *and* the holder name it. A label someone else changes
//!   (`kubectl label --overwrite`, a GitOps tool, a re-applied manifest) gives the object
//!   to nobody new: its holder no longer selects it, the shard the label names does not
//!   hold it, and the sharder puts the label back on the holder's event ([`Step::Hold`]).
//!   Objects labelled without a holder (at creation, by an older sharder) are adopted as
//!   labelled.
//!
//! - **Range mode** ([`ManagerOptions::hash_ranges`](crate::ManagerOptions::hash_ranges)):
//!   nothing is written to the sharded objects. The FNV-1a 64 hash space of each object's
//!   uid (or namespace) is cut into 64 slots, held one replica each in the Lease
//!   `<ring>-slot-table`; each replica's informers list and watch its slots with KEP-5866
//!   `shardSelector` (and drop whatever a server without the gate sends outside them),
//!   and a slot moves only after its holder has stopped reconciling it and handed it over
//!   itself, or once its holder's Lease expired. The sharding page has the protocol and
//!   its safety argument.
//! - **Fleets**: a [`FleetController`](crate::fleet::FleetController) under a sharded
//!   manager places `(cluster, object)` pairs the same way, with the labels written in each
//!   member ([`ShardKey::in_member`]), or whole members on one
//!   shard ([`pin_clusters`](crate::fleet::FleetController::pin_clusters)); see
//!   [`Manager::add_fleet_controller`](crate::Manager::add_fleet_controller).
//!
//! Tested on fake-apiserver and kube-apiserver (the e2e crate's `sharding.rs` and
//! `sharded_managers.rs`): disjoint caches whose union is everything,
//! a joining shard taking its share, a killed and a partitioned replica taken over, and,
//! with objects changing all along and reconciles slow on the shards they leave, no object
//! ever reconciled by two replicas at once (a direct move instead of the drain fails that
//! test). The parts are public for rings run outside a [`Manager`](crate::Manager).

mod admission;
mod key;
mod kind_sets;
mod labels;
mod layer;
mod membership;
mod placing;
mod reads;
mod reconcile;
mod ring;
mod sharded_kind;
mod sharder;
mod slim;
pub(crate) mod slots;
mod standing;

pub use self::{
    admission::label_at_creation,
    key::{Placement, ShardKey},
    labels::{drain_label, holder_annotation, shard_label, shard_selectors},
    membership::{LiveShards, RING_LABEL, shard_lease},
    reconcile::reconcile_sharded,
    ring::Ring,
    sharded_kind::ShardedKind,
    sharder::{Applied, Move, Sharder, Step},
    standing::{Standing, acknowledge_drain, standing},
};
pub(crate) use self::{
    kind_sets::KindSets,
    layer::Shard,
    placing::OBSERVE_EVERY,
    reads::{Shards, SharedReads},
};
