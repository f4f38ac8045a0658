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
//! - a write is recorded with [`wrote`] (the [`finalizer`](crate::finalizer::finalizer)
//!   helper records its own patches) against the key being reconciled;
//! - before the next reconcile of that key, its worker waits until the cache of each written
//!   kind has reached the resourceVersion the write returned (the object itself at that
//!   version or later, or the cache's watch past it), or, for a write that deleted the
//!   object (the last finalizer removed), until the cache no longer holds it;
//! - the wait is bounded ([`ControllerOptions::read_your_writes`](super::ControllerOptions::read_your_writes),
//!   5 s by default): past it the reconcile runs anyway, with a warning naming the key and
//!   `controller_runtime_read_your_writes_timeouts_total` counting it.
//!
//! Limits: only kinds this controller caches (its own, and those it `owns` or `watches`)
//! are waited for; writes made outside the reconcile's task (a task it spawned) are not
//! recorded; versions that are not numbers (not kube-apiserver's) are not compared.

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use futures_util::future::BoxFuture;
use kube::Resource;
use kube_informer::{ObjectKey, ReadOnlyStore, meta_namespace_key};
use parking_lot::{Mutex, RwLock};

tokio::task_local! {
    /// The writes of the reconcile running on this task.
    static WRITES: Arc<Mutex<Vec<Written>>>;
}

/// One write: which object, in which version.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    type_id: TypeId,
    key: ObjectKey,
    namespace: Option<String>,
    version: u64,
    /// The write deleted the object (this UID): wait until the cache no longer has it.
    deleted: Option<String>,
    /// The object as written, for [`OwnReader`](super::OwnReader) within the reconcile
    /// (dropped once the reconcile ended).
    object: Option<Arc<dyn Any + Send + Sync>>,
    at: Instant,
}

/// Records that the running reconcile wrote `obj` (the object the API server returned
/// from a create, update, patch, or a delete that left it terminating): the next reconcile
/// of the same key waits until the controller's cache of `obj`'s kind holds that version
/// or later. Outside a reconcile, or for an object without a numeric resourceVersion, it
/// does nothing.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use kube::{Api, api::PostParams};
/// use kube_informer_runtime::controller::{Action, Cached, wrote};
///
/// async fn reconcile(cm: Cached<ConfigMap>, secrets: Arc<Api<Secret>>) -> Result<Action, kube::Error> {
///     let Cached::Present(_cm) = cm else { return Ok(Action::Done) };
///     let child = Secret::default(); // named and owned by the ConfigMap
///     let created = secrets.create(&PostParams::default(), &child).await?;
///     wrote(&created); // the next reconcile sees this Secret in the cache
///     Ok(Action::Done)
/// }
/// ```
pub fn wrote<K: Resource + Clone + Send + Sync + 'static>(obj: &K) {
    let meta = obj.meta();
    let Some(version) = meta
        .resource_version
        .as_deref()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    let Ok(key) = meta_namespace_key(obj) else {
        return;
    };
    // Being deleted with nothing left to wait for: this write (the last finalizer's
    // removal) deleted it. kube-apiserver answers it at the version the object had before,
    // so only its absence from the cache tells the deletion was seen. (A Pod in its grace
    // period has a deletionGracePeriodSeconds above 0: it still exists.)
    let deleted = (meta.deletion_timestamp.is_some()
        && meta.finalizers.as_ref().is_none_or(Vec::is_empty)
        && meta.deletion_grace_period_seconds.unwrap_or(0) == 0)
        .then(|| meta.uid.clone().unwrap_or_default());
    let written = Written {
        type_id: TypeId::of::<K>(),
        namespace: key.namespace().map(str::to_owned),
        key,
        version,
        deleted,
        object: Some(Arc::new(obj.clone())),
        at: Instant::now(),
    };
    let _ = WRITES.try_with(|writes| writes.lock().push(written));
}

