//! One replica's partition from the Leases, for tests.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use futures_util::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;

use super::LeaseStore;

/// A [`LeaseStore`] in front of another whose requests can be made to fail at once: one
/// replica cut off from the Leases while the others still reach them
/// ([`MemoryLeases::set_failing`](super::MemoryLeases::set_failing) fails every replica's).
/// Clones share the switch, so a test keeps one and hands the other to the replica.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use kube_informer_runtime::lease::{LeaseStore, MemoryLeases, Partitionable};
///
/// let leases = Arc::new(MemoryLeases::default()); // or a `kube::Api<Lease>`
/// let link = Partitionable::new(leases.clone());
/// let replicas_view = link.clone(); // e.g. `ManagerOptions::lease_store(Arc::new(..))`
/// link.set_partitioned(true);
/// assert!(replicas_view.get("anything").await.is_err());
/// assert!(leases.get("anything").await.is_ok(), "the others still reach them");
/// # }
/// ```
#[derive(Clone)]
pub struct Partitionable {
    inner: Arc<dyn LeaseStore>,
    cut: Arc<AtomicBool>,
}

impl std::fmt::Debug for Partitionable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partitionable")
            .field("partitioned", &self.cut.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

impl Partitionable {
    /// In front of `inner`, connected.
    pub fn new(inner: impl LeaseStore) -> Self {
        Self {
            inner: Arc::new(inner),
            cut: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Cuts (`true`) or heals the link: while cut, every request fails at once.
    pub fn set_partitioned(&self, partitioned: bool) {
        self.cut.store(partitioned, Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), kube::Error> {
        if self.cut.load(Ordering::SeqCst) {
            return Err(kube::Error::Service(
                "partitioned from the Leases (a test's Partitionable)".into(),
            ));
        }
        Ok(())
    }
}

impl LeaseStore for Partitionable {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.inner.get(name).await
        })
    }

    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.inner.create(lease).await
        })
    }

    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.inner.replace(name, lease).await
        })
    }

    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.inner.list(label, value).await
        })
    }
}
