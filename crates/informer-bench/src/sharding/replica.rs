//! One replica of the sharded benchmark controller, in its own process: a sharded manager
//! with a controller of Pods whose reconcile only counts, reporting a status line every
//! quarter second until it is killed.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kube_informer::{Selectors, factory::FactoryOptions, list_watch::ShardField};
use kube_informer_runtime::{
    Action, Cached, ControllerOptions, LeaderElectionConfig, Manager, ManagerOptions,
};

use super::{NAMESPACE, RING, Status};

/// What a replica is told.
#[derive(Debug, Clone)]
pub(crate) struct Replica {
    pub(crate) url: String,
    pub(crate) shard: String,
    pub(crate) lease: Duration,
    /// Range mode (else label mode).
    pub(crate) ranges: bool,
}

/// Runs the replica until the process is killed.
pub(crate) fn run(replica: &Replica) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(serve(replica))
}

async fn serve(replica: &Replica) -> Result<(), String> {
    let config = kube::Config::new(replica.url.parse().map_err(|e| format!("{e}"))?);
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    // client-go's proportions: renew at two thirds, retry at a fifth of the lease.
    let election = LeaderElectionConfig::new("unused")
        .namespace(NAMESPACE)
        .lease_duration(replica.lease)
        .renew_deadline(replica.lease * 2 / 3)
        .retry_period(replica.lease / 5);
    let options = ManagerOptions::default()
        .no_endpoints()
        .factory(FactoryOptions::default().selectors(Selectors::default().in_namespace(NAMESPACE)))
        .leader_election(election)
        .sharded(RING, replica.shard.clone());
    let options = match replica.ranges {
        true => options.hash_ranges(ShardField::Uid),
        false => options,
    };
    let mut manager = Manager::new(client, options)
        .await
        .map_err(|e| e.to_string())?;
    let leading = manager.elector().cloned();
    let controller = manager.controller::<Pod>(ControllerOptions::default().name("pods"));
    let cache = controller.informer().store();
    let reconciles = Arc::new(AtomicU64::new(0));
    let counted = reconciles.clone();
    manager.add_controller(
        controller,
        move |_pod: Cached<Pod>, _: Arc<()>| {
            counted.fetch_add(1, Ordering::Relaxed);
            async { Ok::<_, kube::Error>(Action::Done) }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
    );
    let report = async {
        let mut every = tokio::time::interval(Duration::from_millis(250));
        loop {
            every.tick().await;
            let status = Status {
                cached: cache.len(),
                reconciles: reconciles.load(Ordering::Relaxed),
                leading: leading.as_ref().is_some_and(|e| e.is_leading()),
                rss_kib: crate::measure::rss_kib(),
                peak_rss_kib: crate::measure::peak_rss_kib(),
            };
            println!("{}", status.line());
        }
    };
    tokio::select! {
        ran = manager.run() => ran.map_err(|e| e.to_string()),
        () = report => Ok(()),
    }
}
