//! kube-envtest installs an operator's manifests into a real kube-apiserver, as
//! controller-runtime's envtest does (real only: fake-apiserver calls no webhooks): the CRDs
//! of a folder (YAML and JSON, kustomize's file skipped) are served as soon as the
//! environment is up, and the webhook configurations of a kubebuilder-style file, written
//! for a Service, call the test's own webhook server on the local address with the
//! environment's CA — mutating, validating and converting.

use std::{path::Path, time::Duration};

use e2e::ensure_namespace;
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
    core::admission::AdmissionRequest,
};
use kube_envtest::{Environment, EnvironmentOptions, Error};
use kube_informer_runtime::{
    CancellationToken,
    tls::ServingCert,
    webhook::{Allowed, Denied, WebhookServer},
};
use serde_json::{Value, json};
use tokio::task::JoinSet;

const NS: &str = "manifests";

fn widgets(version: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk("envtest.example.com", version, "Widget");
    ApiResource::from_gvk_with_plural(&gvk, "widgets")
}

fn widget(name: &str, size: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "envtest.example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": size},
    }))
    .unwrap()
}

fn server(cert_dir: &Path, address: std::net::SocketAddr) -> WebhookServer {
    WebhookServer::new(ServingCert::from_dir(cert_dir))
        .address(address)
        .mutating(
            "/mutate-envtest-example-com-v1-widget",
            |mut w: DynamicObject, _| async move {
                w.labels_mut().insert("defaulted".into(), "yes".into());
                Ok(w)
            },
        )
        .validating(
            "/validate-envtest-example-com-v1-widget",
            |request: AdmissionRequest<DynamicObject>| async move {
                let size = request.object.map(|w| w.data["spec"]["size"].clone());
                if size == Some(json!("huge")) {
                    return Err(Denied::new("a widget cannot be huge").code(422));
                }
                Ok(Allowed::new())
            },
        )
        .conversion("/convert", |mut object: Value, to: &str| {
            let spec = object["spec"].as_object_mut().ok_or("no spec")?;
            let (from, into) = if to.ends_with("/v2") {
                ("size", "dimension")
            } else {
                ("dimension", "size")
            };
            if let Some(value) = spec.remove(from) {
                spec.insert(into.to_owned(), value);
            }
            Ok::<_, &str>(object)
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn kube_envtest_installs_an_operators_crds_and_webhooks() {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/manifests");
    let options = EnvironmentOptions::new()
        .crds(manifests.join("crd"))
        .webhooks(manifests.join("webhook/manifests.yaml"));
    let Some(env) = Environment::start_or_skip(options)
        .await
        .expect("the real API server starts with the manifests installed")
    else {
        return;
    };
    let client = env.client();
    ensure_namespace(&client, NS).await;

    // Both CRDs are served the moment `start` returns: no 404 to wait out.
    let gadgets = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("envtest.example.com", "v1", "Gadget"),
        "gadgets",
    );
    let listed = Api::<DynamicObject>::all_with(client.clone(), &gadgets)
        .list(&Default::default())
        .await;
    assert!(listed.is_ok(), "gadgets not served: {listed:?}");
    let v1: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &widgets("v1"));
    let v2: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &widgets("v2"));
    assert!(v1.list(&Default::default()).await.is_ok());

    // The test's webhook server, where the environment says to serve.
    let local = env.local_webhooks();
    let bound = server(local.cert_dir(), local.address())
        .bind()
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let mut serving = JoinSet::new();
    serving.spawn(bound.run(cancel.clone()));

    // The API server reads new configurations through its own informer: wait until the
    // mutating webhook is called (setup, not verdict), for a minute.
    let pp = PostParams::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut attempt = 0;
    let defaulted = loop {
        attempt += 1;
        let created = v1
            .create(&pp, &widget(&format!("probe-{attempt}"), "small"))
            .await;
        match created {
            Ok(w) if w.labels().contains_key("defaulted") => break w,
            _ if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("the mutating webhook was never called: {other:?}"),
        }
    };
    assert_eq!(defaulted.labels()["defaulted"], "yes");

    // The validating webhook refuses with its own words.
    match v1.create(&pp, &widget("enormous", "huge")).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422);
            assert!(
                status.message.contains("a widget cannot be huge"),
                "{}",
                status.message
            );
        }
        other => panic!("a huge widget was not refused: {other:?}"),
    }

    // Read at v2, the stored v1 object went through the conversion webhook.
    let name = defaulted.name_any();
    let converted = v2.get(&name).await.unwrap();
    assert_eq!(converted.data["spec"], json!({"dimension": "small"}));
    assert_eq!(
        v1.get(&name).await.unwrap().data["spec"],
        json!({"size": "small"})
    );

    cancel.cancel();
    serving.join_next().await.unwrap().unwrap();
}

/// A manifest of another kind, or a missing path, stops `start` with the file named (and
/// leaves no process behind: the environment is dropped).
#[tokio::test]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn a_wrong_manifest_fails_start_and_names_the_file() {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/manifests");
    // Webhook configurations where CRDs are expected.
    let options = EnvironmentOptions::new().crds(manifests.join("webhook"));
    let error = match Environment::start_or_skip(options).await {
        Ok(None) => return,
        Ok(Some(_)) => panic!("webhook configurations were installed as CRDs"),
        Err(error) => error,
    };
    assert!(matches!(error, Error::Manifest { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("manifests.yaml"), "{message}");
    assert!(
        message.contains("MutatingWebhookConfiguration"),
        "{message}"
    );
}
