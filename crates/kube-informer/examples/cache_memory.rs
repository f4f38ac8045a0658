//! Where a typed cache's memory goes: a factory informer (the defaults: protobuf, a
//! streaming list, managedFields left out) syncs N realistic pods from an in-process
//! fake-apiserver while a counting allocator measures what stays allocated, per pod.
//!
//! ```text
//! cargo run --release -p kube-informer --example cache_memory [-- PODS]
//! ```
//!
//! It prints, per pod, what the cache keeps allocated after the sync (allocations and
//! bytes, counted by the global allocator in every thread), what the process's resident
//! memory grew by (the difference is the allocator's: chunk headers, rounding, arenas; a
//! lower bound, as the measured sync may reuse memory the warm-up sync freed), and
//! the sizes of the k8s-openapi structs a pod is made of: a Rust struct keeps room for
//! every field of its type, set or not.

use std::{alloc::System, time::Duration};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, fixtures::realistic_pod};
use k8s_openapi::{
    api::core::v1::{
        Container, ContainerStatus, EnvVar, Pod, PodCondition, PodSpec, PodStatus, Volume,
        VolumeMount,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube_informer::{FactoryOptions, SharedInformerFactory};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

// Counts every allocation of every thread (the decoding threads' too).
#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// This process's resident memory, bytes (Linux; 0 elsewhere).
fn rss() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pods: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(10_000);
    let server = FakeApiServer::start(ServerConfig::default()).await?;
    server.seed(&Gvr::core("pods"), (0..pods).map(realistic_pod))?;
    // A first sync, not measured: the server encodes each pod as protobuf once and keeps
    // it, which would count here (server and client share this process).
    let warm_up = SharedInformerFactory::new(server.client()?, FactoryOptions::default());
    let first = warm_up.informer::<Pod>();
    warm_up.start();
    first.wait_for_sync(Duration::from_secs(300)).await?;
    warm_up.shutdown().await;
    drop(first);

    let factory = SharedInformerFactory::new(server.client()?, FactoryOptions::default());
    let informer = factory.informer::<Pod>();
    let (region, rss_before) = (Region::new(ALLOCATOR), rss());
    factory.start();
    informer.wait_for_sync(Duration::from_secs(300)).await?;
    // Let the handlers' queues drain and the watch settle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (change, grown) = (region.change(), rss() - rss_before);
    assert_eq!(informer.store().len(), pods, "every pod cached");
    let per_pod = |n: usize| n as f64 / pods as f64;
    let kept = per_pod(change.allocations) - per_pod(change.deallocations);
    let bytes = per_pod(change.bytes_allocated) - per_pod(change.bytes_deallocated);
    println!("{pods} pods cached by a factory informer (its defaults), per pod:");
    println!("  allocations kept:         {kept:>8.0}");
    println!("  bytes kept (requested):   {bytes:>8.0}");
    println!(
        "  resident memory grown by: {:>8.0}  (the allocator's share: +{:.0}%)",
        grown / pods as f64,
        (grown / pods as f64 / bytes - 1.0) * 100.0
    );
    println!("The structs a pod is made of (bytes each, inline, set or not):");
    for (name, size) in [
        ("Pod", size_of::<Pod>()),
        ("ObjectMeta", size_of::<ObjectMeta>()),
        ("PodSpec", size_of::<PodSpec>()),
        ("PodStatus", size_of::<PodStatus>()),
        ("Container", size_of::<Container>()),
        ("ContainerStatus", size_of::<ContainerStatus>()),
        ("EnvVar", size_of::<EnvVar>()),
        ("Volume", size_of::<Volume>()),
        ("VolumeMount", size_of::<VolumeMount>()),
        ("PodCondition", size_of::<PodCondition>()),
    ] {
        println!("  {name:<16}{size:>6}");
    }
    factory.shutdown().await;
    server.shutdown().await;
    Ok(())
}
