//! The shared informer's building blocks (issue #6, in progress): the handler interface
//! ([`ResourceEventHandler`], [`HandlerFuncs`], [`FilteringHandler`]), the [`Notification`]s
//! handlers receive, and [`handle_deltas`], which applies popped deltas to the indexer and
//! decides what each handler hears. The `SharedIndexInformer` that runs them comes next.

mod handle_deltas;
mod handler;
#[allow(dead_code)] // driven by the SharedIndexInformer that completes #6; tested now
mod listener;

pub use self::handle_deltas::{Distribution, handle_deltas};
pub use self::handler::{FilteringHandler, HandlerFuncs, Notification, ResourceEventHandler};
