//! The store's tests: each operation, index upkeep, atomic relists, a model property.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::ObjectMeta;
use proptest::prelude::*;

use super::*;
use crate::NAMESPACE_INDEX;

/// A config map whose labels drive the test indexes: `node` (one value) and `tag-*`
/// (zero or more values).
fn cm(ns: &str, name: &str, node: &str, tags: &[&str]) -> Arc<ConfigMap> {
    let mut labels: BTreeMap<String, String> = tags
        .iter()
        .map(|t| (format!("tag-{t}"), String::new()))
        .collect();
    labels.insert("node".into(), node.into());
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            namespace: (!ns.is_empty()).then(|| ns.into()),
            name: Some(name.into()),
            labels: Some(labels),
            ..Default::default()
        },
        ..Default::default()
    })
}

fn by_node(obj: &ConfigMap) -> Vec<String> {
    let labels = obj.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get("node"))
        .cloned()
        .into_iter()
        .collect()
}

fn by_tag(obj: &ConfigMap) -> Vec<String> {
    let labels = obj.metadata.labels.iter().flatten();
    labels
        .filter_map(|(k, _)| k.strip_prefix("tag-").map(str::to_owned))
        .collect()
}

fn indexers() -> Indexers<ConfigMap> {
    Indexers::new()
        .namespace()
        .index("by-node", by_node)
        .index("by-tag", by_tag)
}

fn keys_of(objs: Vec<Arc<ConfigMap>>) -> BTreeSet<String> {
    let key = |o: &Arc<ConfigMap>| meta_namespace_key(o.as_ref()).unwrap().to_string();
    objs.iter().map(key).collect()
}

