//! The reflector's half of a shard selector ([`Selectors::shards`]): every object outside
//! the share is dropped before the sink, whatever the server did with the `shardSelector`
//! it was sent. kube-apiserver ignores the parameter without the `ShardedListAndWatch` gate
//! (alpha, off by default), as does any older server, and 1.36 does not filter watches of
//! resources without a watch cache; trusting it would put one object in two replicas'
//! caches. A LIST page that does not echo the selector (`shardInfo`), and a streaming list
//! (1.36 echoes nothing on watches), is counted as unconfirmed; an object found outside is
//! counted as filtered here, and logged once.
//!
//! A live share that changes is taken in by `reshard`: the ranges gained are listed exactly
//! at the version the cache is at, the objects of the ranges lost are deleted, and the watch
//! resumes from that version (see `docs/sharding.md`, "Only the moved slots are listed").
//!
//! [`Selectors::shards`]: crate::list_watch::Selectors::shards

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use kube::Resource;
use parking_lot::RwLock;
use tokio::sync::watch;

use tokio_util::sync::CancellationToken;

use super::{Reflector, ReflectorError, Run};
use crate::list_watch::{ListerWatcher, ShardSelector, Shards};

/// A reflector's share: where it comes from, what it is now (`None`: a live share that is
/// empty, so nothing is this reflector's), as the server should echo it, and whether the
/// log said yet that the server sends more.
pub(super) struct Share {
    source: Shards,
    now: RwLock<Option<(ShardSelector, String)>>,
    warned: AtomicBool,
}

impl Share {
    pub(super) fn new(source: Option<&Shards>) -> Option<Self> {
        source.map(|source| Self {
            source: source.clone(),
            now: RwLock::new(with_echo(source.now())),
            warned: AtomicBool::new(false),
        })
    }

    /// Takes the share as it is now, for a sync about to start: the share (`None`: empty),
    /// and, for a live share, a receiver told of the next change (the share taken is the
    /// value it marked seen).
    pub(super) fn begin(&self) -> Begun {
        let (now, changes) = match &self.source {
            Shards::Live(live) => {
                let mut changes = live.subscribe();
                let now = changes.borrow_and_update().clone();
                (now, Some(changes))
            }
            Shards::Fixed(selector) => (Some(selector.clone()), None),
        };
        let taken = now.clone();
        *self.now.write() = with_echo(now);
        Begun {
            now: taken,
            changes,
        }
    }

    /// The share taken by the last [`begin`](Self::begin).
    pub(super) fn selector(&self) -> Option<ShardSelector> {
        self.now
            .read()
            .as_ref()
            .map(|(selector, _)| selector.clone())
    }

    fn contains(&self, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
        self.now
            .read()
            .as_ref()
            .is_some_and(|(selector, _)| selector.contains(meta))
    }
}

/// A share taken for a sync (see [`Share::begin`]).
pub(super) struct Begun {
    pub(super) now: Option<ShardSelector>,
    pub(super) changes: Option<watch::Receiver<Option<ShardSelector>>>,
}

/// How a share change was taken in (see `Reflector::reshard`).
pub(super) enum Resharded {
    /// The cache holds the new share at the version it was at: watch on from there.
    Moved,
    /// List the new share whole.
    Relist,
    Cancelled,
}

/// A share with its text as the server echoes it.
fn with_echo(selector: Option<ShardSelector>) -> Option<(ShardSelector, String)> {
    selector.map(|s| {
        let echo = s.to_string();
        (s, echo)
    })
}

