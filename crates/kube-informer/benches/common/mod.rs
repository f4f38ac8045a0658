//! Objects shared by the benchmarks (each bench uses a subset).
#![allow(dead_code)]

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube::core::ObjectMeta;

/// `n` pods spread over `namespaces` namespaces and `n / 10` nodes (10 pods a node).
pub(crate) fn pods(n: usize, namespaces: usize) -> Vec<Arc<Pod>> {
    (0..n)
        .map(|i| {
            pod(
                &format!("ns-{}", i % namespaces),
                &format!("pod-{i}"),
                &format!("node-{}", i / 10),
            )
        })
        .collect()
}

/// One pod on `node`.
pub(crate) fn pod(ns: &str, name: &str, node: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            resource_version: Some("1".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The index function the benchmarks use: the pod's node.
pub(crate) fn by_node(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .into_iter()
        .collect()
}
