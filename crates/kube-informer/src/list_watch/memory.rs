//! [`MemorySource`]: a collection kept in memory that lists and watches like the API server
//! (client-go's `FakeControllerSource`), for tests that need no HTTP at all.

use std::{collections::BTreeMap, sync::Arc};

use futures_util::StreamExt;
use kube::{
    Resource,
    api::{ListParams, ObjectList, WatchEvent, WatchParams},
    core::{
        ListMeta, Status, TypeMeta,
        watch::{Bookmark, BookmarkMeta},
    },
};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::{ListerWatcher, WatchStream};
use crate::{ObjectKey, meta_namespace_key};

/// A collection of `K` in memory with the API server's resourceVersion semantics: every
/// write gets the next version, LIST answers the current state at the current version,
/// WATCH replays every change after any version still in the history, then follows new
/// ones. Faults on demand: [`expire`](Self::expire) makes older versions
/// answer 410, [`hold`](Self::hold) delays watch events (a lagging watch),
/// [`close_watches`](Self::close_watches) ends every open watch.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer::{informer::{InformerOptions, SharedIndexInformer}, list_watch::MemorySource};
/// use tokio_util::sync::CancellationToken;
///
/// let source: MemorySource<ConfigMap> = MemorySource::default();
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("a".into());
/// source.add(cm.clone());
///
/// let informer = SharedIndexInformer::new(source.clone(), InformerOptions::default());
/// let cancel = CancellationToken::new();
/// tokio::spawn({ let i = informer.clone(); let c = cancel.clone(); async move { i.run(c).await } });
/// informer.wait_for_sync(std::time::Duration::from_secs(5)).await.unwrap();
/// assert!(informer.store().contains_key("a"));
/// cancel.cancel();
/// # }
/// ```
pub struct MemorySource<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for MemorySource<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K> Default for MemorySource<K> {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    objects: BTreeMap::new(),
                    history: Vec::new(),
                    // As etcd, which starts at revision 1: "0" means "any version" to the
                    // API server, so no list is ever at "0".
                    revision: 1,
                    compacted: 0,
                    held: false,
                    released: 0,
                    generation: 0,
                }),
                changed: watch::channel(()).0,
            }),
        }
    }
}

impl<K> std::fmt::Debug for MemorySource<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.inner.state.lock();
        f.debug_struct("MemorySource")
            .field("objects", &state.objects.len())
            .field("revision", &state.revision)
            .finish()
    }
}

struct Inner<K> {
    state: Mutex<State<K>>,
    changed: watch::Sender<()>,
}

/// One change: its version, and the event to replay.
struct Change<K> {
    revision: u64,
    event: WatchEvent<K>,
}

struct State<K> {
    objects: BTreeMap<ObjectKey, K>,
    history: Vec<Change<K>>,
    revision: u64,
    /// Versions at or below this answer 410.
    compacted: u64,
    /// While held, watches deliver nothing newer than `released`.
    held: bool,
    released: u64,
    /// Bumped by `close_watches`: older watches end.
    generation: u64,
}

fn with_version<K: Resource>(mut obj: K, revision: u64) -> K {
    obj.meta_mut().resource_version = Some(revision.to_string());
    obj
}

