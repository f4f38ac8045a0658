//! The informers' lifecycle, all at once: errors, start, sync, health, shutdown.

use std::{sync::Arc, time::Duration};

use futures_util::future::join_all;
use tokio::task::JoinHandle;

use super::{
    FactoryInner, SharedInformerFactory,
    registry::{CacheSyncError, ErrorHandler},
};
use crate::informer::{Failure, InformerHealth, SyncError};

impl SharedInformerFactory {
    /// Calls `handler` with every failure of every informer of this factory (those made
    /// before and after), with the informer's name. See
    /// [`SharedIndexInformer::on_error`](crate::informer::SharedIndexInformer::on_error).
    pub fn on_error(&self, handler: impl Fn(&str, &Failure) + Send + Sync + 'static) {
        let handler: ErrorHandler = Arc::new(handler);
        self.inner.error_handlers.lock().push(handler.clone());
        for registered in self.inner.informers.lock().iter() {
            registered.informer.on_error(handler.clone());
        }
    }

    /// Starts every informer not started yet (informers asked for later need another call).
    /// After [`shutdown`](Self::shutdown) it starts nothing: a factory stopped (a fleet's
    /// disengaged member) is not brought back by a late caller.
    pub fn start(&self) {
        if self.inner.cancel.is_cancelled() {
            return;
        }
        let mut informers = self.inner.informers.lock();
        for registered in informers.iter_mut().filter(|r| r.task.is_none()) {
            let run = registered.informer.run(self.inner.cancel.child_token());
            registered.task = Some(tokio::spawn(run));
        }
    }

    /// Waits until every started informer has synced, at most `timeout`; the error names
    /// each informer that did not, with its last error.
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), CacheSyncError> {
        let waits: Vec<_> = {
            let informers = self.inner.informers.lock();
            let started = informers.iter().filter(|r| r.task.is_some());
            started.map(|r| r.informer.wait_for_sync(timeout)).collect()
        };
        let unsynced: Vec<SyncError> = join_all(waits)
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        match unsynced.is_empty() {
            true => Ok(()),
            false => Err(CacheSyncError { unsynced }),
        }
    }

    /// The health of every started informer, for probes.
    pub fn health(&self) -> Vec<InformerHealth> {
        let informers = self.inner.informers.lock();
        let started = informers.iter().filter(|r| r.task.is_some());
        started.map(|r| r.informer.health()).collect()
    }

    /// Stops every informer without waiting for them (what [`shutdown`](Self::shutdown)
    /// does, for code that cannot await, such as `Drop`): each is cancelled at its next
    /// await point. Dropping the last handle of the factory does the same.
    pub fn shutdown_now(&self) {
        self.inner.stop_all();
    }

    /// Stops every informer and waits until they have stopped.
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        let tasks: Vec<JoinHandle<()>> = {
            let mut informers = self.inner.informers.lock();
            informers.iter_mut().filter_map(|r| r.task.take()).collect()
        };
        for task in tasks {
            let _ = task.await;
        }
    }
}

impl FactoryInner {
    fn stop_all(&self) {
        self.cancel.cancel();
        for registered in self.informers.lock().iter_mut() {
            if let Some(task) = registered.task.take() {
                task.abort();
            }
        }
    }
}

impl Drop for FactoryInner {
    /// The informers a factory started live no longer than the factory: dropping its last
    /// handle stops them (a dropped controller manager leaves no watch behind).
    fn drop(&mut self) {
        self.stop_all();
    }
}
