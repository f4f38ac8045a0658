//! What flows through the FIFOs: [`Delta`]s (one change to one object), the [`Deltas`] popped
//! for one key, and the [`DeletedObject`] tombstone.

use std::{fmt, sync::Arc};

use smallvec::SmallVec;

use kube::Resource;

use crate::{KeyError, ObjectKey, meta_namespace_key};

/// The kind of change a [`Delta`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The object was created (a watch `ADDED`).
    Added,
    /// The object changed (a watch `MODIFIED`).
    Updated,
    /// The object is gone: a watch `DELETED`, or a relist that no longer has it.
    Deleted,
    /// The object was in a relist (`replace`); it may or may not have changed.
    Replaced,
    /// A periodic resync replayed the cached object; nothing changed on the server.
    Sync,
}

/// The object of a delete: either the object as last seen, or, when the delete was
/// inferred by a relist that no longer lists the object, a tombstone with the last state
/// this cache knew (the real final state was missed while disconnected).
///
/// Being an enum, every handler is made to decide what to do with a tombstone, the case Go
/// controllers keep forgetting to type-assert (`DeletedFinalStateUnknown`).
#[doc(alias = "DeletedFinalStateUnknown")]
pub enum DeletedObject<K> {
    /// The object as the delete event carried it.
    Known(Arc<K>),
    /// The object disappeared between two lists; its final state is unknown.
    FinalStateUnknown {
        /// The key of the deleted object.
        key: ObjectKey,
        /// The newest state this cache had seen; it may be stale.
        last_known: Arc<K>,
    },
}

impl<K> DeletedObject<K> {
    /// The deleted object: the final state if known, else the last known one.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Known(obj) => obj,
            Self::FinalStateUnknown { last_known, .. } => last_known,
        }
    }

    /// Consumes the tombstone, returning the object it holds.
    pub fn into_object(self) -> Arc<K> {
        match self {
            Self::Known(obj) => obj,
            Self::FinalStateUnknown { last_known, .. } => last_known,
        }
    }

    /// Whether this delete was inferred by a relist (the final state was missed).
    pub fn is_final_state_unknown(&self) -> bool {
        matches!(self, Self::FinalStateUnknown { .. })
    }
}

impl<K> Clone for DeletedObject<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Known(obj) => Self::Known(obj.clone()),
            Self::FinalStateUnknown { key, last_known } => Self::FinalStateUnknown {
                key: key.clone(),
                last_known: last_known.clone(),
            },
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for DeletedObject<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Known(obj) => f.debug_tuple("Known").field(obj).finish(),
            Self::FinalStateUnknown { key, last_known } => f
                .debug_struct("FinalStateUnknown")
                .field("key", key)
                .field("last_known", last_known)
                .finish(),
        }
    }
}

/// One change to one object. Only a delete can carry a tombstone.
pub enum Delta<K> {
    /// The object was created.
    Added(Arc<K>),
    /// The object changed.
    Updated(Arc<K>),
    /// The object was deleted (or vanished between two lists).
    Deleted(DeletedObject<K>),
    /// The object was in a relist.
    Replaced(Arc<K>),
    /// A resync replayed the cached object.
    Sync(Arc<K>),
}

impl<K> Delta<K> {
    /// The kind of change.
    pub fn delta_type(&self) -> DeltaType {
        match self {
            Self::Added(_) => DeltaType::Added,
            Self::Updated(_) => DeltaType::Updated,
            Self::Deleted(_) => DeltaType::Deleted,
            Self::Replaced(_) => DeltaType::Replaced,
            Self::Sync(_) => DeltaType::Sync,
        }
    }

