//! Read your own writes: what a reconcile wrote is in the cache before the next reconcile
//! of the same key reads it.
//!
//! An informer's cache follows the API server's watch, a moment behind. A reconcile that
//! writes (adds a finalizer, removes one, creates a child) and is queued again at once (by
//! its own write's event, or by someone else's write in between) would otherwise read the
//! cache as it was before its write: it creates the child a second time, or runs a
//! finalizer's cleanup twice. controller-runtime v0.25's answer is a client that waits; here
//! the controller does it for every reconcile:
//!
//! - a write is recorded against the key being reconciled: every write made through a
//!   [`recording_client`] (the manager's [`client`](crate::manager::Manager::client) is
//!   one), on the reconcile's task or in a future it wraps with [`carry_writes`]; or by
//!   hand with [`wrote`] (the [`finalizer`](crate::finalizer::finalizer) helper records its
//!   own patches);
//! - a write made through a manager's client off every reconcile's task (a task a
//!   reconcile spawned, a webhook, the application's setup) is given to the keys it
//!   concerns, as its watch event would be: its own key in a controller of its kind, its
//!   controlling owner's in a controller of the owner's kind (`attribution.rs`);
//! - a delete the API server answered with a `Status` (most kinds, once the object is
//!   gone) is recorded from the request's path, and waited for by the object's absence;
//! - a write is matched to the controller's caches by its API group and kind, whatever the
//!   Rust type that reads it (a metadata-only relation's cache waits for a `Secret` written
//!   whole, each dynamic kind for its own objects);
//! - before the next reconcile of that key, its worker waits until each cache of the written
//!   kind that lists the object as written (its namespaces, label and field selectors) has
//!   reached the resourceVersion the write returned (the object itself at that version or
//!   later, or the cache's watch past it); a cache the write took the object out of (a
//!   label removed), or a write that deleted the object (the last finalizer removed), is
//!   waited for until the cache no longer holds the old copy; a cache that never lists the
//!   object as written is not waited for;
//! - the wait is bounded ([`ControllerOptions::read_your_writes`](super::ControllerOptions::read_your_writes),
//!   5 s by default): past it the reconcile runs anyway, with a warning naming the key and
//!   `controller_runtime_read_your_writes_timeouts_total` counting it.
//!
//! Limits: only kinds this controller caches (its own, and those it `owns` or `watches`)
//! are waited for; a write made on a task the reconcile spawned without [`carry_writes`]
//! is recorded only through a manager's client, only for its own key and its controlling
//! owner's (not a `watches` mapping's; a delete the API server answered with a `Status`,
//! for its own key only), and only once it is made: a reconcile of the key that started
//! before it reads the cache without it; versions that are not numbers (not kube-apiserver's) are not compared;
//! a field selector other than `metadata.name`/`metadata.namespace` is evaluated only for
//! writes the recording client saw (for one recorded with [`wrote`], the write is waited
//! for by its version), and an unset field is taken as unknown; in a fleet, a reconcile
//! that writes to *another* member through that member's client has the write recorded
//! against its own member's caches (write across members through a plain client).

mod attribution;
mod client;
mod selects;
mod written;

use std::{any::TypeId, collections::HashMap, sync::Arc, time::Duration};

use futures_util::future::{BoxFuture, join_all};
use kube::Resource;
use kube_informer::{ObjectKey, ReadOnlyStore, ResourceVersion, Selectors};
use parking_lot::{Mutex, RwLock};

pub(crate) use self::{
    attribution::Attribution,
    client::recording_client_attributing,
    written::{GroupKind, Record, recording, written},
};
pub use self::{
    client::recording_client,
    written::{carry_writes, wrote},
};
use self::{selects::Selection, written::Written};

/// How a cache is waited for, for one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// Until it holds the object at the write's version or later, or its watch passed it.
    Arrive,
    /// Until it holds no copy older than the write (the write took the object out of it,
    /// or deleted it).
    Leave,
}

/// A write kept for the next reconcile of its key: which caches of its kind to wait for
/// (by their place among that kind's), and how.
struct Pending {
    written: Written,
    kind: GroupKind,
    waits: Vec<(usize, Wait)>,
}

impl Pending {
    /// Whether waiting for this write waits for `older` too: a later write of the same
    /// object, at its version or later (the watch that shows one has shown the other), or
    /// its deletion.
    fn supersedes(&self, older: &Pending) -> bool {
        self.kind == older.kind
            && self.written.key == older.written.key
            && (self.written.deleted.is_some() || self.written.version >= older.written.version)
    }
}

/// Waits, as told, until a cache shows a write.
type WaitFor = Box<dyn Fn(&Written, Wait) -> BoxFuture<'static, ()> + Send + Sync>;

/// One cache of a kind, and how to wait for it.
struct Cache {
    selection: Selection,
    wait: WaitFor,
}