#[test]
fn add_get_update_delete() {
    let store = Store::new(indexers());
    store.add(cm("ns", "a", "n1", &[])).unwrap();
    assert_eq!(store.len(), 1);
    let got = store.get_by_key("ns/a").unwrap();
    assert_eq!(by_node(&got), ["n1"]);
    assert!(store.get(&cm("ns", "a", "other", &[])).unwrap().is_some());

    store.update(cm("ns", "a", "n2", &[])).unwrap();
    assert_eq!(by_node(&store.get_by_key("ns/a").unwrap()), ["n2"]);
    assert_eq!(store.len(), 1);

    let removed = store.delete(&cm("ns", "a", "ignored", &[])).unwrap();
    assert_eq!(by_node(&removed.unwrap()), ["n2"]);
    assert!(store.is_empty());
    assert!(store.delete_by_key("ns/a").is_none());
    assert_eq!(
        store.list_index_func_values("by-node").unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn reads_hand_out_the_stored_arc_not_a_copy() {
    let store = Store::default();
    let obj = cm("ns", "a", "n1", &[]);
    store.add(obj.clone()).unwrap();
    assert!(Arc::ptr_eq(&store.get_by_key("ns/a").unwrap(), &obj));
    assert!(Arc::ptr_eq(&store.list()[0], &obj));
}

#[test]
fn an_object_moves_between_buckets_and_empty_buckets_disappear() {
    let store = Store::new(indexers());
    store.add(cm("ns", "a", "n1", &["x", "y"])).unwrap();
    store.add(cm("ns", "b", "n1", &["y"])).unwrap();
    store.update(cm("ns", "a", "n2", &["y", "z"])).unwrap();

    assert_eq!(
        keys_of(store.by_index("by-node", "n1").unwrap()),
        ["ns/b".into()].into()
    );
    assert_eq!(
        keys_of(store.by_index("by-node", "n2").unwrap()),
        ["ns/a".into()].into()
    );
    assert!(store.by_index("by-tag", "x").unwrap().is_empty());
    let mut tags = store.list_index_func_values("by-tag").unwrap();
    tags.sort();
    assert_eq!(tags, ["y", "z"], "the emptied bucket 'x' must be gone");

    store.delete_by_key("ns/b");
    assert_eq!(store.list_index_func_values("by-node").unwrap(), ["n2"]);
}

#[test]
fn index_keys_share_the_stored_key_allocation() {
    let store = Store::new(indexers());
    store.add(cm("ns", "a", "n1", &["t"])).unwrap();
    // A second write computes a fresh key; the store must keep its first allocation.
    store.update(cm("ns", "a", "n2", &["t"])).unwrap();
    let map_key = store.list_keys().pop().unwrap();
    for (index, value) in [("by-node", "n2"), ("by-tag", "t"), (NAMESPACE_INDEX, "ns")] {
        let index_key = store.index_keys(index, value).unwrap().pop().unwrap();
        assert!(Arc::ptr_eq(&map_key.0, &index_key.0), "{index}");
    }
}

#[test]
fn unknown_indexes_are_a_clear_error() {
    let store = Store::new(indexers());
    let err = store.by_index("nope", "v").unwrap_err();
    assert_eq!(
        err,
        IndexError::NoSuchIndex {
            name: "nope".into()
        }
    );
    assert!(err.to_string().contains("\"nope\""));
    assert!(store.index_keys("nope", "v").is_err());
    assert!(store.list_index_func_values("nope").is_err());
}

#[test]
fn indexers_added_late_are_built_over_existing_objects() {
    let store = Store::new(Indexers::new().namespace());
    store.add(cm("a", "x", "n1", &[])).unwrap();
    store.add(cm("b", "y", "n1", &[])).unwrap();
    store
        .add_indexers(Indexers::new().index("by-node", by_node))
        .unwrap();
    assert_eq!(store.by_index("by-node", "n1").unwrap().len(), 2);
    // ... and kept up to date afterwards.
    store.update(cm("a", "x", "n2", &[])).unwrap();
    assert_eq!(store.by_index("by-node", "n1").unwrap().len(), 1);
    assert_eq!(store.indexer_names(), [NAMESPACE_INDEX, "by-node"]);
}

#[test]
fn a_conflicting_indexer_name_is_refused_and_nothing_is_added() {
    let store = Store::new(Indexers::new().namespace());
    let err = store
        .add_indexers(
            Indexers::new()
                .index("fresh", by_node)
                .index(NAMESPACE_INDEX, by_node),
        )
        .unwrap_err();
    assert_eq!(
        err,
        IndexError::Conflict {
            name: NAMESPACE_INDEX.into()
        }
    );
    assert_eq!(
        store.indexer_names(),
        [NAMESPACE_INDEX],
        "'fresh' must not be half-added"
    );
    // The built-in namespace index asked for again is not a conflict.
    store
        .add_indexers(Indexers::new().namespace().index("fresh", by_node))
        .unwrap();
    assert_eq!(store.indexer_names(), [NAMESPACE_INDEX, "fresh"]);
}

#[test]
fn replace_swaps_the_whole_content_and_rebuilds_indexes() {
    let store = Store::new(indexers());
    store.add(cm("ns", "old", "n1", &["t"])).unwrap();
    store
        .replace(
            vec![cm("ns", "new", "n2", &[]), cm("", "cluster", "n2", &[])],
            "42",
        )
        .unwrap();
    assert_eq!(
        keys_of(store.list()),
        ["cluster".into(), "ns/new".into()].into()
    );
    assert!(store.by_index("by-node", "n1").unwrap().is_empty());
    assert_eq!(store.by_index("by-node", "n2").unwrap().len(), 2);
    assert!(store.list_index_func_values("by-tag").unwrap().is_empty());
    assert_eq!(store.resource_version(), "42");
}

#[test]
fn replace_with_a_nameless_item_changes_nothing() {
    let store = Store::new(indexers());
    store.add(cm("ns", "keep", "n1", &[])).unwrap();
    let nameless = Arc::new(ConfigMap::default());
    let err = store
        .replace(vec![cm("ns", "new", "n1", &[]), nameless], "2")
        .unwrap_err();
    assert!(matches!(err, KeyError::MissingName { .. }));
    assert_eq!(keys_of(store.list()), ["ns/keep".into()].into());
    assert_eq!(store.resource_version(), "");
}

// ---- model-based property test -------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Add(Arc<ConfigMap>),
    Delete(String),
    Replace(Vec<Arc<ConfigMap>>),
}

fn arb_obj() -> impl Strategy<Value = Arc<ConfigMap>> {
    let ns = prop::sample::select(vec!["", "x", "y"]);
    let name = prop::sample::select(vec!["a", "b", "c", "d"]);
    let node = prop::sample::select(vec!["n1", "n2", "n3"]);
    let tags = prop::sample::subsequence(vec!["p", "q", "r"], 0..=3);
    (ns, name, node, tags).prop_map(|(ns, name, node, tags)| cm(ns, name, node, &tags))
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => arb_obj().prop_map(Op::Add),
        3 => arb_obj().prop_map(|o| Op::Delete(meta_namespace_key(o.as_ref()).unwrap().to_string())),
        1 => prop::collection::vec(arb_obj(), 0..6).prop_map(Op::Replace),
    ]
}

