//! [`Heap`]: objects by key, popped in priority order (client-go's `cache.Heap`).

use std::sync::Arc;

use kube::Resource;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::{FastMap, KeyError, ObjectKey, meta_namespace_key};

type Less<K> = Box<dyn Fn(&K, &K) -> bool + Send + Sync>;

/// A priority queue of objects, one per key: adding an object whose key is queued replaces
/// it and moves it to its new place; [`pop`](Heap::pop) waits for the first in `less`
/// order. For a scheduler-like consumer that must take the most urgent object next (the
/// work queues are FIFO).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer::caches::heap::Heap;
///
/// let priority = |c: &ConfigMap| c.metadata.labels.as_ref().and_then(|l| l.get("p")).cloned();
/// let heap = Heap::new(move |a: &ConfigMap, b: &ConfigMap| priority(a) < priority(b));
/// for (name, p) in [("low", "9"), ("high", "1"), ("mid", "5")] {
///     let mut cm = ConfigMap::default();
///     cm.metadata.name = Some(name.into());
///     cm.metadata.labels = Some([("p".to_owned(), p.to_owned())].into());
///     heap.add(Arc::new(cm)).unwrap();
/// }
/// let first = heap.pop().await.unwrap();
/// assert_eq!(first.metadata.name.as_deref(), Some("high"));
/// # }
/// ```
pub struct Heap<K> {
    state: Mutex<State<K>>,
    less: Less<K>,
    ready: Notify,
}

struct State<K> {
    items: Vec<(ObjectKey, Arc<K>)>,
    positions: FastMap<ObjectKey, usize>,
    closed: bool,
}

impl<K> std::fmt::Debug for Heap<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        f.debug_struct("Heap")
            .field("len", &state.items.len())
            .field("closed", &state.closed)
            .finish()
    }
}

impl<K: Resource> Heap<K> {
    /// An empty heap ordered by `less` (the first is the one `less` puts before all).
    pub fn new(less: impl Fn(&K, &K) -> bool + Send + Sync + 'static) -> Self {
        Self {
            state: Mutex::new(State {
                items: Vec::new(),
                positions: FastMap::default(),
                closed: false,
            }),
            less: Box::new(less),
            ready: Notify::new(),
        }
    }

