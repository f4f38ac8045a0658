//! One replica's way to shared in-memory Leases, which a partition cuts.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use futures_util::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use kube_informer_runtime::lease::{LeaseStore, MemoryLeases};

/// Delegates to the shared Leases until [`Link::cut`] is set; then every request fails at
/// once (the replica is partitioned from them).
#[derive(Clone)]
pub(crate) struct Link {
    leases: Arc<MemoryLeases>,
    pub(crate) cut: Arc<AtomicBool>,
}

impl Link {
    pub(crate) fn new(leases: &Arc<MemoryLeases>) -> Self {
        Self {
            leases: leases.clone(),
            cut: Arc::new(AtomicBool::new(false)),
        }
    }

    fn check(&self) -> Result<(), kube::Error> {
        if self.cut.load(Ordering::SeqCst) {
            return Err(kube::Error::Service("partitioned".into()));
        }
        Ok(())
    }
}

impl LeaseStore for Link {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.leases.get(name).await
        })
    }
    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.leases.create(lease).await
        })
    }
    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.leases.replace(name, lease).await
        })
    }
    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.leases.list(label, value).await
        })
    }
}
