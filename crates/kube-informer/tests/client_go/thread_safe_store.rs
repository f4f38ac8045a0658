//! client-go `tools/cache/thread_safe_store_test.go`, against [`Store`] (our store is the
//! thread-safe map and the indexer in one). Go's string objects become ConfigMaps whose
//! `data.v` the index function reads; Go's keys are their names.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::{Indexers, Store};

fn cm(name: &str, v: &str, rv: &str) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some([("v".to_owned(), v.to_owned())].into());
    if !rv.is_empty() {
        cm.metadata.resource_version = Some(rv.into());
    }
    Arc::new(cm)
}

/// Go's index function of these tests: the object's value, split on commas.
fn by_value(cm: &ConfigMap) -> Vec<String> {
    cm.data.as_ref().unwrap()["v"]
        .split(',')
        .map(str::to_owned)
        .collect()
}

fn store() -> Store<ConfigMap> {
    Store::new(Indexers::new().index("testIndexer", by_value))
}

fn keys(store: &Store<ConfigMap>, value: &str) -> Vec<String> {
    let mut keys: Vec<String> = store
        .index_keys("testIndexer", value)
        .unwrap()
        .iter()
        .map(|k| k.to_string())
        .collect();
    keys.sort();
    keys
}

/// Mirrors `TestThreadSafeStoreDeleteRemovesEmptySetsFromIndex`: a value with no objects
/// left is gone from the index (not an empty set).
#[test]
fn delete_removes_empty_sets_from_index() {
    let store = store();
    store.add(cm("testKey", "testKey", "")).unwrap();
    assert_eq!(keys(&store, "testKey"), ["testKey"]);
    store.delete_by_key("testKey");
    assert!(
        store
            .list_index_func_values("testIndexer")
            .unwrap()
            .is_empty()
    );
}

/// Mirrors `TestThreadSafeStoreAddKeepsNonEmptySetPostDeleteFromIndex`.
#[test]
fn add_keeps_non_empty_set_post_delete_from_index() {
    let store = Store::new(
        Indexers::new().index("testIndexer", |_: &ConfigMap| vec!["testIndex".to_owned()]),
    );
    store.add(cm("retain", "retain", "")).unwrap();
    store.add(cm("delete", "delete", "")).unwrap();
    assert_eq!(
        store.index_keys("testIndexer", "testIndex").unwrap().len(),
        2
    );
    store.delete_by_key("delete");
    let left = store.index_keys("testIndexer", "testIndex").unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].as_str(), "retain");
}

/// Mirrors `TestThreadSafeStoreIndexingFunctionsWithMultipleValues`.
#[test]
fn indexing_functions_with_multiple_values() {
    let store = store();
    let expect = |foo: &[&str], bar: &[&str], baz: &[&str]| {
        assert_eq!(keys(&store, "foo"), foo);
        assert_eq!(keys(&store, "bar"), bar);
        assert_eq!(keys(&store, "baz"), baz);
    };
    store.add(cm("key1", "foo", "")).unwrap();
    store.add(cm("key2", "bar", "")).unwrap();
    expect(&["key1"], &["key2"], &[]);
    store.update(cm("key2", "foo,bar", "")).unwrap();
    expect(&["key1", "key2"], &["key2"], &[]);
    store.update(cm("key1", "foo,bar", "")).unwrap();
    expect(&["key1", "key2"], &["key1", "key2"], &[]);
    store.add(cm("key3", "foo,bar,baz", "")).unwrap();
    expect(
        &["key1", "key2", "key3"],
        &["key1", "key2", "key3"],
        &["key3"],
    );
    store.update(cm("key1", "foo", "")).unwrap();
    expect(&["key1", "key2", "key3"], &["key2", "key3"], &["key3"]);
    store.update(cm("key2", "bar", "")).unwrap();
    expect(&["key1", "key3"], &["key2", "key3"], &["key3"]);
    store.delete_by_key("key1");
    expect(&["key3"], &["key2", "key3"], &["key3"]);
    store.delete_by_key("key3");
    expect(&[], &["key2"], &[]);
}

/// Mirrors `TestThreadSafeStoreRV` (client-go 1.36): the store's resourceVersion follows
/// every write that carries one. Go's "non-meta object" case cannot be written here (every
/// object has metadata); an object without a resourceVersion stands in for it.
#[test]
fn resource_version() {
    // Initial state.
    assert_eq!(store().resource_version(), "");

    // Add, update and delete.
    let store = store();
    store.add(cm("key1", "a", "10")).unwrap();
    assert_eq!(store.resource_version(), "10");
    store.add(cm("key3", "a", "10")).unwrap();
    assert_eq!(store.resource_version(), "10");
    store.add(cm("key4", "a", "20")).unwrap();
    assert_eq!(store.resource_version(), "20");
    store.delete(&cm("key4", "a", "30")).unwrap(); // Go's DeleteWithObject
    assert_eq!(store.resource_version(), "30");
    store.add(cm("key5", "a", "")).unwrap();
    assert_eq!(
        store.resource_version(),
        "30",
        "a write without a version keeps it"
    );
    store.add(cm("key6", "a", "40")).unwrap();
    assert_eq!(store.resource_version(), "40");
    store.delete_by_key("key6"); // Go's Delete(key): no object, no version
    assert_eq!(store.resource_version(), "40");
    // A batch of writes (a transaction, crate-internal) is tested in src/store/tests.rs.

    // Replace.
    let replaced = self::store();
    replaced.add(cm("key1", "a", "10")).unwrap();
    replaced
        .replace(vec![cm("key3", "a", "40"), cm("key2", "a", "30")], "50")
        .unwrap();
    assert_eq!(replaced.resource_version(), "50");

    // Delete.
    let deleted = self::store();
    deleted.add(cm("key1", "a", "10")).unwrap();
    deleted.delete(&cm("key1", "a", "20")).unwrap();
    assert_eq!(deleted.resource_version(), "20");
}