type Dump = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// The indexes recomputed from scratch over the model, the naive way.
fn naive_indices(model: &BTreeMap<String, Arc<ConfigMap>>) -> Dump {
    type Func = fn(&ConfigMap) -> Vec<String>;
    let funcs: [(&str, Func); 3] = [
        (NAMESPACE_INDEX, crate::index::namespace_index::<ConfigMap>),
        ("by-node", by_node),
        ("by-tag", by_tag),
    ];
    funcs
        .iter()
        .map(|(name, func)| {
            let mut index: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (key, obj) in model {
                for value in func(obj) {
                    index.entry(value).or_default().push(key.clone());
                }
            }
            index.values_mut().for_each(|keys| keys.sort());
            (name.to_string(), index)
        })
        .collect()
}

proptest! {
    #[test]
    fn store_and_indexes_match_a_naive_model(ops in prop::collection::vec(arb_op(), 1..60)) {
        let store = Store::new(indexers());
        let mut model: BTreeMap<String, Arc<ConfigMap>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Add(obj) => {
                    let key = meta_namespace_key(obj.as_ref()).unwrap().to_string();
                    store.add(obj.clone()).unwrap();
                    model.insert(key, obj);
                }
                Op::Delete(key) => {
                    let removed = store.delete_by_key(&key);
                    prop_assert_eq!(removed.is_some(), model.remove(&key).is_some());
                }
                Op::Replace(list) => {
                    store.replace(list.clone(), "1").unwrap();
                    model = list
                        .into_iter()
                        .map(|o| (meta_namespace_key(o.as_ref()).unwrap().to_string(), o))
                        .collect();
                }
            }
            let keys: BTreeSet<String> = store.list_keys().iter().map(|k| k.to_string()).collect();
            prop_assert_eq!(&keys, &model.keys().cloned().collect::<BTreeSet<_>>());
            for (key, obj) in &model {
                prop_assert!(Arc::ptr_eq(&store.get_by_key(key).unwrap(), obj));
            }
            prop_assert_eq!(store.dump_indices(), naive_indices(&model));
        }
    }
}

// ---- concurrency ---------------------------------------------------------------

/// One writer moves objects between nodes and swaps whole generations with `replace`;
/// readers on other threads check that every read is self-consistent: each object a
/// bucket returns has that bucket's value, and a generation is seen whole or not at all.
#[test]
fn concurrent_readers_never_see_a_half_applied_write() {
    const N: usize = 200;
    let gen_index = |o: &ConfigMap| {
        by_tag(o)
            .into_iter()
            .filter(|t| t.starts_with("gen"))
            .collect()
    };
    let store = Store::new(indexers().index("gen", gen_index));
    let generation = |g: &str| {
        (0..N)
            .map(|i| cm("ns", &format!("o{i}"), "n1", &[g]))
            .collect::<Vec<_>>()
    };
    store.replace(generation("gen-a"), "1").unwrap();

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || reads < 100 {
                    for node in ["n1", "n2"] {
                        for obj in store.by_index("by-node", node).unwrap() {
                            assert_eq!(by_node(&obj), [node]);
                        }
                    }
                    for g in ["gen-a", "gen-b"] {
                        let seen = store.by_index("gen", g).unwrap().len();
                        assert!(seen == 0 || seen == N, "saw {seen} of {N} objects of {g}");
                    }
                    // One read of the whole cache holds exactly one whole generation.
                    let list = store.list();
                    let a = list
                        .iter()
                        .filter(|o| by_tag(o).contains(&"gen-a".to_owned()))
                        .count();
                    assert!(
                        (a, list.len()) == (N, N) || (a, list.len()) == (0, N),
                        "one list() saw {a} gen-a objects among {}",
                        list.len()
                    );
                    reads += 1;
                }
                reads
            })
        })
        .collect();

    for round in 0..200 {
        for i in (0..N).step_by(7) {
            let g = if round % 2 == 0 { "gen-a" } else { "gen-b" };
            let node = if round % 4 < 2 { "n2" } else { "n1" };
            // Move within the current generation, keeping it whole.
            if store
                .get_by_key(&format!("ns/o{i}"))
                .is_some_and(|o| by_tag(&o).contains(&g.to_owned()))
            {
                store
                    .update(cm("ns", &format!("o{i}"), node, &[g]))
                    .unwrap();
            }
        }
        let next = if round % 2 == 0 { "gen-b" } else { "gen-a" };
        store.replace(generation(next), round.to_string()).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        assert!(reader.join().expect("a reader saw an inconsistent cache") >= 100);
    }
}

