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
    let crd = json!({
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
                "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }}],
        },
    });
    install_crd(client, crd).await;
}

/// Creates the CRD `crd` (JSON, as a manifest has it) and waits until every version it
/// serves answers a LIST — on fake-apiserver at once, on a real server once its discovery
/// has it.
///
/// # Panics
/// When the server refuses it or does not serve it within a minute.
pub async fn install_crd(client: &kube::Client, crd: serde_json::Value) {
    let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("a CRD");
    let (group, plural) = (crd.spec.group.clone(), crd.spec.names.plural.clone());
    let versions: Vec<String> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("the CRD is created");
    // Served once discovery has it: poll the collection (setup, not a verdict).
    for version in versions {
        let path = format!("/apis/{group}/{version}/{plural}");
        let mut served = false;
        for _ in 0..600 {
            let request = http::Request::get(&path)
                .body(Vec::new())
                .expect("a request");
            if client.request_text(request).await.is_ok() {
                served = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(served, "{path} was not served within a minute");
    }
}
