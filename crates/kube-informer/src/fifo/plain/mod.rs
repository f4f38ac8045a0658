//! [`Fifo`]: client-go's plain `FIFO` — the newest state of each key, in the order keys were
//! first queued.
//!
//! It serves a different use than the delta queues: *process every object once, at its
//! newest state, and never a deleted one*. An update of a queued object replaces it in place
//! (the key keeps its position, so a busy object cannot starve the others); a delete takes
//! the key out of the queue; a relist (`replace`) throws away what was queued and queues the
//! list. There are no tombstones, no deltas and no resync (it is a no-op).
//!
//! client-go removed `ErrRequeue` from its queues in 2025: on a delta queue a requeued entry
//! can put old deltas behind newer ones and move an informer back in time. On this queue the
//! entry is only the newest state of its key, so putting it back
//! ([`ProcessError::Requeue`]) cannot reorder anything; the object goes to the back of the
//! queue, and if it came with the first relist, [`Fifo::has_synced`] keeps waiting for it.

use std::{collections::VecDeque, sync::Arc};

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::{DeltaSink, PopError, ProcessError};
use crate::{FastMap, FastSet, KeyError, ObjectKey, meta_namespace_key};

/// One object per key, popped in the order keys were first queued (client-go's `FIFO`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer::fifo::{DeltaSink, Fifo, ProcessError};
///
/// let cm = |name: &str, v: &str| {
///     let mut cm = ConfigMap::default();
///     cm.metadata.name = Some(name.into());
///     cm.data = Some([("v".to_owned(), v.to_owned())].into());
///     Arc::new(cm)
/// };
/// let fifo: Fifo<ConfigMap> = Fifo::new();
/// fifo.add(cm("a", "1")).unwrap();
/// fifo.add(cm("b", "1")).unwrap();
/// fifo.update(cm("a", "2")).unwrap(); // replaces "a" in place: still first, now at v=2
/// let popped = fifo
///     .pop(|obj, _in_initial_list| {
///         assert_eq!(obj.data.as_ref().unwrap()["v"], "2");
///         Ok::<(), ProcessError<()>>(())
///     })
///     .await
///     .unwrap();
/// assert_eq!(popped.metadata.name.as_deref(), Some("a"));
/// assert_eq!(fifo.list_keys(), ["b"]);
/// # }
/// ```
pub struct Fifo<K> {
    state: Mutex<State<K>>,
    notify: Notify,
}

struct State<K> {
    /// Keys in pop order; every key here is in `items` (deletes take keys out at once).
    queue: VecDeque<ObjectKey>,
    items: FastMap<ObjectKey, Arc<K>>,
    /// Whether a `replace` or a write has happened yet.
    populated: bool,
    /// Keys of the first relist not popped yet (deleted ones are forgotten).
    initial: FastSet<ObjectKey>,
    closed: bool,
}

impl<K> Default for Fifo<K> {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                items: FastMap::default(),
                populated: false,
                initial: FastSet::default(),
                closed: false,
            }),
            notify: Notify::new(),
        }
    }
}

impl<K> std::fmt::Debug for Fifo<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        f.debug_struct("Fifo")
            .field("queued", &state.queue.len())
            .field("closed", &state.closed)
            .finish()
    }
}

impl<K: kube::Resource + Send + Sync> Fifo<K> {
    /// An empty, open queue.
    pub fn new() -> Self {
        Self::default()
    }

    fn write(&self, obj: Arc<K>, overwrite: bool) -> Result<(), KeyError> {
        let key = meta_namespace_key(obj.as_ref())?;
        let mut state = self.state.lock();
        state.populated = true;
        match state.items.get_mut(&key) {
            Some(queued) if overwrite => *queued = obj,
            Some(_) => return Ok(()),
            None => {
                state.queue.push_back(key.clone());
                state.items.insert(key, obj);
            }
        }
        drop(state);
        self.notify.notify_waiters();
        Ok(())
    }

    /// Queues `obj` unless its key is already queued (then the queued object, which may be
    /// newer, is kept): how a consumer puts back an object it could not process.
    pub fn add_if_not_present(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.write(obj, false)
    }

