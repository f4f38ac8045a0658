//! An operator, as users write one: a manager with a ReplicaSet controller that owns the
//! cluster's pods (`informer-bench operator` seeds them, 100 per ReplicaSet). Each
//! reconcile reads its ReplicaSet whole and counts its pods from the cache; the run is
//! synced once every ReplicaSet has been reconciled with all its pods in view.
//!
//! Two caches: typed (`Pod`, `ReplicaSet`) or compact (`Compact<Pod>`,
//! `Compact<ReplicaSet>`: an object's bytes and its parsed metadata), where the reconcile
//! decodes its ReplicaSet on demand, as it would to read its spec.

use std::{
    collections::HashSet,
    fmt::Debug,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
use kube::{Resource, ResourceExt};
use kube_informer::{FactoryOptions, Lister, ReadOnlyStore, compact::Compact};
use kube_informer_runtime::{
    Action, Cached, ControllerOptions, Manager, ManagerOptions, controller::Watchable,
};
use tokio_util::sync::CancellationToken;

use super::Job;

/// Pods each ReplicaSet owns (`informer-bench operator` seeds them so).
pub(crate) const PODS_PER_OWNER: usize = 100;

/// How a cache keeps a kind, and what a reconcile reads of its ReplicaSet.
trait Cache: Resource<DynamicType = ()> + Watchable + Clone + Debug + Send + Sync + 'static {
    /// The ReplicaSet's wanted replicas, read as the reconcile reads its spec.
    fn replicas(&self) -> Result<usize, String>;
}

impl Cache for ReplicaSet {
    fn replicas(&self) -> Result<usize, String> {
        let spec = self.spec.as_ref().ok_or("no spec")?;
        Ok(spec.replicas.unwrap_or(1).max(0) as usize)
    }
}

impl Cache for Compact<ReplicaSet> {
    /// Decoded whole: what a reconcile over a compact cache pays for its object's spec.
    fn replicas(&self) -> Result<usize, String> {
        self.decode().map_err(|e| e.to_string())?.replicas()
    }
}

pub(super) async fn run_typed(job: &Job) -> Result<(Instant, Instant), String> {
    run::<ReplicaSet, Pod>(job).await
}

pub(super) async fn run_compact(job: &Job) -> Result<(Instant, Instant), String> {
    run::<Compact<ReplicaSet>, Compact<Pod>>(job).await
}

struct Ctx<P: Resource + 'static> {
    pods: ReadOnlyStore<P>,
    /// ReplicaSets reconciled with every pod in view.
    done: Mutex<HashSet<String>>,
}

async fn run<R, P>(job: &Job) -> Result<(Instant, Instant), String>
where
    R: Cache,
    P: Resource<DynamicType = ()> + Watchable + Clone + Debug + Send + Sync + 'static,
{
    let owners = job.n.div_ceil(PODS_PER_OWNER);
    let options = ManagerOptions::default()
        .no_endpoints()
        .factory(FactoryOptions::default());
    let mut manager = Manager::new(super::client(&job.url)?, options)
        .await
        .map_err(|e| e.to_string())?;
    let controller = manager
        .controller::<R>(ControllerOptions::default().name("replicasets"))
        .owns::<P>();
    let ctx = Arc::new(Ctx {
        pods: manager.factory().informer::<P>().store(),
        done: Mutex::new(HashSet::new()),
    });
    manager.add_controller(
        controller,
        reconcile::<R, P>,
        |_, _, _| Action::Retry,
        ctx.clone(),
    );
    let (stop, force) = (CancellationToken::new(), CancellationToken::new());
    let running = tokio::spawn(manager.run_until(stop.clone(), force));
    while ctx.done.lock().expect("not poisoned").len() < owners {
        if running.is_finished() {
            return Err(format!("the manager stopped: {:?}", running.await));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let synced = Instant::now();
    // Measured: the process exits without tearing the caches down (see `clients::run`).
    Ok((synced, synced))
}

async fn reconcile<R, P>(rs: Cached<R>, ctx: Arc<Ctx<P>>) -> Result<Action, String>
where
    R: Cache,
    P: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let Cached::Present(rs) = rs else {
        return Ok(Action::Done);
    };
    let wanted = rs.replicas()?;
    let uid = rs.uid().ok_or("no uid")?;
    let namespace = rs.namespace().unwrap_or_default();
    let pods = Lister::new(ctx.pods.clone())
        .namespaced(&namespace)
        .list(&Default::default());
    let owned = pods
        .iter()
        .filter(|pod| pod.owner_references().iter().any(|o| o.uid == uid))
        .count();
    if owned >= wanted {
        ctx.done.lock().expect("not poisoned").insert(rs.name_any());
        Ok(Action::Done)
    } else {
        Ok(Action::RequeueAfter(Duration::from_millis(100)))
    }
}
