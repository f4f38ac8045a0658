//! The fan-out from the informer to its handlers: the handler traits ([`handler`]), one
//! buffered [`listener`] per handler (its own task; every notification in order, or
//! coalesced to one per object), the [`backpressure`] rule that bounds each buffer by
//! default (at its limit the informer waits for the handler, within a grace period, before
//! it sets the handler aside;
//! [`without_backpressure`](crate::informer::HandlerOptions::without_backpressure) gives
//! client-go's unbounded buffer), the [`processor`] that distributes each notification to
//! the listeners, the [`registration`] a handler is removed with, and the pull-based
//! [`stream`].

pub(super) mod backpressure;
pub(super) mod handler;
pub(super) mod listener;
pub(super) mod processor;
pub(super) mod registration;
pub(super) mod stream;