/// A controller's record of its reconciles' writes, and of its caches.
pub(crate) struct OwnWrites {
    limit: Option<Duration>,
    caches: RwLock<HashMap<GroupKind, Vec<Cache>>>,
    /// The kinds of the Rust types the caches read (for writes recorded with [`wrote`]).
    kinds: RwLock<HashMap<TypeId, GroupKind>>,
    /// The kinds of the resources the caches read, by group and plural (for a delete the
    /// API server answered with a `Status`, which names the resource only).
    resources: RwLock<HashMap<(String, String), GroupKind>>,
    pending: Mutex<ByKey>,
    /// The controller's own kind (for writes made off its reconciles' tasks).
    primary: RwLock<Option<Arc<crate::controller::handlers::OwnerKind>>>,
    /// Whether its workers run (a standby's, never reconciling, are given no writes made
    /// off their tasks).
    reconciling: std::sync::atomic::AtomicBool,
}

/// The writes waiting for the next reconcile of their key.
#[derive(Default)]
struct ByKey {
    by_key: HashMap<ObjectKey, Vec<Pending>>,
    /// The size at which stale entries are dropped next: pruning is a scan of every entry,
    /// so it runs when the map has doubled since the last one, not on every reconcile.
    prune_at: usize,
}

/// What the wait before a reconcile came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Nothing to wait for, or every write is in the caches.
    Reached,
    /// The limit passed first.
    TimedOut {
        /// The limit.
        limit: Duration,
    },
}

/// A cache a controller reads, as [`OwnWrites::cache`] takes it.
pub(crate) struct CacheOf<'a, T> {
    /// Its objects' kind.
    pub(crate) kind: GroupKind,
    /// Its objects' resource (plural).
    pub(crate) plural: String,
    /// The Rust types writes of that kind may be recorded as (with [`wrote`]).
    pub(crate) types: Vec<TypeId>,
    /// What it lists and watches (the factory's defaults applied).
    pub(crate) selectors: &'a Selectors,
    pub(crate) namespaced: bool,
    pub(crate) store: ReadOnlyStore<T>,
}

