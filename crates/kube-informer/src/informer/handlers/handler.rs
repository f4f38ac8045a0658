//! What a controller plugs into an informer: [`ResourceEventHandler`], the closure builder
//! [`HandlerFuncs`], [`FilteringHandler`], and the [`Notification`]s they are given.

use std::{fmt, sync::Arc};

use crate::DeletedObject;

/// Reacts to changes of the cached objects. Every method has an empty default, so a handler
/// implements only what it needs. Calls come in order, one at a time, on the handler's own
/// task; a slow handler delays only itself.
///
/// Deletes come as a [`DeletedObject`]: either the object as the delete event carried it,
/// or, when the delete was inferred by a relist, a tombstone with the last known state. The
/// enum makes handling that case unmissable.
#[doc(alias = "ResourceEventHandlerDetailedFuncs")]
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    /// An object appeared. `is_in_initial_list` tells the first sync apart from later adds.
    fn on_add(&self, _object: Arc<K>, _is_in_initial_list: bool) {}
    /// An object changed (or a resync replayed it: then `old` and `new` are the same object).
    fn on_update(&self, _old: Arc<K>, _new: Arc<K>) {}
    /// An object is gone.
    fn on_delete(&self, _object: DeletedObject<K>) {}
}

type OnAdd<K> = Box<dyn Fn(Arc<K>, bool) + Send + Sync>;
type OnUpdate<K> = Box<dyn Fn(Arc<K>, Arc<K>) + Send + Sync>;
type OnDelete<K> = Box<dyn Fn(DeletedObject<K>) + Send + Sync>;

/// A handler made of closures (client-go's `ResourceEventHandlerFuncs`).
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kube_informer::informer::HandlerFuncs;
///
/// let handler = HandlerFuncs::<Pod>::new()
///     .on_add(|pod, _initial| println!("added {:?}", pod.metadata.name))
///     .on_delete(|gone| println!("deleted {:?}", gone.object().metadata.name));
/// # let _ = handler;
/// ```
#[doc(alias = "ResourceEventHandlerFuncs")]
pub struct HandlerFuncs<K> {
    add: Option<OnAdd<K>>,
    update: Option<OnUpdate<K>>,
    delete: Option<OnDelete<K>>,
}

impl<K> Default for HandlerFuncs<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> fmt::Debug for HandlerFuncs<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFuncs")
            .field("on_add", &self.add.is_some())
            .field("on_update", &self.update.is_some())
            .field("on_delete", &self.delete.is_some())
            .finish()
    }
}

impl<K> HandlerFuncs<K> {
    /// A handler that does nothing until given closures.
    pub fn new() -> Self {
        Self::default()
    }

    /// Called on adds.
    #[must_use]
    pub fn on_add(mut self, f: impl Fn(Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Called on updates (and resyncs).
    #[must_use]
    pub fn on_update(mut self, f: impl Fn(Arc<K>, Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Called on deletes.
    #[must_use]
    pub fn on_delete(mut self, f: impl Fn(DeletedObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for HandlerFuncs<K> {
    fn on_add(&self, object: Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(object, is_in_initial_list);
        }
    }

    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }

    fn on_delete(&self, object: DeletedObject<K>) {
        if let Some(f) = &self.delete {
            f(object);
        }
    }
}

/// Passes on only the objects `filter` accepts, turning changes across the filter's edge
/// into adds and deletes (client-go's `FilteringResourceEventHandler`): an update whose old
/// object was filtered out but whose new one passes is an add; the reverse is a delete.
pub struct FilteringHandler<K, H> {
    filter: Box<dyn Fn(&K) -> bool + Send + Sync>,
    inner: H,
}

impl<K, H> FilteringHandler<K, H> {
    /// `inner`, seeing only what `filter` accepts.
    pub fn new(filter: impl Fn(&K) -> bool + Send + Sync + 'static, inner: H) -> Self {
        Self {
            filter: Box::new(filter),
            inner,
        }
    }
}

impl<K, H: fmt::Debug> fmt::Debug for FilteringHandler<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilteringHandler")
            .field("inner", &self.inner)
            .finish()
    }
}

impl<K: Send + Sync + 'static, H: ResourceEventHandler<K>> ResourceEventHandler<K>
    for FilteringHandler<K, H>
{
    fn on_add(&self, object: Arc<K>, is_in_initial_list: bool) {
        if (self.filter)(&object) {
            self.inner.on_add(object, is_in_initial_list);
        }
    }

    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        match ((self.filter)(&old), (self.filter)(&new)) {
            (true, true) => self.inner.on_update(old, new),
            (false, true) => self.inner.on_add(new, false),
            (true, false) => self.inner.on_delete(DeletedObject::Known(old)),
            (false, false) => {}
        }
    }

    fn on_delete(&self, object: DeletedObject<K>) {
        if (self.filter)(object.object()) {
            self.inner.on_delete(object);
        }
    }
}

/// One change, as delivered to a handler (and as items of a notification stream).
pub enum Notification<K> {
    /// An object appeared.
    Add {
        /// The object.
        object: Arc<K>,
        /// Whether it came with the first sync.
        is_in_initial_list: bool,
    },
    /// An object changed, or a resync replayed it.
    Update {
        /// The cached state before.
        old: Arc<K>,
        /// The new state.
        new: Arc<K>,
    },
    /// An object is gone.
    Delete(DeletedObject<K>),
}

impl<K> Notification<K> {
    /// The object the notification is about (the new state of an update).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Add { object, .. } => object,
            Self::Update { new, .. } => new,
            Self::Delete(deleted) => deleted.object(),
        }
    }