/// Resolves when `changes` (a live share's) says the share changed; never for a fixed one.
pub(super) async fn changed(changes: Option<&mut watch::Receiver<Option<ShardSelector>>>) {
    if let Some(changes) = changes
        && changes.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// Takes in a change of the share to `now`, from the share the cache holds
    /// (`run.cached_share`), without relisting what the cache keeps: the ranges gained are
    /// listed exactly at the version the cache is at (`run.resource_version`, so the watch
    /// resumes from there over the new share and misses nothing), and the objects that left
    /// the share are deleted from the cache. A narrowed share lists nothing. `Relist` (the
    /// whole new share) when that cannot be done: no share held (a cache not synced since
    /// its last fallback), another field, a sink without
    /// [`replace_part`](crate::fifo::DeltaSink::replace_part), or a failed LIST (reported;
    /// a version already compacted away gets 410).
    pub(super) async fn reshard(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
        now: &ShardSelector,
    ) -> Resharded {
        // Until a reshard or a sync says otherwise, the cache holds no share known here.
        let Some(previous) = run.cached_share.take() else {
            return self.resharded(Resharded::Relist);
        };
        let resource_version = run.resource_version.as_str();
        if previous.field() != now.field() || resource_version.is_empty() {
            return self.resharded(Resharded::Relist);
        }
        let gained = now.without(&previous);
        let listed = match &gained {
            None => Vec::new(),
            Some(gained) => {
                let listed = tokio::select! {
                    () = cancel.cancelled() => return Resharded::Cancelled,
                    listed = self.list_all(resource_version, Some(gained)) => listed,
                };
                match listed {
                    // (Only objects in `gained`: `list_all` filtered them.)
                    Ok((objects, _)) => objects,
                    Err(failure) => {
                        self.report_list_failure(failure);
                        return self.resharded(Resharded::Relist);
                    }
                }
            }
        };
        // The part replaced: everything but what both shares hold.
        let kept = |obj: &K| previous.contains(obj.meta()) && now.contains(obj.meta());
        let part = |obj: &K| !kept(obj);
        match self.sink.replace_part(&part, listed, resource_version) {
            Ok(true) => {
                tracing::debug!(
                    reflector = %self.name,
                    gained = gained.map(|g| g.to_string()),
                    "the share changed: the cache keeps what stayed in it"
                );
                run.cached_share = Some(now.clone());
                self.resharded(Resharded::Moved)
            }
            Ok(false) => self.resharded(Resharded::Relist),
            Err(source) => {
                self.report(ReflectorError::InvalidObject {
                    resource: self.name.clone(),
                    source,
                });
                self.resharded(Resharded::Relist)
            }
        }
    }

    fn resharded(&self, how: Resharded) -> Resharded {
        #[cfg(feature = "metrics")]
        self.metric(|m, name| match how {
            Resharded::Moved => m.shard_changed(name, "moved"),
            Resharded::Relist => m.shard_changed(name, "all"),
            Resharded::Cancelled => {}
        });
        how
    }

    /// Whether `obj` is in the reflector's share (always, without a selector); an object
    /// outside it is counted and, the first time, logged.
    pub(super) fn in_share(&self, obj: &K) -> bool {
        let Some(share) = &self.share else {
            return true;
        };
        if share.contains(obj.meta()) {
            return true;
        }
        self.filtered_here(share, 1);
        false
    }

    /// `objects` without those outside the share, or outside `part` of it when a LIST
    /// asked for that part only (counted and logged as one).
    pub(super) fn only_share(&self, mut objects: Vec<K>, part: Option<&ShardSelector>) -> Vec<K> {
        let Some(share) = &self.share else {
            return objects;
        };
        let before = objects.len();
        match part {
            Some(part) => objects.retain(|obj| part.contains(obj.meta())),
            None => objects.retain(|obj| share.contains(obj.meta())),
        }
        if objects.len() < before {
            self.filtered_here(share, (before - objects.len()) as u64);
        }
        objects
    }

    /// Checks that a LIST page says the server applied the selector it was sent: the share,
    /// or `part` of it (`echoed` `None`: an answer that cannot say, a streaming list).
    pub(super) fn check_echo(&self, echoed: Option<&str>, part: Option<&ShardSelector>) {
        let Some(share) = &self.share else {
            return;
        };
        let confirmed = match part {
            Some(part) => echoed.is_some_and(|e| e == part.to_string()),
            None => share
                .now
                .read()
                .as_ref()
                .is_some_and(|(_, echo)| echoed == Some(echo.as_str())),
        };
        if confirmed {
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
        #[cfg(not(feature = "metrics"))]
        let _ = count;
        if !share.warned.swap(true, Relaxed) {
            let selector = share.now.read().as_ref().map(|(_, echo)| echo.clone());
            tracing::warn!(
                reflector = %self.name,
                selector = selector.as_deref().unwrap_or("nothing"),
                "the server sent objects outside the shard selector (it ignores shardSelector: \
                 a server without the ShardedListAndWatch gate, or before Kubernetes 1.36); \
                 they are dropped here, so the cache holds only its share, but this replica \
                 receives the whole collection"
            );
        }
    }
}
