//! `handle_deltas`: apply popped deltas to the indexer, then say what handlers must hear.
//! One function, as in client-go's `processDeltas`, kept free of I/O and locks of its own.

use std::sync::Arc;

use kube::Resource;

use super::Notification;
use crate::{Delta, Deltas, Store, store::Transaction};

/// A notification for the handlers, and whether it is a resync (which only handlers due
/// for one receive).
#[derive(Debug)]
pub struct Distribution<K> {
    /// What the handlers hear.
    pub notification: Notification<K>,
    /// Whether it is a resync (a `Sync`, or a relist that did not change the object).
    pub is_sync: bool,
}

/// Applies `deltas` to `store` (the indexer first) and appends what to distribute:
/// an add for an object not cached, an update for one that was (also for `Replaced` and
/// `Sync`), a delete for `Deleted`. A `Sync`, or a `Replaced` whose resourceVersion did not
/// change, is marked as a resync.
///
/// The informer's processing step; public for custom informer loops.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::core::ObjectMeta;
/// use kube_informer::{Delta, Deltas, ObjectKey, Store, informer::{handle_deltas, Notification}};
///
/// let store = Store::default();
/// let cm = Arc::new(ConfigMap {
///     metadata: ObjectMeta { namespace: Some("ns".into()), name: Some("a".into()), ..Default::default() },
///     ..Default::default()
/// });
/// let mut out = Vec::new();
/// handle_deltas(&store, &Deltas::new(ObjectKey::new(Some("ns"), "a"), Delta::Added(cm)), false, &mut out);
/// assert!(matches!(out[0].notification, Notification::Add { .. }));
/// assert_eq!(store.len(), 1);
/// ```
pub fn handle_deltas<K: Resource>(
    store: &Store<K>,
    deltas: &Deltas<K>,
    is_in_initial_list: bool,
    out: &mut Vec<Distribution<K>>,
) {
    store.transaction(|txn| apply(txn, deltas, is_in_initial_list, out));
}

/// [`handle_deltas`] for a whole batch, under one write lock of the store: readers see the
/// batch applied entirely or not at all.
pub fn handle_batch<K: Resource>(
    store: &Store<K>,
    batch: &[(Deltas<K>, bool)],
    out: &mut Vec<Distribution<K>>,
) {
    store.transaction(|txn| {
        for (deltas, is_in_initial_list) in batch {
            apply(txn, deltas, *is_in_initial_list, out);
        }
    });
}

fn apply<K: Resource>(
    txn: &mut Transaction<'_, K>,
    deltas: &Deltas<K>,
    is_in_initial_list: bool,
    out: &mut Vec<Distribution<K>>,
) {
    let key = deltas.key();
    for delta in deltas {
        let distribute = match delta {
            Delta::Deleted(deleted) => {
                txn.delete_by_key(key.as_str());
                Distribution {
                    notification: Notification::Delete(deleted.clone()),
                    is_sync: false,
                }
            }
            Delta::Added(new) | Delta::Updated(new) | Delta::Replaced(new) | Delta::Sync(new) => {
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
        handle_deltas(store, &all, initial, &mut out);
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