    /// Calls the matching method of `handler`.
    pub(crate) fn dispatch(self, handler: &(impl ResourceEventHandler<K> + ?Sized)) {
        match self {
            Self::Add {
                object,
                is_in_initial_list,
            } => handler.on_add(object, is_in_initial_list),
            Self::Update { old, new } => handler.on_update(old, new),
            Self::Delete(deleted) => handler.on_delete(deleted),
        }
    }
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add {
                object,
                is_in_initial_list,
            } => Self::Add {
                object: object.clone(),
                is_in_initial_list: *is_in_initial_list,
            },
            Self::Update { old, new } => Self::Update {
                old: old.clone(),
                new: new.clone(),
            },
            Self::Delete(deleted) => Self::Delete(deleted.clone()),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for Notification<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Add {
                object,
                is_in_initial_list,
            } => f
                .debug_struct("Add")
                .field("object", object)
                .field("is_in_initial_list", is_in_initial_list)
                .finish(),
            Self::Update { old, new } => f
                .debug_struct("Update")
                .field("old", old)
                .field("new", new)
                .finish(),
            Self::Delete(deleted) => f.debug_tuple("Delete").field(deleted).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use super::*;
    use crate::ObjectKey;

    /// Records what it is told, as "add 3", "update 3->4", "delete 4".
    #[derive(Default)]
    struct Log(Arc<Mutex<Vec<String>>>);

    impl ResourceEventHandler<u32> for Log {
        fn on_add(&self, o: Arc<u32>, initial: bool) {
            self.0
                .lock()
                .push(format!("add {o}{}", if initial { " initial" } else { "" }));
        }
        fn on_update(&self, old: Arc<u32>, new: Arc<u32>) {
            self.0.lock().push(format!("update {old}->{new}"));
        }
        fn on_delete(&self, o: DeletedObject<u32>) {
            let tomb = if o.is_final_state_unknown() {
                " (tombstone)"
            } else {
                ""
            };
            self.0.lock().push(format!("delete {}{tomb}", o.object()));
        }
    }

    #[test]
    fn a_filter_turns_edge_crossings_into_adds_and_deletes() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let even = FilteringHandler::new(|n: &u32| n.is_multiple_of(2), Log(log.clone()));
        even.on_add(Arc::new(1), true);
        even.on_add(Arc::new(2), true);
        even.on_update(Arc::new(2), Arc::new(4)); // stays in
        even.on_update(Arc::new(4), Arc::new(5)); // leaves: delete of the old
        even.on_update(Arc::new(5), Arc::new(7)); // stays out
        even.on_update(Arc::new(7), Arc::new(8)); // enters: add of the new
        even.on_delete(DeletedObject::Known(Arc::new(9)));
        even.on_delete(DeletedObject::FinalStateUnknown {
            key: ObjectKey::new(None, "x"),
            last_known: Arc::new(8),
        });
        assert_eq!(
            *log.lock(),
            [
                "add 2 initial",
                "update 2->4",
                "delete 4",
                "add 8",
                "delete 8 (tombstone)"
            ]
        );
    }

    #[test]
    fn closures_and_notifications_dispatch_to_the_right_method() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (a, u) = (log.clone(), log.clone());
        let funcs = HandlerFuncs::new()
            .on_add(move |o: Arc<u32>, _| a.lock().push(format!("add {o}")))
            .on_update(move |o, n| u.lock().push(format!("update {o}->{n}")));
        let notes = [
            Notification::Add {
                object: Arc::new(1),
                is_in_initial_list: false,
            },
            Notification::Update {
                old: Arc::new(1),
                new: Arc::new(2),
            },
            Notification::Delete(DeletedObject::Known(Arc::new(2))), // no on_delete: ignored
        ];
        for n in notes {
            n.dispatch(&funcs);
        }
        assert_eq!(*log.lock(), ["add 1", "update 1->2"]);
    }
}
