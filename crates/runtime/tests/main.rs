//! kube-informer-runtime's integration tests, in one test binary: a module per area (a file, or a file
//! and a folder of the same name), sharing `common`. One binary links the
//! dependencies once, where a binary per file linked them once each (issue #60: the cold
//! build of the workspace's tests halved).
//!
//! Run one area with a filter: `cargo test -p kube-informer-runtime --test integration AREA::`.

mod common;

mod controller;
mod controller_knobs;
mod demo;
mod election_timing;
mod events;
mod expectations;
mod fair_controller;
mod fleet;
mod fleet_controller;
mod fleet_isolation;
mod fleet_kubeconfigs;
mod fleet_manager;
mod fleet_sharded;
mod fleet_sharded_faults;
mod fleet_to_hub;
mod leader_election;
mod manager;
mod manager_schedules;
mod manager_stops;
mod operations_metrics;
mod read_your_writes;
mod reconcile_triggers;
mod sharding_membership;
mod sharding_reconcile;
mod sharding_rounds;
mod sharding_schedules;
mod wait;
mod webhook;
mod webhook_certs;
mod webhook_deadline;
