//! The end-to-end suite: each scenario against fake-apiserver and, where it says `_real`
//! or asks for kube-apiserver, against the real server (kube-envtest), in one test binary: a module per area (a file, or a file
//! and a folder of the same name), sharing `common`. One binary links the
//! dependencies once, where a binary per file linked them once each (issue #60: the cold
//! build of the workspace's tests halved).
//!
//! Run one area with a filter: `cargo test -p e2e --test integration AREA::`.

#[path = "common/grant.rs"]
mod grant;
#[path = "common/sources.rs"]
mod sources;

mod churn;
mod defaults;
mod demo;
mod demo_real;
mod doc_numbers;
mod dynamic_controller;
mod envtest_manifests_real;
mod fairness;
mod finalizer_once;
mod fleet_inventory;
mod fleet_real;
mod fleet_sharded;
mod fleet_standby;
mod fleet_three;
mod fresh_cluster;
mod kubectl;
mod layering;
mod metadata_only;
mod partition;
mod profiling;
mod protobuf;
mod protobuf_metadata;
mod protobuf_wire;
mod public_api;
mod range_sharded_managers;
mod rbac_real;
mod read_your_writes_paths;
mod replicas;
mod restart;
mod runtime;
mod scoped_relations;
mod secure_metrics_real;
mod server_side_apply;
mod shard_selector;
mod sharded_managers;
mod sharding;
mod sharding_demo_real;
mod slow_consumer;
mod staleness;
mod strategic;
mod sync;
mod tables;
mod warm_restart;
mod webhook_rotation_real;
mod webhooks_real;
mod writes;
