//! fake-apiserver's integration tests, in one test binary: a module per area (a file, or a file
//! and a folder of the same name), sharing `common`. One binary links the
//! dependencies once, where a binary per file linked them once each (issue #60: the cold
//! build of the workspace's tests halved).
//!
//! Run one area with a filter: `cargo test -p fake-apiserver --test integration AREA::`.

mod common;

mod clients;
mod conformance;
mod consistency;
mod crds;
mod deletes;
mod faults;
mod replay;
mod sharding;
mod tables;
mod writes;
