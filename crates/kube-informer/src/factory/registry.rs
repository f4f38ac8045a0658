//! What the factory keeps of each informer, whatever its type, and the error of a sync wait.

use std::{any::Any, sync::Arc, time::Duration};

use futures_util::future::BoxFuture;
use kube::Resource;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::informer::{Failure, InformerHealth, SharedIndexInformer, SyncError};

/// An informer whatever its type, as the factory keeps it.
pub(super) trait AnyInformer: Send + Sync {
    fn run(&self, cancel: CancellationToken) -> BoxFuture<'static, ()>;
    fn wait_for_sync(&self, timeout: Duration) -> BoxFuture<'static, Result<(), SyncError>>;
    fn health(&self) -> InformerHealth;
    fn on_error(&self, handler: ErrorHandler);
    fn as_any(&self) -> &dyn Any;
}

impl<K: Resource + Clone + Send + Sync + 'static> AnyInformer for SharedIndexInformer<K> {
    fn run(&self, cancel: CancellationToken) -> BoxFuture<'static, ()> {
        let informer = self.clone();
        Box::pin(async move { informer.run(cancel).await })
    }

    fn wait_for_sync(&self, timeout: Duration) -> BoxFuture<'static, Result<(), SyncError>> {
        let informer = self.clone();
        Box::pin(async move { SharedIndexInformer::wait_for_sync(&informer, timeout).await })
    }

    fn health(&self) -> InformerHealth {
        SharedIndexInformer::health(self)
    }

    fn on_error(&self, handler: ErrorHandler) {
        let name = self.name().to_owned();
        SharedIndexInformer::on_error(self, move |failure| handler(&name, failure));
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

pub(super) type ErrorHandler = Arc<dyn Fn(&str, &Failure) + Send + Sync>;

pub(super) struct Registered {
    pub(super) key: super::resolve::Watch,
    /// What it asks the API server for (`None`: a custom source).
    pub(super) reads: Option<Watched>,
    pub(super) informer: Box<dyn AnyInformer>,
    pub(super) task: Option<JoinHandle<()>>,
}

/// A resource a factory's informers list and watch, for the permissions they need (see
/// [`SharedInformerFactory::watched`](super::SharedInformerFactory::watched)).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct Watched {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource (plural), e.g. `configmaps`.
    pub resource: String,
    /// The namespaces it is listed in; empty: all of them (or a cluster-scoped resource).
    pub namespaces: Vec<String>,
}

/// Some informers of a factory did not sync in time; each says why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} informer(s) did not sync: {}", .unsynced.len(), list(.unsynced))]
pub struct CacheSyncError {
    /// One error per informer that did not sync.
    pub unsynced: Vec<SyncError>,
}

fn list(errors: &[SyncError]) -> String {
    let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
    all.join("; ")
}
