//! Custom resource definitions for the real-server half of a scenario.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, api::PostParams};
use serde_json::json;

/// Creates a namespaced `v1` CRD that keeps any field, and waits until it is served.
///
/// # Panics
/// When the server refuses it or does not serve it within a minute.
pub(crate) async fn install(client: &kube::Client, group: &str, plural: &str, kind: &str) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
                "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }}],
        },
    }))
    .expect("a CRD");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("the CRD is created");
    // Served once discovery has it: poll the collection (setup, not a verdict).
    let path = format!("/apis/{group}/v1/{plural}");
    for _ in 0..600 {
        let request = http::Request::get(&path)
            .body(Vec::new())
            .expect("a request");
        if client.request_text(request).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{plural}.{group} was not served within a minute");
}
