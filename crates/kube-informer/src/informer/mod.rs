//! The shared informer: one LIST+WATCH per resource (the [reflector](crate::reflector)), an
//! indexed cache, and any number of handlers, each told of every change in order on its own
//! task.
//!
//! - [`SharedIndexInformer`]: pops the FIFO, applies each entry to the cache first
//!   (`handle_deltas.rs`), then distributes adds, updates and deletes to the handlers'
//!   listeners; handlers added while running first get the whole cache as adds.
//! - [`ResourceEventHandler`], [`HandlerFuncs`], [`FilteringHandler`]: what handlers are.
//! - Each handler has a listener: an ordered buffer and a task of its own, so a slow call
//!   does not hold up the other handlers' calls; a panicking handler is caught and reported
//!   and keeps receiving.
//! - The buffers are bounded by default (backpressure): once [`DEFAULT_BACKLOG_LIMIT`]
//!   notifications wait for a handler, the informer waits before it applies more (its queue
//!   fills, the reflector stops reading its watch and the API server holds the events), for
//!   at most the handler's grace period ([`DEFAULT_GRACE`]) at a time. A handler that keeps
//!   making room paces the informer, and so every handler of it; one that makes none within
//!   its grace period is set aside (it holds nobody back) and buffers without bound until
//!   it has caught up (under half the limit). [`HandlerOptions`] sets the limit and grace
//!   per handler ([`backpressure`](HandlerOptions::backpressure)), turns the bound off
//!   ([`without_backpressure`](HandlerOptions::without_backpressure): client-go's unbounded
//!   buffer), or keeps one pending notification per object
//!   ([`coalescing`](HandlerOptions::coalescing)).
//! - Resync replays the cache as updates to the handlers whose period is due; it never calls
//!   the API server.
//! - Nothing fails silently: every failure (list and watch errors, stale events, panics in
//!   index functions, transforms and handlers, a task that died) reaches the handlers added
//!   with [`SharedIndexInformer::on_error`] as a [`Failure`]; [`SharedIndexInformer::health`]
//!   answers readiness and liveness probes; [`SharedIndexInformer::wait_for_sync`] and
//!   [`HandlerRegistration::wait_for_sync`] wait with a timeout and say why a sync did not
//!   happen; [`SharedIndexInformer::staleness`] says how far the cache is behind the
//!   server ([`Staleness`]).

mod enqueue;
mod failure;
mod handle_deltas;
mod handlers;
mod health;
mod inner;
#[cfg(feature = "metrics")]
mod metrics;
mod options;
mod queue;
mod run;
mod shared;
mod staleness;

use kube::Resource;

#[cfg(feature = "testing")]
pub use self::handle_deltas::apply_deltas;
#[cfg(feature = "metrics")]
pub use self::metrics::InformerMetrics;
pub use self::{
    enqueue::enqueue_keys,
    failure::Failure,
    handlers::handler::{FilteringHandler, HandlerFuncs, Notification, ResourceEventHandler},
    handlers::registration::HandlerRegistration,
    handlers::stream::NotificationStream,
    health::{InformerHealth, SyncError},
    options::{
        DEFAULT_BACKLOG_LIMIT, DEFAULT_GRACE, DEFAULT_QUEUE_CAPACITY, HandlerOptions,
        InformerError, InformerOptions, QueueKind,
    },
    shared::SharedIndexInformer,
    staleness::Staleness,
};

/// A transform that drops `metadata.managedFields` (often a quarter of an object's bytes),
/// for [`SharedIndexInformer::set_transform`].
pub fn strip_managed_fields<K: Resource>(mut object: K) -> K {
    object.meta_mut().managed_fields = None;
    object
}
