//! [`MemoryLeases`]: Leases in memory, for tests (feature `testing`).

use std::collections::BTreeMap;

use futures_util::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use kube::core::Status;
use parking_lot::Mutex;

use super::LeaseStore;

/// Leases in memory, with the API server's optimistic concurrency (resourceVersions, 409s)
/// and switchable failures: for testing leader election and sharding with paused clocks.
///
/// ```
/// use kube_informer_runtime::lease::MemoryLeases;
///
/// let leases = MemoryLeases::default();
/// leases.set_failing(true); // every request fails with a 503, as in an API server outage
/// # let _ = leases;
/// ```
#[derive(Default)]
pub struct MemoryLeases {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    leases: BTreeMap<String, Lease>,
    revision: u64,
    failing: bool,
    hanging: bool,
}

impl std::fmt::Debug for MemoryLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryLeases")
            .field("leases", &self.state.lock().leases.len())
            .finish()
    }
}

fn status(code: u16, reason: &str, message: &str) -> kube::Error {
    kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
}

impl MemoryLeases {
    /// Makes every request fail (503) or succeed again.
    pub fn set_failing(&self, failing: bool) {
        self.state.lock().failing = failing;
    }

    /// Makes every request hang (never answered) or be answered again.
    pub fn set_hanging(&self, hanging: bool) {
        self.state.lock().hanging = hanging;
    }

    /// The Lease `name` as stored now.
    pub fn lease(&self, name: &str) -> Option<Lease> {
        self.state.lock().leases.get(name).cloned()
    }

    async fn gate(&self) -> Result<(), kube::Error> {
        let (failing, hanging) = {
            let state = self.state.lock();
            (state.failing, state.hanging)
        };
        if hanging {
            std::future::pending::<()>().await;
        }
        if failing {
            return Err(status(503, "ServiceUnavailable", "the API server is down"));
        }
        Ok(())
    }

    fn store(state: &mut State, name: &str, mut lease: Lease) -> Lease {
        state.revision += 1;
        lease.metadata.name = Some(name.to_owned());
        lease.metadata.resource_version = Some(state.revision.to_string());
        state.leases.insert(name.to_owned(), lease.clone());
        lease
    }
}

impl LeaseStore for MemoryLeases {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>> {
        Box::pin(async move {
            self.gate().await?;
            Ok(self.state.lock().leases.get(name).cloned())
        })
    }

    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.gate().await?;
            let name = lease.metadata.name.clone().unwrap_or_default();
            let mut state = self.state.lock();
            if state.leases.contains_key(&name) {
                return Err(status(409, "AlreadyExists", "the lease already exists"));
            }
            Ok(Self::store(&mut state, &name, lease.clone()))
        })
    }

    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.gate().await?;
            let mut state = self.state.lock();
            let current = state
                .leases
                .get(name)
                .ok_or_else(|| status(404, "NotFound", "no such lease"))?;
            if lease.metadata.resource_version != current.metadata.resource_version {
                return Err(status(409, "Conflict", "the object has been modified"));
            }
            Ok(Self::store(&mut state, name, lease.clone()))
        })
    }

    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>> {
        Box::pin(async move {
            self.gate().await?;
            let state = self.state.lock();
            let labelled = state.leases.values().filter(|l| {
                l.metadata
                    .labels
                    .as_ref()
                    .and_then(|ls| ls.get(label))
                    .map(String::as_str)
                    == Some(value)
            });
            Ok(labelled.cloned().collect())
        })
    }
}