impl OwnWrites {
    pub(crate) fn new(limit: Option<Duration>) -> Self {
        Self {
            limit,
            caches: RwLock::default(),
            kinds: RwLock::default(),
            resources: RwLock::default(),
            pending: Mutex::default(),
            primary: RwLock::default(),
            reconciling: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Waits for writes of `cache.kind` in `cache.store`.
    pub(crate) fn cache<T>(&self, cache: CacheOf<'_, T>)
    where
        T: Resource + Send + Sync + 'static,
    {
        let CacheOf {
            kind,
            plural,
            types,
            selectors,
            namespaced,
            store,
        } = cache;
        let mut kinds = self.kinds.write();
        for type_id in types {
            kinds.entry(type_id).or_insert_with(|| kind.clone());
        }
        drop(kinds);
        let resource = (kind.group.clone(), plural);
        self.resources.write().insert(resource, kind.clone());
        let cache = Cache {
            selection: Selection::new(selectors, namespaced),
            wait: Box::new(move |written, wait| {
                let (store, written) = (store.clone(), written.clone());
                Box::pin(async move {
                    match wait {
                        Wait::Arrive => arrive(&store, &written).await,
                        Wait::Leave => leave(&store, &written).await,
                    }
                })
            }),
        };
        self.caches.write().entry(kind).or_default().push(cache);
    }

    /// The kind the caches read the Rust type `K` as, if any reads it.
    pub(crate) fn kind_of<K: 'static>(&self) -> Option<GroupKind> {
        self.kinds.read().get(&TypeId::of::<K>()).cloned()
    }

    /// A record for one reconcile.
    pub(crate) fn record_for(self: &Arc<Self>) -> Arc<Record> {
        Arc::new(Record::new(Arc::clone(self)))
    }

    /// Keeps the writes a reconcile of `key` recorded for its next reconcile; writes made
    /// after it ended (by a future it carried its record to) are kept as they come.
    pub(crate) fn record(self: &Arc<Self>, key: &ObjectKey, record: &Record) {
        let this = Arc::clone(self);
        let late_key = key.clone();
        let writes = record.close(move |written| this.keep(&late_key, vec![written]));
        self.keep(key, writes);
    }

    fn keep(&self, key: &ObjectKey, writes: Vec<Written>) {
        let Some(limit) = self.limit else { return };
        let writes: Vec<Pending> = writes.into_iter().filter_map(|w| self.plan(w)).collect();
        if writes.is_empty() {
            return;
        }
        // What was written long ago is of no use: its caches have it, or never will.
        let stale = limit * 10;
        let mut pending = self.pending.lock();
        let kept = pending.by_key.entry(key.clone()).or_default();
        kept.retain(|p| p.written.at.elapsed() < stale);
        for write in writes {
            // Per object, its latest write only: a key written to again and again (by
            // writes made off its reconciles, which need not reconcile it) keeps one entry
            // per object, not one per write.
            kept.retain(|p| !write.supersedes(p));
            kept.push(write);
        }
        if pending.by_key.len() >= pending.prune_at {
            // Keys never reconciled again.
            pending
                .by_key
                .retain(|_, w| w.iter().any(|w| w.written.at.elapsed() < stale));
            pending.prune_at = (pending.by_key.len() * 2).max(1024);
        }
    }

    /// The kind of `written`: as the write says, or as the caches read its resource or
    /// Rust type; `None` if no cache reads it.
    fn kind_written(&self, written: &Written) -> Option<GroupKind> {
        match (&written.kind, &written.resource) {
            (Some(kind), _) => Some(kind.clone()),
            (None, Some(resource)) => self.resources.read().get(resource).cloned(),
            (None, None) => self.kinds.read().get(&written.type_id).cloned(),
        }
    }

    /// Which caches `written` is waited for in, and how; `None` if none (a kind no cache
    /// reads). The object as written is dropped here: only the reconcile reads it.
    fn plan(&self, mut written: Written) -> Option<Pending> {
        let kind = self.kind_written(&written)?;
        let caches = self.caches.read();
        let waits: Vec<_> = caches
            .get(&kind)?
            .iter()
            .enumerate()
            .map(|(i, cache)| {
                let wait = match (&written.deleted, cache.selection.admits(&written)) {
                    (Some(_), _) | (None, Some(false)) => Wait::Leave,
                    (None, Some(true) | None) => Wait::Arrive,
                };
                (i, wait)
            })
            .collect();
        drop(caches);
        written.object = None;
        Some(Pending {
            written,
            kind,
            waits,
        })
    }

    /// Waits (at most the limit) until the caches hold what the reconciles of `key` wrote:
    /// every arrival first, then every departure (a child created and then taken out of a
    /// cache's selection is waited for until the cache has dropped it again).
    pub(crate) async fn settle(&self, key: &ObjectKey) -> Settled {
        let (Some(limit), Some(writes)) = (self.limit, self.pending.lock().by_key.remove(key))
        else {
            return Settled::Reached;
        };
        let phase = |wanted: Wait| -> Vec<BoxFuture<'static, ()>> {
            let caches = self.caches.read();
            writes
                .iter()
                .flat_map(|p| p.waits.iter().map(move |w| (p, w)))
                .filter(|(_, (_, wait))| *wait == wanted)
                .filter_map(|(p, (i, wait))| {
                    Some((caches.get(&p.kind)?.get(*i)?.wait)(&p.written, *wait))
                })
                .collect()
        };
        let (arrivals, departures) = (phase(Wait::Arrive), phase(Wait::Leave));
        if arrivals.is_empty() && departures.is_empty() {
            return Settled::Reached;
        }
        let both = async {
            join_all(arrivals).await;
            join_all(departures).await;
        };
        match tokio::time::timeout(limit, both).await {
            Ok(()) => Settled::Reached,
            Err(_) => Settled::TimedOut { limit },
        }
    }
}

/// Until `store` holds `written`'s object at its version or later, or its watch (of the
/// object's namespace) has passed that version. A cache that cannot tell (versions that are
/// not comparable, a namespace it does not watch) is not waited for.
async fn arrive<T: Resource>(store: &ReadOnlyStore<T>, written: &Written) {
    let newer = |store: &ReadOnlyStore<T>| {
        store
            .get_by_key(written.key.as_str())
            .is_some_and(|obj| version(&*obj).is_some_and(|v| v >= written.version))
    };
    if newer(store) {
        return;
    }
    let at = written.version.to_string();
    let reached = match &written.namespace {
        Some(namespace) => store.wait_for_resource_version_in(namespace, &at).await,
        None => store.wait_for_resource_version(&at).await,
    };
    if let Err(why) = reached {
        tracing::debug!(object = %written.key, %why, "cannot wait for this write in the cache");
    }
}

/// Until `store` holds no copy of `written`'s object older than the write: none at all, a
/// newer one, or (the write deleted it) another object of the name. Wakes on each change
/// of the cache in the object's namespace (its own watch, in a cache of several).
async fn leave<T: Resource>(store: &ReadOnlyStore<T>, written: &Written) {
    loop {
        // The version first: a change after it is waited for, not missed.
        let now = match &written.namespace {
            Some(ns) => store.resource_version_in(ns).unwrap_or_default(),
            None => store.resource_version(),
        };
        let old = store.get_by_key(written.key.as_str()).is_some_and(|obj| {
            match &written.deleted {
                // No UID known (a delete answered with a Status without one): any copy.
                Some(uid) => uid.is_empty() || obj.meta().uid.as_deref().unwrap_or_default() == uid,
                None => version(&*obj).is_some_and(|v| v < written.version),
            }
        });
        if !old {
            return;
        }
        let Some(next) = now
            .parse::<ResourceVersion>()
            .ok()
            .and_then(ResourceVersion::successor)
        else {
            return; // versions that are not comparable: cannot wait for the next change
        };
        let next = next.to_string();
        let changed = match &written.namespace {
            Some(ns) => store.wait_for_resource_version_in(ns, &next).await,
            None => store.wait_for_resource_version(&next).await,
        };
        if changed.is_err() {
            return;
        }
    }
}

fn version<T: Resource>(obj: &T) -> Option<ResourceVersion> {
    obj.meta().resource_version.as_deref()?.parse().ok()
}

#[cfg(test)]
mod tests;