    /// Waits for an object, takes it out of the queue and runs `process` on it under the
    /// queue's lock (with whether it came with the first relist). On
    /// [`ProcessError::Requeue`] the object goes to the back of the queue (unless its key was
    /// queued again meanwhile); on [`ProcessError::Fail`] it is dropped. Either way the error
    /// is returned as [`PopError::Process`].
    pub async fn pop<F, E>(&self, process: F) -> Result<Arc<K>, PopError<E>>
    where
        F: FnOnce(&Arc<K>, bool) -> Result<(), ProcessError<E>>,
    {
        let mut process = Some(process);
        loop {
            let notified = self.notify.notified();
            {
                let mut state = self.state.lock();
                if let Some(key) = state.queue.pop_front() {
                    let obj = state.items.remove(&key).expect("queued keys are held");
                    let initial = state.initial.remove(&key);
                    let process = process.take().expect("runs once");
                    return match process(&obj, initial) {
                        Ok(()) => Ok(obj),
                        Err(ProcessError::Requeue(e)) => {
                            if !state.items.contains_key(&key) {
                                state.queue.push_back(key.clone());
                                state.items.insert(key.clone(), obj);
                                if initial {
                                    state.initial.insert(key);
                                }
                            }
                            Err(PopError::Process(e))
                        }
                        Err(ProcessError::Fail(e)) => Err(PopError::Process(e)),
                    };
                }
                if state.closed {
                    return Err(PopError::Closed);
                }
            }
            notified.await;
        }
    }

    /// The queued object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Option<Arc<K>> {
        let key = meta_namespace_key(obj).ok()?;
        self.get_by_key(key.as_str())
    }

    /// The queued object under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.state.lock().items.get(key).cloned()
    }

    /// The queued objects, in pop order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let state = self.state.lock();
        state.queue.iter().map(|k| state.items[k].clone()).collect()
    }

    /// The queued keys, in pop order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.state.lock().queue.iter().cloned().collect()
    }

    /// How many objects are queued.
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every object of the first relist has been popped (and not put back), or a
    /// write came before any relist. Objects deleted before being popped do not count.
    pub fn has_synced(&self) -> bool {
        let state = self.state.lock();
        state.populated && state.initial.is_empty()
    }

    /// Closes the queue: every waiting and later `pop` returns [`PopError::Closed`] once the
    /// queue is empty.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.notify.notify_waiters();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }
}

impl<K: kube::Resource + Send + Sync> DeltaSink<K> for Fifo<K> {
    /// Queues `obj`, or replaces the queued object of its key in place.
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.write(obj, true)
    }

    /// The same as [`add`](Self::add).
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.write(obj, true)
    }

    /// Takes `obj`'s key out of the queue: a deleted object is never processed.
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        let key = meta_namespace_key(obj.as_ref())?;
        let mut state = self.state.lock();
        state.populated = true;
        if state.items.remove(&key).is_some() {
            state.queue.retain(|k| *k != key);
        }
        state.initial.remove(&key);
        Ok(())
    }

    /// Drops everything queued and queues `list`, in its order (the last of a duplicated
    /// key wins, at its first position). The first relist is what
    /// [`has_synced`](Fifo::has_synced) waits for; a relist before that sync starts it over.
    /// All or nothing: an object without a key leaves the queue untouched.
    fn replace(&self, list: Vec<Arc<K>>, _resource_version: &str) -> Result<(), KeyError> {
        let mut queue = VecDeque::with_capacity(list.len());
        let mut items = FastMap::default();
        for obj in list {
            let key = meta_namespace_key(obj.as_ref())?;
            if items.insert(key.clone(), obj).is_none() {
                queue.push_back(key);
            }
        }
        let mut state = self.state.lock();
        if !state.populated || !state.initial.is_empty() {
            state.initial = queue.iter().cloned().collect();
        }
        state.populated = true;
        state.queue = queue;
        state.items = items;
        drop(state);
        self.notify.notify_waiters();
        Ok(())
    }

    /// Nothing to do: every queued object is already in the queue once.
    fn resync(&self) {}
}

#[cfg(test)]
mod tests;
