//! The informer's side of its FIFO, whichever kind it is (the adapters in front of it are
//! in `fifo/sink.rs`).

use std::{convert::Infallible, sync::Arc};

use kube::Resource;

use crate::{
    Store,
    fifo::{DeltaFifo, DeltaQueue, DeltaSink, Deltas, PopError, ProcessError, RealFifo},
};

/// The most distinct keys applied to the cache under one write lock (client-go's batch
/// size), so readers cannot starve the writer; a relist from a `RealFifo` is applied whole.
const BATCH_KEYS: usize = 1000;

/// The queue, whichever kind.
pub(super) enum Queue<K> {
    Real(Arc<RealFifo<K>>),
    Delta(Arc<DeltaFifo<K>>),
}

impl<K: Resource + Send + Sync + 'static> Queue<K> {
    pub(super) fn new(kind: super::QueueKind, capacity: Option<usize>, store: &Store<K>) -> Self {
        let capacity = capacity.unwrap_or(usize::MAX);
        match kind {
            super::QueueKind::RealFifo => Self::Real(Arc::new(
                RealFifo::new(Arc::new(store.clone())).with_capacity(capacity),
            )),
            super::QueueKind::DeltaFifo => Self::Delta(Arc::new(
                DeltaFifo::new(Some(Arc::new(store.clone()))).with_capacity(capacity),
            )),
        }
    }

    pub(super) fn sink(&self) -> Arc<dyn DeltaSink<K>> {
        match self {
            Self::Real(q) => q.clone(),
            Self::Delta(q) => q.clone(),
        }
    }

    /// Whether entries come out in event order (so each event's version can become the
    /// store's).
    pub(super) fn is_ordered(&self) -> bool {
        matches!(self, Self::Real(_))
    }

    /// Waits for `relists` first relists (one per namespace) before being synced.
    pub(super) fn expect_relists(&self, relists: usize) {
        match self {
            Self::Real(q) => q.expect_relists(relists),
            Self::Delta(q) => q.expect_relists(relists),
        }
    }

    pub(super) fn has_synced(&self) -> bool {
        match self {
            Self::Real(q) => q.has_synced(),
            Self::Delta(q) => q.has_synced(),
        }
    }

    pub(super) fn close(&self) {
        match self {
            Self::Real(q) => q.close(),
            Self::Delta(q) => q.close(),
        }
    }

    #[cfg(feature = "metrics")]
    pub(super) fn len(&self) -> usize {
        match self {
            Self::Real(q) => q.len(),
            Self::Delta(q) => q.len(),
        }
    }

    pub(super) async fn pop_batch(
        &self,
        process: impl FnOnce(&[(Deltas<K>, bool)]) -> Result<(), ProcessError<Infallible>> + Send,
    ) -> Result<(), PopError<Infallible>> {
        match self {
            Self::Real(q) => q.pop_batch(BATCH_KEYS, process).await,
            Self::Delta(q) => q.pop_batch(BATCH_KEYS, process).await,
        }
    }
}
