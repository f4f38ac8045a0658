//! `handle_deltas`: apply popped deltas to the indexer, then say what handlers must hear.
//! One function, as in client-go's `processDeltas`, kept free of I/O and locks of its own.
//!
//! Two things client-go does not do: an event older than the cached object is not applied
//! (the cache never goes back in time; the skip is returned, for the informer to report),
//! and the store's resourceVersion follows what was applied (the queue's marks: the end of
//! a relist, a bookmark; and, for a queue in event order, each event's own version).

use std::sync::Arc;

use kube::Resource;

use super::Notification;
use crate::resource_version::of_object;
use crate::{
    ObjectKey, Store,
    fifo::{Delta, DeltaType, Deltas},
    store::Transaction,
};

/// A notification for the handlers, and whether it is a resync (which only handlers due
/// for one receive).
#[derive(Debug)]
pub(crate) struct Distribution<K> {
    /// What the handlers hear.
    pub(crate) notification: Notification<K>,
    /// Whether it is a resync (a `Sync`, or a relist that did not change the object).
    pub(crate) is_sync: bool,
}

/// An event that was not applied because the cache holds a newer version of the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StaleEvent {
    /// The object's key.
    pub(crate) key: ObjectKey,
    /// What the event was.
    pub(crate) delta: DeltaType,
    /// The cached object's resourceVersion.
    pub(crate) cached: String,
    /// The event's resourceVersion.
    pub(crate) event: String,
}

/// Applies `deltas` to `store` (the indexer first) and appends what to distribute:
/// an add for an object not cached, an update for one that was (also for `Replaced` and
/// `Sync`), a delete for `Deleted`. A `Sync`, or a `Replaced` whose resourceVersion did not
/// change, is marked as a resync. An add, update or relist older than the cached object is
/// skipped and returned.
///
/// One element of what the informer applies by [`handle_batch`], on its own: for the unit
/// tests and [`apply_deltas`].
#[cfg(any(test, feature = "testing"))]
pub(crate) fn handle_deltas<K: Resource>(
    store: &Store<K>,
    deltas: &Deltas<K>,
    is_in_initial_list: bool,
    out: &mut Vec<Distribution<K>>,
) -> Vec<StaleEvent> {
    let mut stale = Vec::new();
    store.transaction(|txn| {
        apply(txn, deltas, is_in_initial_list, true, out, &mut stale);
    });
    stale
}

/// Applies `deltas` to `store` as an informer does, without handlers: an event older than
/// the cached object is skipped.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::core::ObjectMeta;
/// use kube_informer::{ObjectKey, Store, informer::apply_deltas, fifo::{Delta, Deltas}};
///
/// let store = Store::default();
/// let cm = Arc::new(ConfigMap {
///     metadata: ObjectMeta { namespace: Some("ns".into()), name: Some("a".into()), ..Default::default() },
///     ..Default::default()
/// });
/// apply_deltas(&store, &Deltas::new(ObjectKey::new(Some("ns"), "a"), Delta::Added(cm)), false);
/// assert_eq!(store.len(), 1);
/// ```
// For the reflector tests and benchmarks, which drain a FIFO into a store as an informer
// does; not part of the supported API (an informer is).
#[cfg(feature = "testing")]
#[doc(hidden)]
pub fn apply_deltas<K: Resource>(store: &Store<K>, deltas: &Deltas<K>, is_in_initial_list: bool) {
    handle_deltas(store, deltas, is_in_initial_list, &mut Vec::new());
}

/// The informer's processing step: a whole batch of deltas applied under one write lock of
/// the store, so readers see the batch applied entirely or not at all. `ordered` says
/// whether the batch is in event order (a [`RealFifo`](crate::fifo::RealFifo)), so that each
/// event's resourceVersion can become the store's; otherwise only the queue's marks (relist
/// ends, bookmarks) move it.
pub(crate) fn handle_batch<K: Resource>(
    store: &Store<K>,
    batch: &[(Deltas<K>, bool)],
    ordered: bool,
    out: &mut Vec<Distribution<K>>,
) -> Vec<StaleEvent> {
    let mut stale = Vec::new();
    store.transaction(|txn| {
        for (deltas, is_in_initial_list) in batch {
            apply(txn, deltas, *is_in_initial_list, ordered, out, &mut stale);
        }
    });
    stale
}

