//! The server's state: one global, monotonically increasing revision; per resource type, a
//! version chain per object (so a paged LIST reads one consistent snapshot and an exact
//! resourceVersion can be listed), the event history watches replay from, and the watchers.
//!
//! Everything older than the compaction point is forgotten, as etcd forgets: a LIST or WATCH
//! from before it gets the real server's 410 answers.

mod object;

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    ops::Bound,
    sync::Arc,
};

use bytes::Bytes;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

pub(crate) use self::object::StoredObject;
pub(crate) use crate::meta::ObjKey;
use crate::{
    registry::{Gvr, ResourceType},
    selector::Filter,
};

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) resource_version: u64,
    pub(crate) kind: EventType,
    /// The new state (for a delete: the final state, at the deletion's revision).
    pub(crate) object: Arc<StoredObject>,
    /// The previous state, for selector transitions.
    pub(crate) previous: Option<Arc<StoredObject>>,
}

/// What a watch stream receives, in order.
#[derive(Debug)]
pub(crate) enum WatchMsg {
    Event(EventType, Arc<StoredObject>),
    Bookmark(u64),
    /// End the stream: `abort` cuts the connection instead of ending it cleanly.
    Close {
        abort: bool,
    },
}

pub(crate) struct Watcher {
    pub(crate) filter: Filter,
    pub(crate) bookmarks: bool,
    pub(crate) tx: mpsc::Sender<WatchMsg>,
    /// Set when the server ended the watch because its client did not keep up: the stream
    /// ends cleanly without what was still buffered for it.
    pub(crate) terminated: Arc<AtomicBool>,
}

struct Version {
    resource_version: u64,
    /// `None`: deleted at this revision.
    object: Option<Arc<StoredObject>>,
}

/// One resource type's objects, history and watchers.
pub(crate) struct ResourceStore {
    pub(crate) ty: Arc<ResourceType>,
    objects: BTreeMap<ObjKey, Vec<Version>>,
    history: VecDeque<Arc<Event>>,
    watchers: Vec<Watcher>,
    /// Watches ended because their client did not keep up.
    terminated_watchers: u64,
    /// `{"kind":"Pod","apiVersion":"v1",`: spliced before a body to make a full object.
    pub(crate) object_prefix: Bytes,
    /// Live objects per namespace (`""` for cluster-scoped), for `remainingItemCount`.
    live: HashMap<String, u64>,
    /// How many items each issued continue token has served so far.
    served: HashMap<String, u64>,
}

/// `{"kind":"Pod","apiVersion":"v1",`: spliced before a stored body.
fn object_prefix(ty: &ResourceType) -> Bytes {
    Bytes::from(format!(
        "{{\"kind\":{},\"apiVersion\":{},",
        serde_json::Value::from(ty.kind.as_str()),
        serde_json::Value::from(ty.gvr.api_version()),
    ))
}

impl ResourceStore {
    fn new(ty: ResourceType) -> Self {
        let object_prefix = object_prefix(&ty);
        Self {
            ty: Arc::new(ty),
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            watchers: Vec::new(),
            terminated_watchers: 0,
            object_prefix,
            live: HashMap::new(),
            served: HashMap::new(),
        }
    }

    /// How many objects (in `namespace`, or in all) existed at `revision` (not older than
    /// the compaction point): the live count now, minus what the history added since.
    pub(crate) fn count_at(&self, revision: u64, namespace: Option<&str>) -> u64 {
        let now: u64 = match namespace {
            Some(ns) => self.live.get(ns).copied().unwrap_or(0),
            None => self.live.values().sum(),
        };
        let mut count = now as i64;
        for event in self.events_after(revision) {
            let ns = event.object.meta.namespace.as_deref().unwrap_or("");
            if namespace.is_some_and(|want| want != ns) {
                continue;
            }
            match event.kind {
                EventType::Added => count -= 1,
                EventType::Deleted => count += 1,
                EventType::Modified => {}
            }
        }
        count.max(0) as u64
    }

    /// Remembers that the list continued by `token` has served `items` so far.
    pub(crate) fn remember_served(&mut self, token: String, items: u64) {
        if self.served.len() >= 10_000 {
            self.served.clear(); // abandoned lists; a forgotten token is recounted
        }
        self.served.insert(token, items);
    }

    /// How many items the list continued by `token` has served, if remembered.
    pub(crate) fn take_served(&mut self, token: &str) -> Option<u64> {
        self.served.remove(token)
    }

    /// The object at `key` as of `revision`.
    fn at(&self, key: &ObjKey, revision: u64) -> Option<&Arc<StoredObject>> {
        let versions = self.objects.get(key)?;
        let v = versions
            .iter()
            .rev()
            .find(|v| v.resource_version <= revision)?;
        v.object.as_ref()
    }

    /// The current object at `key`.
    pub(crate) fn get(&self, key: &ObjKey) -> Option<&Arc<StoredObject>> {
        self.objects.get(key)?.last()?.object.as_ref()
    }