    /// The object this delta carries (for a tombstone, the last known state).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Added(obj) | Self::Updated(obj) | Self::Replaced(obj) | Self::Sync(obj) => obj,
            Self::Deleted(deleted) => deleted.object(),
        }
    }
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(obj) => Self::Added(obj.clone()),
            Self::Updated(obj) => Self::Updated(obj.clone()),
            Self::Deleted(deleted) => Self::Deleted(deleted.clone()),
            Self::Replaced(obj) => Self::Replaced(obj.clone()),
            Self::Sync(obj) => Self::Sync(obj.clone()),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for Delta<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deleted(deleted) => f.debug_tuple("Deleted").field(deleted).finish(),
            other => f
                .debug_tuple(&format!("{:?}", other.delta_type()))
                .field(other.object())
                .finish(),
        }
    }
}

/// The deltas popped for one key, oldest first. Never empty.
///
/// [`DeltaFifo`](super::DeltaFifo) hands out every delta that accumulated for the key while it
/// waited in the queue; [`RealFifo`](super::RealFifo) exactly one.
pub struct Deltas<K> {
    key: ObjectKey,
    deltas: SmallVec<[Delta<K>; 1]>,
    /// Entries queued by one `RealFifo::replace` share a non-zero group, which a batch pop
    /// never splits (so a relist reaches the cache at once).
    pub(crate) group: u64,
    /// The resourceVersions reached once this entry is applied (the end of a relist, or a
    /// bookmark that arrived after it): by everything (`None`), or by the watch of one
    /// namespace. Empty for almost every entry; a mark replaces an older one of its scope.
    pub(crate) reached: Vec<(Option<Arc<str>>, Arc<str>)>,
}

impl<K> Deltas<K> {
    /// One delta for `key`.
    pub fn new(key: ObjectKey, delta: Delta<K>) -> Self {
        let mut deltas = SmallVec::new();
        deltas.push(delta);
        Self {
            key,
            deltas,
            group: 0,
            reached: Vec::new(),
        }
    }

    /// The resourceVersion reached for the whole cache once these deltas are applied.
    #[cfg(test)]
    pub(crate) fn reached_resource_version(&self) -> Option<&str> {
        let everything = self.reached.iter().find(|(ns, _)| ns.is_none());
        everything.map(|(_, rv)| rv.as_ref())
    }

    /// Every resourceVersion reached once these deltas are applied, with its scope: `None`
    /// for the whole cache, or the namespace whose watch reached it (a cache fed by one
    /// watch per namespace).
    pub(crate) fn reached(&self) -> impl Iterator<Item = (Option<&str>, &str)> {
        self.reached
            .iter()
            .map(|(ns, rv)| (ns.as_deref(), rv.as_ref()))
    }

    /// Marks these deltas as reaching `resource_version` (in `namespace`'s watch, or
    /// everywhere), replacing an older mark of the same scope.
    pub(crate) fn mark(&mut self, namespace: Option<&str>, resource_version: &str) {
        let rv: Arc<str> = Arc::from(resource_version);
        match self
            .reached
            .iter_mut()
            .find(|(ns, _)| ns.as_deref() == namespace)
        {
            Some(mark) => mark.1 = rv,
            None => self.reached.push((namespace.map(Arc::from), rv)),
        }
    }

    /// The key of the object these deltas are about.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The oldest delta.
    pub fn oldest(&self) -> &Delta<K> {
        &self.deltas[0]
    }

    /// The newest delta.
    pub fn newest(&self) -> &Delta<K> {
        &self.deltas[self.deltas.len() - 1]
    }

    /// The deltas, oldest first.
    pub fn iter(&self) -> std::slice::Iter<'_, Delta<K>> {
        self.deltas.iter()
    }

    /// How many deltas (at least one: a `Deltas` is never empty).
    #[allow(
        clippy::len_without_is_empty,
        reason = "never empty: it is made with its first delta"
    )]
    pub fn len(&self) -> usize {
        self.deltas.len()
    }

    /// Appends `delta` as it is.
    pub(crate) fn push(&mut self, delta: Delta<K>) {
        self.deltas.push(delta);
    }

    /// Appends `delta` and applies the delete-collapsing rule: two deletes in a row become
    /// one, keeping the one that is not a tombstone (the newer when both are tombstones, the
    /// older when neither is).
    pub(crate) fn push_deduped(&mut self, delta: Delta<K>) {
        if let (Some(Delta::Deleted(previous)), Delta::Deleted(_)) = (self.deltas.last(), &delta) {
            if previous.is_final_state_unknown() {
                let last = self.deltas.len() - 1;
                self.deltas[last] = delta;
            }
            return;
        }
        self.deltas.push(delta);
    }
}

