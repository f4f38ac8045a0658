//! The reflector's half of a shard selector ([`Selectors::shards`]): every object outside
//! the share is dropped before the sink, whatever the server did with the `shardSelector`
//! it was sent. kube-apiserver ignores the parameter without the `ShardedListAndWatch` gate
//! (alpha, off by default), as does any older server, and 1.36 does not filter watches of
//! resources without a watch cache; trusting it would put one object in two replicas'
//! caches. A LIST page that does not echo the selector (`shardInfo`), and a streaming list
//! (1.36 echoes nothing on watches), is counted as unconfirmed; an object found outside is counted as filtered here, and logged once.
//!
//! [`Selectors::shards`]: crate::list_watch::Selectors::shards

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use kube::Resource;

use super::Reflector;
use crate::list_watch::{ListerWatcher, ShardSelector};

/// A reflector's share: its selector, as the server should echo it, and whether the log
/// said yet that the server sends more.
pub(super) struct Share {
    selector: ShardSelector,
    echo: String,
    warned: AtomicBool,
}

impl Share {
    pub(super) fn new(selector: Option<&ShardSelector>) -> Option<Self> {
        selector.map(|selector| Self {
            echo: selector.to_string(),
            selector: selector.clone(),
            warned: AtomicBool::new(false),
        })
    }
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// Whether `obj` is in the reflector's share (always, without a selector); an object
    /// outside it is counted and, the first time, logged.
    pub(super) fn in_share(&self, obj: &K) -> bool {
        let Some(share) = &self.share else {
            return true;
        };
        if share.selector.contains(obj.meta()) {
            return true;
        }
        self.filtered_here(share, 1);
        false
    }

    /// `objects` without those outside the share (counted and logged as one).
    pub(super) fn only_share(&self, mut objects: Vec<K>) -> Vec<K> {
        let Some(share) = &self.share else {
            return objects;
        };
        let before = objects.len();
        objects.retain(|obj| share.selector.contains(obj.meta()));
        if objects.len() < before {
            self.filtered_here(share, (before - objects.len()) as u64);
        }
        objects
    }

    /// Checks that a LIST page says the server applied the selector (`None`: an answer
    /// that cannot say, a streaming list).
    pub(super) fn check_echo(&self, echoed: Option<&str>) {
        let Some(share) = &self.share else {
            return;
        };
        if echoed == Some(share.echo.as_str()) {
            return;
        }
        tracing::debug!(
            reflector = %self.name,
            echoed,
            "a LIST page did not confirm the shard selector; its objects are filtered here"
        );
        #[cfg(feature = "metrics")]
        self.metric(|m, name| m.shard_unconfirmed(name));
    }

    fn filtered_here(&self, share: &Share, count: u64) {
        #[cfg(feature = "metrics")]
        self.metric(|m, name| m.shard_filtered(name, count));
        if !share.warned.swap(true, Relaxed) {
            tracing::warn!(
                reflector = %self.name,
                selector = %share.echo,
                "the server sent objects outside the shard selector (it ignores shardSelector: \
                 a server without the ShardedListAndWatch gate, or before Kubernetes 1.36); \
                 they are dropped here, so the cache holds only its share, but this replica \
                 receives the whole collection"
            );
        }
    }
}
