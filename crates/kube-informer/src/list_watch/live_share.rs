//! [`LiveShare`]: a share of a collection that changes while the informer runs (a sharded
//! replica taking or giving up hash ranges), and [`Shards`], fixed or live, as selectors
//! carry it.

use std::sync::Arc;

use tokio::sync::watch;

use super::ShardSelector;

/// A share that changes while informers run: set it, and every informer selecting it
/// ([`Selectors::live_shards`](super::Selectors::live_shards)) lists its new share at once
/// (the objects that left it are deleted from the cache, the ones that joined it added).
/// `None` is no share at all: the informers hold nothing and send no request.
///
/// ```
/// use kube_informer::list_watch::{HASH_SPACE_END, LiveShare, Selectors, ShardField, ShardSelector};
///
/// let share = LiveShare::new(None); // nothing yet
/// let selectors = Selectors::default().live_shards(share.clone());
/// share.set(Some(ShardSelector::new(ShardField::Uid, 0..HASH_SPACE_END / 2)?));
/// assert!(share.get().is_some());
/// # let _ = selectors;
/// # Ok::<(), kube_informer::list_watch::InvalidShardSelector>(())
/// ```
#[derive(Clone)]
pub struct LiveShare {
    current: Arc<watch::Sender<Option<ShardSelector>>>,
}

impl std::fmt::Debug for LiveShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LiveShare")
            .field(&*self.current.borrow())
            .finish()
    }
}

impl LiveShare {
    /// A share, `initial` to begin with.
    pub fn new(initial: Option<ShardSelector>) -> Self {
        Self {
            current: Arc::new(watch::Sender::new(initial)),
        }
    }

    /// Changes the share (nothing happens if it is the same).
    pub fn set(&self, share: Option<ShardSelector>) {
        self.current.send_if_modified(|current| {
            let changed = *current != share;
            *current = share;
            changed
        });
    }

    /// The share now.
    pub fn get(&self) -> Option<ShardSelector> {
        self.current.borrow().clone()
    }

    /// Told of every change from now on.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<ShardSelector>> {
        self.current.subscribe()
    }
}

/// A share as selectors carry it: fixed, or live (one informer per live share: two
/// selectors with clones of one `LiveShare` are equal).
#[derive(Clone, Debug)]
pub(crate) enum Shards {
    Fixed(ShardSelector),
    Live(LiveShare),
}

impl Shards {
    /// The share now: `None` when a live share is empty.
    pub(crate) fn now(&self) -> Option<ShardSelector> {
        match self {
            Self::Fixed(selector) => Some(selector.clone()),
            Self::Live(live) => live.get(),
        }
    }
}

impl PartialEq for Shards {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Fixed(a), Self::Fixed(b)) => a == b,
            (Self::Live(a), Self::Live(b)) => Arc::ptr_eq(&a.current, &b.current),
            _ => false,
        }
    }
}

impl Eq for Shards {}

impl std::hash::Hash for Shards {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Self::Fixed(selector) => selector.hash(state),
            Self::Live(live) => Arc::as_ptr(&live.current).hash(state),
        }
    }
}