impl<K> Clone for Deltas<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            deltas: self.deltas.clone(),
            group: self.group,
            reached: self.reached.clone(),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for Deltas<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deltas")
            .field("key", &self.key)
            .field("deltas", &self.deltas)
            .finish()
    }
}

impl<'a, K> IntoIterator for &'a Deltas<K> {
    type Item = &'a Delta<K>;
    type IntoIter = std::slice::Iter<'a, Delta<K>>;

    fn into_iter(self) -> Self::IntoIter {
        self.deltas.iter()
    }
}

/// The key of a deleted object, tombstones included: a `FinalStateUnknown` tombstone already
/// carries its key, a known object's key is computed.
#[doc(alias = "DeletionHandlingMetaNamespaceKeyFunc")]
pub fn deletion_handling_meta_namespace_key<K: Resource>(
    obj: &DeletedObject<K>,
) -> Result<ObjectKey, KeyError> {
    match obj {
        DeletedObject::Known(obj) => meta_namespace_key(obj.as_ref()),
        DeletedObject::FinalStateUnknown { key, .. } => Ok(key.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(v: u32) -> Delta<u32> {
        Delta::Deleted(DeletedObject::Known(Arc::new(v)))
    }

    fn tombstone(v: u32) -> Delta<u32> {
        Delta::Deleted(DeletedObject::FinalStateUnknown {
            key: ObjectKey::new(None, "k"),
            last_known: Arc::new(v),
        })
    }

    fn shape(d: &Deltas<u32>) -> Vec<(DeltaType, bool, u32)> {
        d.iter()
            .map(|d| {
                let tomb = matches!(d, Delta::Deleted(x) if x.is_final_state_unknown());
                (d.delta_type(), tomb, **d.object())
            })
            .collect()
    }

    #[test]
    fn two_deletes_collapse_keeping_the_known_one() {
        // (older, newer) -> kept
        let cases = [
            (known(1), known(2), (false, 1)),
            (known(1), tombstone(2), (false, 1)),
            (tombstone(1), known(2), (false, 2)),
            (tombstone(1), tombstone(2), (true, 2)),
        ];
        for (older, newer, (tomb, v)) in cases {
            let mut d = Deltas::new(ObjectKey::new(None, "k"), older);
            d.push_deduped(newer);
            assert_eq!(shape(&d), vec![(DeltaType::Deleted, tomb, v)]);
        }
    }

    #[test]
    fn only_consecutive_deletes_collapse() {
        let mut d = Deltas::new(ObjectKey::new(None, "k"), known(1));
        d.push_deduped(Delta::Added(Arc::new(2)));
        d.push_deduped(known(3));
        assert_eq!(d.len(), 3);
        assert_eq!(**d.oldest().object(), 1);
        assert_eq!(**d.newest().object(), 3);
    }

    #[test]
    fn tombstones_carry_their_own_key() {
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.name = Some("real".into());
        let obj = Arc::new(cm);
        let known = DeletedObject::Known(obj.clone());
        assert_eq!(
            deletion_handling_meta_namespace_key(&known).unwrap(),
            "ns/real"
        );
        let tombstone = DeletedObject::FinalStateUnknown {
            key: ObjectKey::new(Some("ns"), "from-key"),
            last_known: obj,
        };
        assert_eq!(
            deletion_handling_meta_namespace_key(&tombstone).unwrap(),
            "ns/from-key"
        );
    }
}
