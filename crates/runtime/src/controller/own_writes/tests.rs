//! Which cache a write is waited for in, on a paused clock over bare stores: dynamic kinds
//! that share one Rust type, metadata-only caches, selectors that exclude the write.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Resource,
    api::{DynamicObject, PartialObjectMeta},
};
use kube_informer::{ObjectKey, Selectors, Store};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::*;

const LIMIT: Duration = Duration::from_secs(5);

fn object<K: DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).unwrap()
}

fn widget(version: &str) -> DynamicObject {
    object(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "web", "namespace": "ns", "resourceVersion": version}}))
}

fn config_map(version: &str, labels: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web", "namespace": "ns", "resourceVersion": version, "labels": labels}})
}

fn add<T>(
    own: &OwnWrites,
    kind: (&str, &str),
    types: Vec<TypeId>,
    selectors: Selectors,
    store: &Store<T>,
) where
    T: Resource + Send + Sync + 'static,
{
    own.cache(CacheOf {
        kind: GroupKind {
            group: kind.0.into(),
            kind: kind.1.into(),
        },
        plural: format!("{}s", kind.1.to_lowercase()),
        types,
        selectors: &selectors,
        namespaced: true,
        store: store.read_only(),
    });
}

/// Runs `write` as a reconcile of `ns/web`, then the wait of its next reconcile, in a task.
async fn reconcile_then_settle(
    own: &Arc<OwnWrites>,
    write: impl Future<Output = ()>,
) -> tokio::task::JoinHandle<Settled> {
    let key = ObjectKey::new(Some("ns"), "web");
    let record = own.record_for();
    recording(Arc::clone(&record), write).await;
    own.record(&key, &record);
    let own = Arc::clone(own);
    let settled = tokio::spawn(async move { own.settle(&key).await });
    tokio::task::yield_now().await;
    settled
}

#[tokio::test(start_paused = true)]
async fn a_dynamic_child_named_like_its_owner_is_waited_for_in_its_own_kinds_cache() {
    let own = Arc::new(OwnWrites::new(Some(LIMIT)));
    let (widgets, config_maps) = (
        Store::<DynamicObject>::default(),
        Store::<DynamicObject>::default(),
    );
    widgets.add(Arc::new(widget("5"))).unwrap();
    add(
        &own,
        ("example.com", "Widget"),
        vec![],
        Selectors::default(),
        &widgets,
    );
    add(
        &own,
        ("", "ConfigMap"),
        vec![],
        Selectors::default(),
        &config_maps,
    );
    let child: DynamicObject = object(config_map("7", json!({})));
    let settled = reconcile_then_settle(&own, async { wrote(&child) }).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!settled.is_finished(), "waits for the child's cache");
    config_maps.add(Arc::new(child.clone())).unwrap();
    assert_eq!(settled.await.unwrap(), Settled::Reached);
}

#[tokio::test(start_paused = true)]
async fn a_write_recorded_whole_is_waited_for_in_a_metadata_only_cache() {
    let own = Arc::new(OwnWrites::new(Some(LIMIT)));
    let metadata = Store::<PartialObjectMeta<Secret>>::default();
    let types = vec![
        TypeId::of::<PartialObjectMeta<Secret>>(),
        TypeId::of::<Secret>(),
    ];
    add(&own, ("", "Secret"), types, Selectors::default(), &metadata);
    let secret: Secret =
        object(json!({"metadata": {"name": "web", "namespace": "ns", "resourceVersion": "9"}}));
    let settled = reconcile_then_settle(&own, async { wrote(&secret) }).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!settled.is_finished(), "waits for the Secret's metadata");
    let meta: PartialObjectMeta<Secret> = object(json!({"metadata": secret.metadata}));
    metadata.add(Arc::new(meta)).unwrap();
    assert_eq!(settled.await.unwrap(), Settled::Reached);
}

#[tokio::test(start_paused = true)]
async fn a_write_the_selector_excludes_is_not_waited_for_and_one_it_moves_out_is_waited_until_dropped()
 {
    let own = Arc::new(OwnWrites::new(Some(LIMIT)));
    let selected = Store::<ConfigMap>::default();
    let web = Selectors::default().labels("app=web");
    add(
        &own,
        ("", "ConfigMap"),
        vec![TypeId::of::<ConfigMap>()],
        web,
        &selected,
    );

    // Created without the label: the cache will never show it.
    let start = tokio::time::Instant::now();
    let other: ConfigMap = object(config_map("7", json!({"app": "db"})));
    let settled = reconcile_then_settle(&own, async { wrote(&other) }).await;
    assert_eq!(settled.await.unwrap(), Settled::Reached, "no wait at all");
    assert_eq!(start.elapsed(), Duration::ZERO);

    // Held with the label, then the label removed: waited for until the cache drops it.
    selected
        .add(Arc::new(object(config_map("8", json!({"app": "web"})))))
        .unwrap();
    let moved: ConfigMap = object(config_map("9", json!({})));
    let settled = reconcile_then_settle(&own, async { wrote(&moved) }).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !settled.is_finished(),
        "the cache still holds the labelled copy"
    );
    selected.delete(&moved).unwrap();
    assert_eq!(settled.await.unwrap(), Settled::Reached);
}