/// The `K` objects the running reconcile wrote, oldest first: (key, the object as written,
/// or `None` if the write deleted it, its version). Empty outside a reconcile.
pub(crate) fn written<K: Send + Sync + 'static>() -> Vec<(ObjectKey, Option<Arc<K>>, u64)> {
    WRITES
        .try_with(|writes| {
            writes
                .lock()
                .iter()
                .filter(|w| w.type_id == TypeId::of::<K>())
                .filter_map(|w| {
                    let object = w.object.clone()?.downcast::<K>().ok()?;
                    let kept = w.deleted.is_none().then_some(object);
                    Some((w.key.clone(), kept, w.version))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `future` (one reconcile) with its writes recorded in `writes`.
pub(crate) async fn recording<F: Future>(writes: Arc<Mutex<Vec<Written>>>, future: F) -> F::Output {
    WRITES.scope(writes, future).await
}

/// Waits until a cache holds a write.
type Reach = Box<dyn Fn(&Written) -> BoxFuture<'static, ()> + Send + Sync>;

/// How to wait for one cache to reach a write.
struct Cache {
    /// Whether the cache holds an object of this key (to tell several caches of one Rust
    /// type apart: dynamic kinds).
    holds: Box<dyn Fn(&str) -> bool + Send + Sync>,
    reach: Reach,
    primary: bool,
}

/// A controller's record of its reconciles' writes, and of its caches.
pub(crate) struct OwnWrites {
    limit: Option<Duration>,
    caches: RwLock<HashMap<TypeId, Vec<Cache>>>,
    pending: Mutex<Pending>,
}

/// The writes waiting for the next reconcile of their key.
#[derive(Default)]
struct Pending {
    by_key: HashMap<ObjectKey, Vec<Written>>,
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

impl OwnWrites {
    pub(crate) fn new(limit: Option<Duration>) -> Self {
        Self {
            limit,
            caches: RwLock::default(),
            pending: Mutex::default(),
        }
    }

    /// Waits for writes of `written_as` objects in `store` (`primary`: the controller's own
    /// kind).
    pub(crate) fn cache<T>(&self, written_as: TypeId, store: ReadOnlyStore<T>, primary: bool)
    where
        T: Resource + Send + Sync + 'static,
    {
        let holding = store.clone();
        let cache = Cache {
            holds: Box::new(move |key| holding.contains_key(key)),
            reach: Box::new(move |written| Box::pin(reach(store.clone(), written.clone()))),
            primary,
        };
        self.caches
            .write()
            .entry(written_as)
            .or_default()
            .push(cache);
    }

    /// Keeps the writes of a reconcile of `key` for its next reconcile.
    pub(crate) fn record(&self, key: &ObjectKey, mut writes: Vec<Written>) {
        let Some(limit) = self.limit else { return };
        for write in &mut writes {
            write.object = None; // only the running reconcile reads them
        }
        if writes.is_empty() {
            return;
        }
        let mut pending = self.pending.lock();
        pending
            .by_key
            .entry(key.clone())
            .or_default()
            .extend(writes);
        if pending.by_key.len() >= pending.prune_at {
            // Keys never reconciled again: what they wrote long ago is of no use.
            let stale = limit * 10;
            pending
                .by_key
                .retain(|_, w| w.iter().any(|w| w.at.elapsed() < stale));
            pending.prune_at = (pending.by_key.len() * 2).max(1024);
        }
    }

    /// Waits (at most the limit) until the caches hold what the reconciles of `key` wrote.
    pub(crate) async fn settle(&self, key: &ObjectKey) -> Settled {
        let (Some(limit), Some(writes)) = (self.limit, self.pending.lock().by_key.remove(key))
        else {
            return Settled::Reached;
        };
        let waits: Vec<_> = {
            let caches = self.caches.read();
            writes
                .iter()
                .filter_map(|w| Some((choose(caches.get(&w.type_id)?, w)?.reach)(w)))
                .collect()
        };
        if waits.is_empty() {
            return Settled::Reached;
        }
        match tokio::time::timeout(limit, futures_util::future::join_all(waits)).await {
            Ok(_) => Settled::Reached,
            Err(_) => Settled::TimedOut { limit },
        }
    }
}

/// The cache a write is waited for in: the only one of its type, or (several dynamic
/// kinds share one) the one holding its key, else the controller's own.
fn choose<'a>(caches: &'a [Cache], written: &Written) -> Option<&'a Cache> {
    match caches {
        [one] => Some(one),
        several => several
            .iter()
            .find(|c| (c.holds)(written.key.as_str()))
            .or_else(|| several.iter().find(|c| c.primary)),
    }
}

/// Until `store` holds `written`'s object at its version or later, or its watch (of the
/// object's namespace) has passed that version. A cache that cannot tell (versions that are
/// not numbers, a namespace it does not watch) is not waited for.
async fn reach<T: Resource>(store: ReadOnlyStore<T>, written: Written) {
    if let Some(uid) = &written.deleted {
        return gone(&store, written.key.as_str(), uid).await;
    }
    let version = written.version.to_string();
    let newer = |store: &ReadOnlyStore<T>| {
        store.get_by_key(written.key.as_str()).is_some_and(|obj| {
            let have = obj.meta().resource_version.as_deref();
            have.and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|v| v >= written.version)
        })
    };
    if newer(&store) {
        return;
    }
    let reached = match &written.namespace {
        Some(namespace) => {
            store
                .wait_for_resource_version_in(namespace, &version)
                .await
        }
        None => store.wait_for_resource_version(&version).await,
    };
    if let Err(why) = reached {
        tracing::debug!(object = %written.key, %why, "cannot wait for this write in the cache");
    }
}

/// Until `store` no longer holds the object `key` with `uid` (gone, or another object of
/// the name), waking on each change of the cache.
async fn gone<T: Resource>(store: &ReadOnlyStore<T>, key: &str, uid: &str) {
    loop {
        let held = store.get_by_key(key);
        if held.is_none_or(|obj| obj.meta().uid.as_deref().unwrap_or_default() != uid) {
            return;
        }
        let Ok(now) = store.resource_version().parse::<u64>() else {
            return; // versions that are not numbers: cannot wait for the next change
        };
        if store
            .wait_for_resource_version(&(now + 1).to_string())
            .await
            .is_err()
        {
            return;
        }
    }
}
