//! kube-informer's integration tests, in one test binary: a module per area (a file, or a file
//! and a folder of the same name), sharing `common`. One binary links the
//! dependencies once, where a binary per file linked them once each (issue #60: the cold
//! build of the workspace's tests halved).
//!
//! Run one area with a filter: `cargo test -p kube-informer --test integration AREA::`.
//!
//! The protobuf fuzzing (`protobuf_fuzz.rs`) is a binary of its own: CI runs it for minutes
//! in the optimised `fuzz` profile (`.ci/run`).

mod common;

mod backpressure;
mod client_go;
mod compact;
mod factory;
mod informer;
mod informer_failures;
mod live_share;
mod memory_source;
mod protobuf_codegen;
mod protobuf_replay;
mod protobuf_testdata;
mod protobuf_wire;
mod reflector;
mod staleness;
mod warm_restart;