#[tokio::test(start_paused = true)]
async fn a_write_carried_to_another_task_is_recorded_even_after_the_reconcile_returned() {
    let own = Arc::new(OwnWrites::new(Some(LIMIT)));
    let cached = Store::<ConfigMap>::default();
    add(
        &own,
        ("", "ConfigMap"),
        vec![TypeId::of::<ConfigMap>()],
        Selectors::default(),
        &cached,
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let key = ObjectKey::new(Some("ns"), "web");
    let record = own.record_for();
    let mut late = None;
    recording(Arc::clone(&record), async {
        // Spawned by the reconcile, carrying its record; it writes after the reconcile.
        late = Some(tokio::spawn(carry_writes(async move {
            let _ = rx.await;
            wrote(&object::<ConfigMap>(config_map("4", json!({}))));
        })));
    })
    .await;
    let late = late.unwrap();
    own.record(&key, &record);
    tx.send(()).unwrap();
    late.await.unwrap();
    let settled = {
        let own = Arc::clone(&own);
        let key = key.clone();
        tokio::spawn(async move { own.settle(&key).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!settled.is_finished(), "the late write is waited for");
    cached
        .add(Arc::new(object(config_map("4", json!({})))))
        .unwrap();
    assert_eq!(settled.await.unwrap(), Settled::Reached);
}

#[tokio::test(start_paused = true)]
async fn a_deletion_in_a_cache_of_several_namespaces_is_seen_in_its_own_namespace() {
    let own = Arc::new(OwnWrites::new(Some(LIMIT)));
    let cached = Store::<ConfigMap>::default();
    cached.track_namespaces(["ns".to_owned(), "quiet".to_owned()]);
    let types = vec![TypeId::of::<ConfigMap>()];
    add(
        &own,
        ("", "ConfigMap"),
        types,
        Selectors::default(),
        &cached,
    );
    let held: ConfigMap = object(config_map("5", json!({})));
    cached.add(Arc::new(held.clone())).unwrap();
    // The last finalizer removed: the answer is the object, being deleted, with none left.
    let mut gone = held.clone();
    gone.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    gone.metadata.uid = None;
    let settled = reconcile_then_settle(&own, async { wrote(&gone) }).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!settled.is_finished(), "the cache still holds it");
    // Deleted in `ns` only: the quiet namespace's version does not move.
    let mut deleted = held.clone();
    deleted.metadata.resource_version = Some("6".into());
    cached.delete(&deleted).unwrap();
    assert_eq!(settled.await.unwrap(), Settled::Reached);
}

/// Writes kept for a key stay bounded however often it is written to without being
/// reconciled: per object, its latest write only; writes older than ten limits are dropped.
#[tokio::test(start_paused = true)]
async fn a_key_written_again_and_again_keeps_one_write_per_object() {
    let own = Arc::new(OwnWrites::new(Some(LIMIT)));
    let config_maps = Store::<ConfigMap>::default();
    add(
        &own,
        ("", "ConfigMap"),
        vec![TypeId::of::<ConfigMap>()],
        Selectors::default(),
        &config_maps,
    );
    let key = ObjectKey::new(Some("ns"), "web");
    let write = |version: u64, name: &str| {
        let cm: ConfigMap = object(json!({"metadata": {"name": name, "namespace": "ns",
            "resourceVersion": version.to_string()}}));
        Written::new(&cm.metadata, None, TypeId::of::<ConfigMap>(), false).unwrap()
    };
    for version in 1..=1000 {
        own.keep(&key, vec![write(version, "a"), write(version, "b")]);
    }
    let kept = |own: &OwnWrites| own.pending.lock().by_key.get(&key).map_or(0, Vec::len);
    assert_eq!(kept(&own), 2, "one per object");
    let versions: Vec<String> = own.pending.lock().by_key[&key]
        .iter()
        .map(|p| p.written.version.to_string())
        .collect();
    assert_eq!(versions, ["1000", "1000"], "the latest");
    // An older write recorded late does not replace a newer one.
    own.keep(&key, vec![write(7, "a")]);
    assert_eq!(kept(&own), 3);
    tokio::time::advance(LIMIT * 11).await;
    own.keep(&key, vec![write(1001, "c")]);
    assert_eq!(kept(&own), 1, "the stale ones dropped");
}

/// A write at a version past 64 bits (KEP-5504 allows 128) is waited for: a `u64` parse
/// dropped it, and the next reconcile read a cache without it. The cache at an older
/// version that is longer as text does not count as newer.
#[tokio::test(start_paused = true)]
async fn a_write_at_a_version_past_64_bits_is_waited_for() {
    let own = Arc::new(OwnWrites::new(Some(LIMIT)));
    let widgets = Store::<DynamicObject>::default();
    widgets
        .add(Arc::new(widget("99999999999999999999")))
        .unwrap();
    add(
        &own,
        ("example.com", "Widget"),
        vec![],
        Selectors::default(),
        &widgets,
    );
    let written = widget("100000000000000000000");
    let settled = reconcile_then_settle(&own, async { wrote(&written) }).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!settled.is_finished(), "the cache holds the older copy");
    widgets.update(Arc::new(written.clone())).unwrap();
    assert_eq!(settled.await.unwrap(), Settled::Reached);
}
