//! The informer's cache against the server: exact keys and resourceVersions.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use kube_informer::ReadOnlyStore;
use serde_json::json;

/// Creates namespace `name` unless it exists.
pub async fn ensure_namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => panic!("creating namespace {name}: {err}"),
    }
}

/// name → resourceVersion of every config map `api` lists now (a consistent LIST).
pub async fn server_state(api: &Api<ConfigMap>) -> BTreeMap<String, String> {
    let list = api
        .list(&ListParams::default())
        .await
        .expect("a fresh LIST");
    list.items
        .into_iter()
        .map(|cm| {
            (
                cm.metadata.name.unwrap_or_default(),
                cm.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect()
}

fn cache_state(store: &ReadOnlyStore<ConfigMap>) -> BTreeMap<String, String> {
    store
        .list()
        .iter()
        .map(|cm| {
            (
                cm.metadata.name.clone().unwrap_or_default(),
                cm.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits until the cache has reached `written` (the last write's resourceVersion), then
/// compares it with a fresh LIST: the same keys at the same resourceVersions. Panics with
/// the diverging keys otherwise.
pub async fn assert_cache_matches(
    backend: &str,
    store: &ReadOnlyStore<ConfigMap>,
    api: &Api<ConfigMap>,
    written: &str,
) {
    if !written.is_empty() {
        let reached = tokio::time::timeout(
            Duration::from_secs(60),
            store.wait_for_resource_version(written),
        )
        .await;
        assert!(
            matches!(reached, Ok(Ok(()))),
            "{backend}: the cache never reached {written} (it is at {:?})",
            store.resource_version()
        );
    }
    let (server, cache) = (server_state(api).await, cache_state(store));
    if server == cache {
        return;
    }
    let mut diverging = Vec::new();
    for (name, rv) in &server {
        match cache.get(name) {
            None => diverging.push(format!("{name}: on the server at {rv}, not cached")),
            Some(cached) if cached != rv => {
                diverging.push(format!("{name}: server {rv}, cache {cached}"));
            }
            Some(_) => {}
        }
    }
    for (name, rv) in &cache {
        if !server.contains_key(name) {
            diverging.push(format!("{name}: cached at {rv}, gone from the server"));
        }
    }
    panic!(
        "{backend}: the cache differs from the server in {} keys:\n  {}",
        diverging.len(),
        diverging.join("\n  ")
    );
}

/// Polls `check` every 50 ms until it holds; panics after a minute with `what` (a hang,
/// not a verdict: the assertions are what `check` tests).
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..1200 {
        if check() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}
