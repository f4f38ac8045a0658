//! The demo's two controllers, sharing one pod informer (also used by the end-to-end test).
#![allow(dead_code, unreachable_pub)]

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
    core::Selector,
};
use kube_informer::{
    Lister, ReadOnlyStore, controller::Action, informer::HandlerFuncs, workqueue::RateLimitingQueue,
};
use serde_json::json;

/// The name of the node index.
pub const BY_NODE: &str = "by-node";
/// The summary each namespace gets.
pub const SUMMARY: &str = "pod-summary";

/// Index function: the node a pod runs on.
pub fn by_node(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .into_iter()
        .collect()
}

/// Controller A (read-only): pods per node, from the node index, busiest first.
pub fn pods_per_node(store: &ReadOnlyStore<Pod>) -> Vec<(String, usize)> {
    let nodes = store.list_index_func_values(BY_NODE).unwrap_or_default();
    let mut counts: Vec<(String, usize)> = nodes
        .into_iter()
        .map(|node| {
            let n = store.index_keys(BY_NODE, &node).map_or(0, |k| k.len());
            (node, n)
        })
        .collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    counts
}

/// Feeds controller B: every pod change queues its namespace.
pub fn enqueue_namespace(queue: RateLimitingQueue<String>) -> HandlerFuncs<Pod> {
    let ns = |p: &Pod| p.metadata.namespace.clone().unwrap_or_default();
    let (a, u, d) = (queue.clone(), queue.clone(), queue);
    HandlerFuncs::new()
        .on_add(move |p: Arc<Pod>, _| a.add(ns(&p)))
        .on_update(move |_, p: Arc<Pod>| u.add(ns(&p)))
        .on_delete(move |gone| d.add(ns(gone.object())))
}

/// What the summary of `namespace` says, from the cache.
pub fn summary(pods: &Lister<Pod>, namespace: &str) -> BTreeMap<String, String> {
    let pods = pods.namespaced(namespace).list(&Selector::default());
    // Every phase, zeros included: a merge patch would keep a key that disappeared.
    let mut phases: BTreeMap<String, usize> =
        ["pending", "running", "succeeded", "failed", "unknown"]
            .into_iter()
            .map(|p| (p.to_owned(), 0))
            .collect();
    for pod in &pods {
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Unknown".into());
        *phases.entry(phase.to_lowercase()).or_default() += 1;
    }
    let mut data: BTreeMap<String, String> = phases
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
    data.insert("pods".into(), pods.len().to_string());
    data
}

/// Controller B: writes the namespace's summary ConfigMap through the API.
pub async fn write_summary(
    client: kube::Client,
    pods: Lister<Pod>,
    namespace: String,
) -> Result<Action, kube::Error> {
    let data = summary(&pods, &namespace);
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let patch = json!({"data": data});
    match api
        .patch(SUMMARY, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(Action::Done),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            let cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": SUMMARY}, "data": data}))
                    .expect("a valid ConfigMap");
            match api.create(&PostParams::default(), &cm).await {
                Ok(_) => Ok(Action::Done),
                // Created meanwhile by another worker: retry as a patch.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    Ok(Action::RequeueAfter(std::time::Duration::ZERO))
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}