    /// Adds `obj`, or replaces the queued object with its key (and moves it).
    pub fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        let key = meta_namespace_key(obj.as_ref())?;
        let mut state = self.state.lock();
        match state.positions.get(key.as_str()).copied() {
            Some(at) => {
                state.items[at].1 = obj;
                self.fix(&mut state, at);
            }
            None => {
                let at = state.items.len();
                state.positions.insert(key.clone(), at);
                state.items.push((key, obj));
                self.up(&mut state, at);
            }
        }
        drop(state);
        self.ready.notify_one();
        Ok(())
    }

    /// Adds `obj` unless its key is queued.
    pub fn add_if_not_present(&self, obj: Arc<K>) -> Result<(), KeyError> {
        let key = meta_namespace_key(obj.as_ref())?;
        if self.state.lock().positions.contains_key(key.as_str()) {
            return Ok(());
        }
        self.add(obj)
    }

    /// Removes the object queued under `key`.
    pub fn delete_by_key(&self, key: &str) -> Option<Arc<K>> {
        let mut state = self.state.lock();
        let at = state.positions.get(key).copied()?;
        Some(self.remove_at(&mut state, at))
    }

    /// The object queued under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        let state = self.state.lock();
        state
            .positions
            .get(key)
            .map(|&at| state.items[at].1.clone())
    }

    /// Every queued object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let state = self.state.lock();
        state.items.iter().map(|(_, obj)| obj.clone()).collect()
    }

    /// How many objects are queued.
    pub fn len(&self) -> usize {
        self.state.lock().items.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for an object and takes the first; `None` once closed and empty.
    pub async fn pop(&self) -> Option<Arc<K>> {
        loop {
            let ready = self.ready.notified();
            let mut ready = std::pin::pin!(ready);
            ready.as_mut().enable();
            {
                let mut state = self.state.lock();
                if !state.items.is_empty() {
                    return Some(self.remove_at(&mut state, 0));
                }
                if state.closed {
                    return None;
                }
            }
            ready.await;
        }
    }

    /// Closes the heap: waiting pops return what is left, then `None`.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.ready.notify_waiters();
    }

    fn remove_at(&self, state: &mut State<K>, at: usize) -> Arc<K> {
        let last = state.items.len() - 1;
        state.items.swap(at, last);
        let (key, obj) = state.items.pop().expect("not empty");
        state.positions.remove(key.as_str());
        if at < state.items.len() {
            let moved = state.items[at].0.clone();
            state.positions.insert(moved, at);
            self.fix(state, at);
        }
        obj
    }

    fn fix(&self, state: &mut State<K>, at: usize) {
        if !self.up(state, at) {
            self.down(state, at);
        }
    }

    fn swap(state: &mut State<K>, a: usize, b: usize) {
        state.items.swap(a, b);
        let (ka, kb) = (state.items[a].0.clone(), state.items[b].0.clone());
        state.positions.insert(ka, a);
        state.positions.insert(kb, b);
    }

    /// Moves the item at `at` up while it comes before its parent; whether it moved.
    fn up(&self, state: &mut State<K>, mut at: usize) -> bool {
        let start = at;
        while at > 0 {
            let parent = (at - 1) / 2;
            if !(self.less)(&state.items[at].1, &state.items[parent].1) {
                break;
            }
            Self::swap(state, at, parent);
            at = parent;
        }
        at != start
    }

    fn down(&self, state: &mut State<K>, mut at: usize) {
        let len = state.items.len();
        loop {
            let (left, right) = (2 * at + 1, 2 * at + 2);
            let mut first = at;
            if left < len && (self.less)(&state.items[left].1, &state.items[first].1) {
                first = left;
            }
            if right < len && (self.less)(&state.items[right].1, &state.items[first].1) {
                first = right;
            }
            if first == at {
                return;
            }
            Self::swap(state, at, first);
            at = first;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use proptest::prelude::*;

    use super::*;

    fn cm(name: &str, p: u32) -> Arc<ConfigMap> {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.data = Some([("p".to_owned(), p.to_string())].into());
        Arc::new(cm)
    }

    fn p(c: &ConfigMap) -> u32 {
        c.data.as_ref().unwrap()["p"].parse().unwrap()
    }

    proptest! {
        /// Random adds (with replacements) and deletes: pops come out in order, one per key,
        /// with each key's latest object.
        #[test]
        fn pops_come_in_order_with_the_latest_object(ops in prop::collection::vec((0u8..20, 0u32..100, any::<bool>()), 1..80)) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let heap = Heap::new(|a: &ConfigMap, b: &ConfigMap| p(a) < p(b));
            let mut model = std::collections::BTreeMap::new();
            for (key, prio, delete) in ops {
                let name = format!("k{key}");
                if delete {
                    heap.delete_by_key(&name);
                    model.remove(&name);
                } else {
                    heap.add(cm(&name, prio)).unwrap();
                    model.insert(name, prio);
                }
            }
            heap.close();
            let mut popped = Vec::new();
            while let Some(obj) = rt.block_on(heap.pop()) {
                popped.push((obj.metadata.name.clone().unwrap(), p(&obj)));
            }
            let mut expected: Vec<_> = model.into_iter().collect();
            expected.sort_by_key(|(_, prio)| *prio);
            let got: Vec<u32> = popped.iter().map(|(_, prio)| *prio).collect();
            let want: Vec<u32> = expected.iter().map(|(_, prio)| *prio).collect();
            prop_assert_eq!(got, want);
            prop_assert_eq!(popped.len(), expected.len());
        }
    }
}
