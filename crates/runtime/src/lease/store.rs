//! Where Leases are read and written: the API server, or memory (for tests).

use futures_util::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, api::PostParams};

/// Reads and writes Leases of one namespace. Implemented for `kube::Api<Lease>` and, with
/// the feature `testing`, for `MemoryLeases`.
pub trait LeaseStore: Send + Sync + 'static {
    /// The Lease `name`, if it exists.
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>>;
    /// Creates `lease` (409 if it exists).
    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>>;
    /// Replaces the Lease `name` with `lease`, if its `resourceVersion` is still current
    /// (409 otherwise).
    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Lease, kube::Error>>;
    /// Every Lease of the namespace whose labels include `label=value`.
    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>>;
}

/// A shared store (e.g. one `MemoryLeases` behind several candidates in a test).
impl<T: LeaseStore + ?Sized> LeaseStore for std::sync::Arc<T> {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>> {
        (**self).get(name)
    }

    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        (**self).create(lease)
    }

    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        (**self).replace(name, lease)
    }

    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>> {
        (**self).list(label, value)
    }
}

impl LeaseStore for Api<Lease> {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>> {
        Box::pin(self.get_opt(name))
    }

    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move { Api::create(self, &PostParams::default(), lease).await })
    }

    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move { Api::replace(self, name, &PostParams::default(), lease).await })
    }

    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>> {
        Box::pin(async move {
            let params = kube::api::ListParams::default().labels(&format!("{label}={value}"));
            Ok(Api::list(self, &params).await?.items)
        })
    }
}