    /// Every object that exists now, in key order.
    pub(crate) fn live_objects(&self) -> Vec<Arc<StoredObject>> {
        self.objects
            .values()
            .filter_map(|versions| versions.last()?.object.clone())
            .collect()
    }

    /// Objects visible at `revision` after `start` (exclusive), in key order, limited to
    /// `namespace` when given and to those `keep` accepts.
    pub(crate) fn scan<'a>(
        &'a self,
        revision: u64,
        namespace: Option<&'a str>,
        start: Option<&ObjKey>,
        keep: impl Fn(&StoredObject) -> bool + 'a,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<StoredObject>)> + 'a {
        let lower = match (start, namespace) {
            (Some(start), _) => Bound::Excluded(start.clone()),
            (None, Some(ns)) => Bound::Included(ObjKey::new(Some(ns), "")),
            (None, None) => Bound::Unbounded,
        };
        self.objects
            .range((lower, Bound::Unbounded))
            .take_while(move |(k, _)| namespace.is_none_or(|ns| k.namespace == ns))
            .filter_map(move |(k, _)| Some((k, self.at(k, revision)?)))
            .filter(move |(_, o)| keep(o))
    }

    /// Events newer than `revision`, oldest first.
    pub(crate) fn events_after(&self, revision: u64) -> impl Iterator<Item = &Arc<Event>> {
        let start = self
            .history
            .partition_point(|e| e.resource_version <= revision);
        self.history.range(start..)
    }

    pub(crate) fn add_watcher(&mut self, watcher: Watcher) {
        self.watchers.push(watcher);
    }

    /// Sends `msg_for(watcher)` to every watcher; drops those that are gone, and ends those
    /// too slow to take an event (the real server ends a watch whose client cannot keep up;
    /// a bookmark that does not fit is dropped instead).
    fn broadcast(&mut self, mut msg_for: impl FnMut(&Watcher) -> Option<WatchMsg>) {
        let mut terminated = 0;
        self.watchers.retain(|w| match msg_for(w) {
            None => !w.tx.is_closed(),
            Some(msg) => {
                let droppable = matches!(msg, WatchMsg::Bookmark(_));
                match w.tx.try_send(msg) {
                    Ok(()) => true,
                    Err(mpsc::error::TrySendError::Full(_)) if droppable => true,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        w.terminated.store(true, Ordering::Release);
                        terminated += 1;
                        false
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => false,
                }
            }
        });
        self.terminated_watchers += terminated;
    }

    /// Watches ended because their client did not keep up.
    pub(crate) fn terminated_watchers(&self) -> u64 {
        self.terminated_watchers
    }

    fn close_watchers(&mut self, abort: bool) {
        for w in self.watchers.drain(..) {
            let _ = w.tx.try_send(WatchMsg::Close { abort });
        }
    }

    pub(crate) fn watcher_count(&self) -> usize {
        self.watchers.len()
    }

    fn compact(&mut self, to: u64) {
        let keep_from = self.history.partition_point(|e| e.resource_version <= to);
        self.history.drain(..keep_from);
        self.objects.retain(|_, versions| {
            // Keep what is newer than `to`, plus the newest version at or before it.
            let newer = versions.partition_point(|v| v.resource_version <= to);
            if newer > 0 {
                versions.drain(..newer - 1);
                if versions[0].object.is_none() {
                    versions.remove(0);
                }
            }
            !versions.is_empty()
        });
    }
}

/// The whole server state, behind one lock.
pub(crate) struct Storage {
    revision: u64,
    compacted: u64,
    /// How many revisions of history to keep before compacting automatically.
    window: u64,
    resources: HashMap<Gvr, ResourceStore>,
    /// What follows the committed changes of a resource (the CRDs' follower registers
    /// and unregisters the types they define).
    followers: Vec<Box<dyn Follower>>,
}

/// Follows the committed changes of one resource, and may change the storage in turn:
/// how a CustomResourceDefinition's types come and go (`crate::crds`) without the storage
/// knowing what a CRD is.
pub(crate) trait Follower: Send {
    /// The resource whose changes it follows.
    fn follows(&self) -> &Gvr;
    /// Called after each committed change of it (a change it makes itself is not
    /// followed again by the same follower).
    fn committed(&mut self, storage: &mut Storage, kind: EventType, object: &StoredObject);
}

impl Storage {
    pub(crate) fn new(types: Vec<ResourceType>, window: u64) -> Self {
        let mut storage = Self {
            revision: 1,
            compacted: 0,
            window: window.max(1),
            resources: HashMap::new(),
            followers: Vec::new(),
        };
        for ty in types {
            storage.register(ty);
        }
        storage
    }

    /// Calls `follower` after each committed change of the resource it follows.
    pub(crate) fn follow(&mut self, follower: Box<dyn Follower>) {
        self.followers.push(follower);
    }

    pub(crate) fn register(&mut self, ty: ResourceType) {
        self.resources
            .entry(ty.gvr.clone())
            .or_insert_with(|| ResourceStore::new(ty));
    }

