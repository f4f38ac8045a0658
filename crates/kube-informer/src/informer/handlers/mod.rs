//! The fan-out from the informer to its handlers: the handler traits ([`handler`]), one
//! buffered [`listener`] per handler (its own task, unbounded like client-go's, or
//! coalescing), the [`processor`] that distributes each notification to the listeners, the
//! [`registration`] a handler is removed with, and the pull-based [`stream`].

pub(super) mod backpressure;
pub(super) mod handler;
pub(super) mod listener;
pub(super) mod processor;
pub(super) mod registration;
pub(super) mod stream;