fn apply<K: Resource>(
    txn: &mut Transaction<'_, K>,
    deltas: &Deltas<K>,
    is_in_initial_list: bool,
    ordered: bool,
    out: &mut Vec<Distribution<K>>,
    stale: &mut Vec<StaleEvent>,
) {
    let key = deltas.key();
    for delta in deltas {
        let distribute = match delta {
            Delta::Deleted(deleted) => {
                txn.delete_by_key(key.as_str());
                if ordered && !deleted.is_final_state_unknown() {
                    txn.set_resource_version_of(deleted.object().as_ref());
                }
                Distribution {
                    notification: Notification::Delete(deleted.clone()),
                    is_sync: false,
                }
            }
            Delta::Added(new) | Delta::Updated(new) | Delta::Replaced(new) | Delta::Sync(new) => {
                let cached = txn.get_by_key(key.as_str());
                if let Some(old) = &cached
                    && !matches!(delta, Delta::Sync(_))
                    && let (Some(have), Some(got)) =
                        (of_object(old.as_ref()), of_object(new.as_ref()))
                    && got < have
                {
                    stale.push(StaleEvent {
                        key: key.clone(),
                        delta: delta.delta_type(),
                        cached: have.to_string(),
                        event: got.to_string(),
                    });
                    continue;
                }
                if ordered && matches!(delta, Delta::Added(_) | Delta::Updated(_)) {
                    txn.set_resource_version_of(new.as_ref());
                }
                match txn.insert(key.clone(), new.clone()) {
                    Some(old) => {
                        let unchanged = || {
                            let rv = |o: &Arc<K>| o.meta().resource_version.clone();
                            rv(&old).is_some() && rv(&old) == rv(new)
                        };
                        let is_sync = matches!(delta, Delta::Sync(_))
                            || (matches!(delta, Delta::Replaced(_)) && unchanged());
                        Distribution {
                            notification: Notification::Update {
                                old,
                                new: new.clone(),
                            },
                            is_sync,
                        }
                    }
                    None => Distribution {
                        notification: Notification::Add {
                            object: new.clone(),
                            is_in_initial_list,
                        },
                        is_sync: false,
                    },
                }
            }
        };
        out.push(distribute);
    }
    for (namespace, reached) in deltas.reached() {
        match namespace {
            Some(ns) => txn.set_resource_version_in(ns, reached),
            None => txn.set_resource_version(reached),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::ObjectMeta;

    use super::*;
    use crate::{DeletedObject, ObjectKey};

    fn cm(rv: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("a".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn key() -> ObjectKey {
        ObjectKey::new(Some("ns"), "a")
    }

    /// (kind, rv of the object, is_sync) for compact assertions.
    fn shape(d: &Distribution<ConfigMap>) -> (&'static str, String, bool) {
        let kind = match &d.notification {
            Notification::Add { .. } => "add",
            Notification::Update { .. } => "update",
            Notification::Delete(_) => "delete",
        };
        let rv = d
            .notification
            .object()
            .metadata
            .resource_version
            .clone()
            .unwrap();
        (kind, rv, d.is_sync)
    }

    fn run(
        store: &Store<ConfigMap>,
        deltas: Vec<Delta<ConfigMap>>,
        initial: bool,
    ) -> Vec<(&'static str, String, bool)> {
        let mut it = deltas.into_iter();
        let mut all = Deltas::new(key(), it.next().unwrap());
        it.for_each(|d| all.push(d));
        let mut out = Vec::new();
        assert!(handle_deltas(store, &all, initial, &mut out).is_empty());
        out.iter().map(shape).collect()
    }

    #[test]
    fn the_store_decides_between_add_and_update() {
        let store = Store::default();
        let got = run(
            &store,
            vec![
                Delta::Added(cm("1")),
                Delta::Updated(cm("2")),
                Delta::Added(cm("3")),
            ],
            true,
        );
        assert_eq!(
            got,
            [
                ("add", "1".into(), false),
                ("update", "2".into(), false),
                ("update", "3".into(), false)
            ]
        );
        assert_eq!(
            store
                .get_by_key("ns/a")
                .unwrap()
                .metadata
                .resource_version
                .as_deref(),
            Some("3")
        );
    }

    #[test]
    fn sync_and_unchanged_relists_are_resyncs_changed_relists_are_not() {
        let store = Store::default();
        store.add(cm("5")).unwrap();
        let got = run(
            &store,
            vec![
                Delta::Sync(cm("5")),
                Delta::Replaced(cm("5")),
                Delta::Replaced(cm("6")),
            ],
            false,
        );
        assert_eq!(
            got,
            [
                ("update", "5".into(), true),
                ("update", "5".into(), true),
                ("update", "6".into(), false)
            ]
        );
    }

    #[test]
    fn deletes_remove_from_the_store_before_handlers_hear_of_it() {
        let store = Store::default();
        store.add(cm("1")).unwrap();
        let tombstone = DeletedObject::FinalStateUnknown {
            key: key(),
            last_known: cm("1"),
        };
        let got = run(&store, vec![Delta::Deleted(tombstone)], false);
        assert_eq!(got, [("delete", "1".into(), false)]);
        assert!(store.is_empty());
    }

    #[test]
    fn an_event_older_than_the_cache_is_skipped_and_returned() {
        let store = Store::default();
        store.add(cm("10")).unwrap();
        let mut out = Vec::new();
        let all = |d| Deltas::new(key(), d);
        for older in [
            Delta::Updated(cm("9")),
            Delta::Added(cm("7")),
            Delta::Replaced(cm("8")),
        ] {
            let stale = handle_deltas(&store, &all(older), false, &mut out);
            assert_eq!(stale.len(), 1, "{stale:?}");
            assert_eq!(
                (stale[0].cached.as_str(), stale[0].key.as_str()),
                ("10", "ns/a")
            );
        }
        assert!(out.is_empty(), "handlers hear nothing of a stale event");
        let cached = store.get_by_key("ns/a").unwrap();
        assert_eq!(cached.metadata.resource_version.as_deref(), Some("10"));
        // The same or a newer version applies as usual; a sync of the cached object too.
        assert!(handle_deltas(&store, &all(Delta::Updated(cm("10"))), false, &mut out).is_empty());
        assert!(handle_deltas(&store, &all(Delta::Updated(cm("11"))), false, &mut out).is_empty());
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn the_store_version_follows_events_and_marks() {
        let store = Store::default();
        let mut out = Vec::new();
        let entry = |d| Deltas::new(key(), d);
        handle_batch(
            &store,
            &[(entry(Delta::Added(cm("4"))), false)],
            true,
            &mut out,
        );
        assert_eq!(store.resource_version(), "4");
        // Out of order (a DeltaFifo): only marks move it.
        handle_batch(
            &store,
            &[(entry(Delta::Updated(cm("6"))), false)],
            false,
            &mut out,
        );
        assert_eq!(store.resource_version(), "4");
        let mut marked = entry(Delta::Updated(cm("7")));
        marked.mark(None, "12");
        handle_batch(&store, &[(marked, false)], false, &mut out);
        assert_eq!(store.resource_version(), "12");
    }

    #[test]
    fn initial_list_adds_carry_the_flag() {
        let store = Store::default();
        let mut out = Vec::new();
        handle_deltas(
            &store,
            &Deltas::new(key(), Delta::Replaced(cm("1"))),
            true,
            &mut out,
        );
        assert!(matches!(
            out[0].notification,
            Notification::Add {
                is_in_initial_list: true,
                ..
            }
        ));
    }
}
