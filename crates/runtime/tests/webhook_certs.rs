//! Webhook certificates without cert-manager, on fake-apiserver: replicas provisioning at
//! once agree on one CA and one serving certificate (the Secret's writes are conditional);
//! the CA bundle lands in every named webhook and conversion, comes back after another
//! writer resets it, and a named configuration that is missing costs nothing else; a
//! Secret someone filled with garbage is replaced.

use crate::common;

use std::path::PathBuf;

use base64::Engine as _;
use common::server;
use fake_apiserver::Gvr;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube_informer_runtime::webhook::certs::WebhookCerts;
use serde_json::json;

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("webhook-certs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn certs(client: &kube::Client, dir: &PathBuf) -> WebhookCerts {
    WebhookCerts::for_service(client.clone(), "shop", "webhook-service", "webhook-cert")
        .validating("validate-widgets")
        .mutating("mutate-widgets")
        .mutating("not-applied-yet")
        .conversion("widgets.example.com")
        .cert_dir(dir)
}

fn read(dir: &std::path::Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_agree_and_the_bundle_reaches_every_target_and_stays() {
    let server = server().await;
    let client = server.client().unwrap();
    let reg = |r| Gvr::new("admissionregistration.k8s.io", "v1", r);
    let hook = |name: &str| {
        json!({"name": name, "clientConfig": {"service": {"name": "webhook-service", "namespace": "shop", "path": "/x"}},
               "sideEffects": "None", "admissionReviewVersions": ["v1"]})
    };
    server
        .create(&reg("validatingwebhookconfigurations"), None, json!({
            "metadata": {"name": "validate-widgets"}, "webhooks": [hook("a.example.com"), hook("b.example.com")]}))
        .unwrap();
    server
        .create(
            &reg("mutatingwebhookconfigurations"),
            None,
            json!({
            "metadata": {"name": "mutate-widgets"}, "webhooks": [hook("m.example.com")]}),
        )
        .unwrap();
    let crds = Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    server
        .create(&crds, None, json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": true, "storage": true}],
                     "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                         "clientConfig": {"service": {"name": "webhook-service", "namespace": "shop", "path": "/convert"}}}}}}))
        .unwrap();

    // Eight replicas start at once: one CA, one serving certificate, in every folder.
    let dirs: Vec<PathBuf> = (0..8).map(|i| dir(&format!("replica-{i}"))).collect();
    let replicas: Vec<WebhookCerts> = dirs.iter().map(|d| certs(&client, d)).collect();
    let results =
        futures_util::future::join_all(replicas.iter().map(WebhookCerts::provision)).await;
    for result in results {
        result.unwrap();
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "shop");
    let secret = secrets.get("webhook-cert").await.unwrap();
    let data = secret.data.unwrap();
    let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    for dir in &dirs {
        assert_eq!(read(dir, "tls.crt"), text("tls.crt"), "{}", dir.display());
        assert_eq!(read(dir, "tls.key"), text("tls.key"));
        assert_eq!(read(dir, "ca.crt"), text("ca.crt"));
    }
    assert_eq!(
        text("ca.crt").matches("BEGIN CERTIFICATE").count(),
        1,
        "one CA trusted"
    );
    // The files serve: the webhook server loads them.
    kube_informer_runtime::tls::ServingCert::from_dir(&dirs[0])
        .load()
        .unwrap();

    // The bundle is in every webhook of both configurations and in the conversion.
    let bundle = base64::engine::general_purpose::STANDARD.encode(text("ca.crt"));
    let bundles = |server: &fake_apiserver::FakeApiServer| {
        let validating = server
            .get(
                &reg("validatingwebhookconfigurations"),
                None,
                "validate-widgets",
            )
            .unwrap();
        let mutating = server
            .get(
                &reg("mutatingwebhookconfigurations"),
                None,
                "mutate-widgets",
            )
            .unwrap();
        let crd = server.get(&crds, None, "widgets.example.com").unwrap();
        [
            validating["webhooks"][0]["clientConfig"]["caBundle"].clone(),
            validating["webhooks"][1]["clientConfig"]["caBundle"].clone(),
            mutating["webhooks"][0]["clientConfig"]["caBundle"].clone(),
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"].clone(),
        ]
    };
    assert_eq!(
        bundles(&server),
        [json!(bundle), json!(bundle), json!(bundle), json!(bundle)]
    );

    // A GitOps tool resets one: the next check writes it back, and nothing else moves.
    let mut validating = server
        .get(
            &reg("validatingwebhookconfigurations"),
            None,
            "validate-widgets",
        )
        .unwrap();
    validating["webhooks"][1]["clientConfig"]["caBundle"] = json!("");
    server
        .update(&reg("validatingwebhookconfigurations"), None, validating)
        .unwrap();
    replicas[3].provision().await.unwrap();
    assert_eq!(
        bundles(&server),
        [json!(bundle), json!(bundle), json!(bundle), json!(bundle)]
    );
    let again = secrets.get("webhook-cert").await.unwrap();
    assert_eq!(
        again.metadata.resource_version, secret.metadata.resource_version,
        "the Secret was not rewritten"
    );

    // Garbage in the Secret: replaced by a new CA and certificate, written to the files.
    let mut broken = again.clone();
    for value in broken.data.as_mut().unwrap().values_mut() {
        *value = k8s_openapi::ByteString(b"garbage".to_vec());
    }
    secrets
        .replace("webhook-cert", &Default::default(), &broken)
        .await
        .unwrap();
    replicas[5].provision().await.unwrap();
    assert_ne!(read(&dirs[5], "tls.crt"), text("tls.crt"));
    kube_informer_runtime::tls::ServingCert::from_dir(&dirs[5])
        .load()
        .unwrap();
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}