#[test]
fn insert_refuses_a_key_that_is_not_the_objects() {
    let store = Store::new(indexers());
    let err = store
        .insert(
            ObjectKey::new(Some("ns"), "other"),
            cm("ns", "a", "n1", &[]),
        )
        .unwrap_err();
    assert!(matches!(err, KeyError::Mismatch { .. }), "{err}");
    assert!(store.is_empty(), "nothing stored under the wrong key");
    store
        .insert(ObjectKey::new(Some("ns"), "a"), cm("ns", "a", "n1", &[]))
        .unwrap();
    assert_eq!(store.len(), 1);
}

#[test]
fn the_version_is_the_newest_write_of_any_kind() {
    let store: Store<ConfigMap> = Store::default();
    let at = |rv: &str| {
        let mut obj = (*cm("ns", "a", "n1", &[])).clone();
        obj.metadata.resource_version = Some(rv.into());
        Arc::new(obj)
    };
    store.add(at("3")).unwrap();
    assert_eq!(store.resource_version(), "3");
    store.update(at("4")).unwrap();
    store.delete(&at("6")).unwrap();
    assert_eq!(store.resource_version(), "6");
    store.bookmark("9");
    assert_eq!(store.resource_version(), "9");
    store.replace(vec![at("2")], "12").unwrap();
    assert_eq!(store.resource_version(), "12");
}

#[test]
fn a_panicking_index_function_leaves_the_object_in_no_bucket_and_is_reported() {
    let picky = |o: &ConfigMap| {
        let name = o.metadata.name.clone().unwrap();
        assert!(name != "bad", "index bug");
        vec![name]
    };
    let store = Store::new(Indexers::new().index("name", picky));
    store.add(cm("ns", "good", "n1", &[])).unwrap();
    store.add(cm("ns", "bad", "n1", &[])).unwrap();
    assert_eq!(store.len(), 2);
    assert!(store.by_index("name", "bad").unwrap().is_empty());
    let failures = store.take_index_failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(
        (failures[0].index.as_str(), failures[0].key.as_str()),
        ("name", "ns/bad")
    );
    assert!(store.take_index_failures().is_empty(), "taken once");
    // Deleting it recomputes (and panics on) the old values: still consistent.
    store.delete_by_key("ns/bad");
    assert_eq!(store.by_index("name", "good").unwrap().len(), 1);
    assert_eq!(store.dump_indices()["name"].len(), 1);
}

#[test]
fn a_transactions_writes_leave_the_highest_version_they_wrote() {
    let store = Store::<ConfigMap>::default();
    let versioned = |name: &str, rv: &str| {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    };
    store.add(versioned("key1", "40")).unwrap();
    store.transaction(|txn| {
        for (key, rv) in [("key9", "40"), ("key10", "30"), ("key11", "50")] {
            txn.add(versioned(key, rv)).unwrap();
        }
    });
    assert_eq!(store.resource_version(), "50");
    assert_eq!(store.len(), 4);
}