impl<K: Resource + Clone + Send + Sync + 'static> MemorySource<K> {
    fn write(&self, obj: K, change: impl FnOnce(K) -> WatchEvent<K>, remove: bool) -> K {
        let key = meta_namespace_key(&obj).expect("objects in a MemorySource have names");
        let stored = {
            let mut state = self.inner.state.lock();
            state.revision += 1;
            let stored = with_version(obj, state.revision);
            if remove {
                state.objects.remove(&key);
            } else {
                state.objects.insert(key, stored.clone());
            }
            let revision = state.revision;
            state.history.push(Change {
                revision,
                event: change(stored.clone()),
            });
            if !state.held {
                state.released = revision;
            }
            stored
        };
        self.inner.changed.send_replace(());
        stored
    }

    /// Adds (or replaces) `obj` at the next resourceVersion; returns it as stored.
    pub fn add(&self, obj: K) -> K {
        self.write(obj, WatchEvent::Added, false)
    }

    /// Changes `obj` at the next resourceVersion; returns it as stored.
    pub fn modify(&self, obj: K) -> K {
        self.write(obj, WatchEvent::Modified, false)
    }

    /// Deletes `obj` (the deletion gets the next resourceVersion).
    pub fn delete(&self, obj: K) -> K {
        self.write(obj, WatchEvent::Deleted, true)
    }

    /// The current state of `key`.
    pub fn get(&self, key: &str) -> Option<K> {
        self.inner.state.lock().objects.get(key).cloned()
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> String {
        self.inner.state.lock().revision.to_string()
    }

    /// Forgets the history: a watch or list from any older version gets 410 Gone, as after
    /// etcd compaction.
    pub fn expire(&self) {
        let mut state = self.inner.state.lock();
        state.compacted = state.revision;
        state.history.clear();
    }

    /// Holds watch events back (writes still happen and LISTs see them): a lagging watch.
    pub fn hold(&self) {
        self.inner.state.lock().held = true;
    }

    /// Delivers what was held, and stops holding.
    pub fn release(&self) {
        {
            let mut state = self.inner.state.lock();
            state.held = false;
            state.released = state.revision;
        }
        self.inner.changed.send_replace(());
    }

    /// Ends every open watch (they resume from their last version).
    pub fn close_watches(&self) {
        self.inner.state.lock().generation += 1;
        self.inner.changed.send_replace(());
    }

    fn gone(message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, "Expired").with_code(410).boxed())
    }

    /// The events after `from` that may be delivered now; `Err` if `from` is compacted.
    fn after(&self, from: u64) -> Result<(Vec<WatchEvent<K>>, u64, u64), ()> {
        let state = self.inner.state.lock();
        if from < state.compacted {
            return Err(());
        }
        let events = state
            .history
            .iter()
            .filter(|c| c.revision > from && c.revision <= state.released)
            .map(|c| c.event.clone())
            .collect();
        Ok((events, state.released.max(from), state.generation))
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> ListerWatcher<K> for MemorySource<K> {
    async fn list(&self, _params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        let state = self.inner.state.lock();
        Ok(ObjectList {
            types: Default::default(),
            metadata: ListMeta {
                resource_version: Some(state.revision.to_string()),
                ..ListMeta::default()
            },
            items: state.objects.values().cloned().collect(),
        })
    }

    /// A streaming list (`sendInitialEvents`) starts with an ADDED event per object and the
    /// `k8s.io/initial-events-end` bookmark, at the current version, as the API server does.
    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, kube::Error> {
        let (initial, now) = {
            let state = self.inner.state.lock();
            let initial: Vec<WatchEvent<K>> = match params.send_initial_events {
                true => state
                    .objects
                    .values()
                    .cloned()
                    .map(WatchEvent::Added)
                    .collect(),
                false => Vec::new(),
            };
            (initial, state.revision)
        };
        let from = match resource_version {
            _ if params.send_initial_events => now,
            "" | "0" => now,
            rv => rv
                .parse()
                .map_err(|_| Self::gone("unparsable resourceVersion"))?,
        };
        let source = self.clone();
        let (mut events, next, generation) = self
            .after(from)
            .map_err(|()| Self::gone("too old resource version"))?;
        if params.send_initial_events {
            let bookmark = WatchEvent::Bookmark(Bookmark {
                types: TypeMeta::default(),
                metadata: BookmarkMeta {
                    resource_version: now.to_string(),
                    annotations: [("k8s.io/initial-events-end".to_owned(), "true".to_owned())]
                        .into(),
                },
            });
            let mut head = initial;
            head.push(bookmark);
            head.append(&mut events);
            events = head;
        }
        let changed = self.inner.changed.subscribe();
        let state = Some((events, next, changed));
        let stream = futures_util::stream::unfold(state, move |state| {
            let source = source.clone();
            async move {
                let (mut pending, mut at, mut changed) = state?;
                loop {
                    if !pending.is_empty() {
                        let event = pending.remove(0);
                        return Some((Ok(event), Some((pending, at, changed))));
                    }
                    if source.inner.state.lock().generation != generation {
                        return None; // closed by close_watches
                    }
                    match source.after(at) {
                        Ok((events, next, _)) if !events.is_empty() => {
                            pending = events;
                            at = next;
                            continue;
                        }
                        Ok(_) => {}
                        Err(()) => {
                            let status = Status::failure("too old resource version", "Expired")
                                .with_code(410);
                            return Some((Ok(WatchEvent::Error(status.boxed())), None));
                        }
                    }
                    if changed.changed().await.is_err() {
                        return None;
                    }
                }
            }
        });
        Ok(stream.boxed())
    }
}