    /// Gives a served type new attributes (subresources, names, scope); its objects stay.
    pub(crate) fn retype(&mut self, ty: ResourceType) {
        if let Some(store) = self.resources.get_mut(&ty.gvr) {
            store.object_prefix = object_prefix(&ty);
            store.ty = Arc::new(ty);
        }
    }

    /// Stops serving `gvr`: its watches end cleanly, and its objects and history go.
    pub(crate) fn unregister(&mut self, gvr: &Gvr) {
        if let Some(mut store) = self.resources.remove(gvr) {
            store.close_watchers(false);
        }
    }

    pub(crate) fn resource(&self, gvr: &Gvr) -> Option<&ResourceStore> {
        self.resources.get(gvr)
    }

    pub(crate) fn resource_mut(&mut self, gvr: &Gvr) -> Option<&mut ResourceStore> {
        self.resources.get_mut(gvr)
    }

    /// Watches ended for falling behind, per resource.
    pub(crate) fn terminated_watchers(&self) -> Vec<(Gvr, u64)> {
        self.resources
            .values()
            .map(|r| (r.ty.gvr.clone(), r.terminated_watchers()))
            .collect()
    }

    pub(crate) fn types(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.resources.values().map(|r| &r.ty)
    }

    /// The latest revision.
    pub(crate) fn revision(&self) -> u64 {
        self.revision
    }

    /// The oldest revision still listable or watchable from.
    pub(crate) fn compacted(&self) -> u64 {
        self.compacted
    }

    /// The revision the next write will get.
    pub(crate) fn next_revision(&self) -> u64 {
        self.revision + 1
    }

    /// Commits a change of `gvr`: `object` is the new state (for a delete, the final state
    /// stamped with the next revision). Notifies watchers; may compact.
    pub(crate) fn commit(&mut self, gvr: &Gvr, kind: EventType, object: Arc<StoredObject>) {
        self.revision += 1;
        let revision = self.revision;
        debug_assert_eq!(object.resource_version, revision);
        let Some(store) = self.resources.get_mut(gvr) else {
            return;
        };
        let key = object.meta.key();
        let live = store.live.entry(key.namespace.clone()).or_default();
        match kind {
            EventType::Added => *live += 1,
            EventType::Deleted => *live = live.saturating_sub(1),
            EventType::Modified => {}
        }
        let versions = store.objects.entry(key).or_default();
        let previous = versions.last().and_then(|v| v.object.clone());
        versions.push(Version {
            resource_version: revision,
            object: (kind != EventType::Deleted).then(|| object.clone()),
        });
        let event = Arc::new(Event {
            resource_version: revision,
            kind,
            object,
            previous,
        });
        store.history.push_back(event.clone());
        store.broadcast(|w| {
            transition(&w.filter, &event).map(|k| WatchMsg::Event(k, event.object.clone()))
        });
        if self.revision - self.compacted > 2 * self.window {
            self.compact(self.revision - self.window);
        }
        if self.followers.iter().any(|f| f.follows() == gvr) {
            // Taken out while they run: what they commit is not followed by them again.
            let mut followers = std::mem::take(&mut self.followers);
            for follower in followers.iter_mut().filter(|f| f.follows() == gvr) {
                follower.committed(self, kind, &event.object);
            }
            followers.append(&mut self.followers);
            self.followers = followers;
        }
    }

    /// Moves the revision on without changing any served object, as a write to a resource
    /// this server does not serve would.
    pub(crate) fn advance(&mut self) {
        self.revision += 1;
    }

    /// Forgets everything at or before `to` (clamped to the current revision).
    pub(crate) fn compact(&mut self, to: u64) {
        let to = to.min(self.revision);
        if to <= self.compacted {
            return;
        }
        self.compacted = to;
        for store in self.resources.values_mut() {
            store.compact(to);
        }
    }

    /// Sends a bookmark at the current revision to every watcher that asked for them.
    pub(crate) fn bookmark_all(&mut self) {
        let revision = self.revision;
        for store in self.resources.values_mut() {
            store.broadcast(|w| w.bookmarks.then_some(WatchMsg::Bookmark(revision)));
        }
    }

    /// Ends every watch (`abort`: by cutting the connection).
    pub(crate) fn close_all_watchers(&mut self, abort: bool) {
        for store in self.resources.values_mut() {
            store.close_watchers(abort);
        }
    }
}

/// What a watcher with `filter` sees of `event`: selector transitions turn a modification
/// into an ADDED (starts matching) or a DELETED (stops matching), as the real server does.
pub(crate) fn transition(filter: &Filter, event: &Event) -> Option<EventType> {
    let now = filter.matches(&event.object.meta);
    let before = event
        .previous
        .as_ref()
        .is_some_and(|p| filter.matches(&p.meta));
    match (event.kind, before, now) {
        (EventType::Added, _, true) => Some(EventType::Added),
        (EventType::Modified, true, true) => Some(EventType::Modified),
        (EventType::Modified, false, true) => Some(EventType::Added),
        (EventType::Modified, true, false) => Some(EventType::Deleted),
        (EventType::Deleted, _, true) => Some(EventType::Deleted),
        _ => None,
    }
}
