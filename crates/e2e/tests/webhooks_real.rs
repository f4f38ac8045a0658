//! Webhooks served by a manager, called by a real kube-apiserver (real only: fake-apiserver
//! calls no webhooks). The configurations point at the loopback server with its CA bundle,
//! as a cluster's point at a Service:
//! - a validating webhook refuses ConfigMaps (on create and on update) and its panic is a
//!   refusal that says so;
//! - a mutating webhook labels them, keeping everything else;
//! - sharding's `label_at_creation` labels Secrets for their shard as they are created;
//! - a CRD with two versions is converted both ways through the conversion webhook, and a
//!   failed conversion reaches the client with its reason.

use std::time::Duration;

use base64::Engine as _;
use e2e::ensure_namespace;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    core::admission::AdmissionRequest,
};
use kube_envtest::{Environment, EnvironmentOptions, ServingCerts};
use kube_informer_runtime::{
    CancellationToken, Manager, ManagerOptions,
    sharding::{Placement, Ring, ShardKey, label_at_creation, shard_label},
    tls::ServingCert,
    webhook::{Allowed, Denied, WebhookServer},
};
use serde_json::{Value, json};
use tokio::task::JoinSet;

const NS: &str = "webhooks";
const GROUP: &str = "e2e.example.com";

fn webhooks(dir: &std::path::Path, ring: Ring) -> WebhookServer {
    WebhookServer::new(ServingCert::from_dir(dir))
        .address(([127, 0, 0, 1], 0).into())
        .validating(
            "/validate",
            |request: AdmissionRequest<ConfigMap>| async move {
                let data = request.object.and_then(|cm| cm.data).unwrap_or_default();
                if data.contains_key("panic") {
                    panic!("asked to panic");
                }
                if data.contains_key("forbidden") {
                    return Err(Denied::new("the key `forbidden` is not allowed").code(422));
                }
                Ok(Allowed::new())
            },
        )
        .validating("/hang", |_: AdmissionRequest<ConfigMap>| async move {
            std::future::pending::<()>().await;
            Ok(Allowed::new())
        })
        .mutating("/mutate", |mut cm: ConfigMap, _| async move {
            cm.labels_mut()
                .insert("mutated-by".into(), "webhook".into());
            Ok(cm)
        })
        .admission("/shard", move |request| {
            let ring = ring.clone();
            async move { label_at_creation("e2e", &ring, Placement::Own, &request) }
        })
        .conversion("/convert", |mut object: Value, to: &str| {
            let spec = object.get_mut("spec").and_then(Value::as_object_mut);
            let Some(spec) = spec else { return Ok(object) };
            if spec.contains_key("explode") {
                return Err("this widget cannot be converted".to_owned());
            }
            let (from, into) = if to.ends_with("/v2") {
                ("size", "replicas")
            } else {
                ("replicas", "size")
            };
            if let Some(value) = spec.remove(from) {
                spec.insert(into.to_owned(), value);
            }
            Ok(object)
        })
}

fn hook(name: &str, url: String, ca: &str, resource: &str, operations: &[&str]) -> Value {
    json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": operations, "resources": [resource]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
        "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail", "timeoutSeconds": 30,
    })
}

async fn create(client: &kube::Client, path: &str, body: Value) -> Result<Value, kube::Error> {
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    client.request::<Value>(request).await
}

async fn get(client: &kube::Client, path: &str) -> Result<Value, kube::Error> {
    client
        .request::<Value>(http::Request::get(path).body(Vec::new()).unwrap())
        .await
}

/// A suffix no earlier probe used.
fn rand_suffix() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn config_map(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "web"}}, "data": data}),
    )
    .unwrap()
}

/// The API server's message and code for a refused request.
fn refusal(result: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn a_real_api_server_calls_the_managers_webhooks() {
    let Some(env) = Environment::start_or_skip(EnvironmentOptions::new())
        .await
        .expect("the real API server starts")
    else {
        return;
    };
    let client = env.client();
    ensure_namespace(&client, NS).await;

    let dir = std::env::temp_dir().join(format!("webhooks-real-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let certs = ServingCerts::for_loopback().unwrap();
    certs.write_to(&dir).unwrap();
    let ca = base64::engine::general_purpose::STANDARD.encode(&certs.ca_pem);
    let ring = Ring::new(["shard-a", "shard-b", "shard-c"]);
    let server = webhooks(&dir, ring.clone()).bind().await.unwrap();
    let base = format!("https://127.0.0.1:{}", server.local_addr().port());

    let mut manager = Manager::new(client.clone(), ManagerOptions::for_tests())
        .await
        .unwrap();
    manager.add_webhooks(server);
    let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
    let mut running = JoinSet::new();
    running.spawn(manager.run_until(graceful.clone(), force));

    // Register the webhooks, then wait until the API server calls them (setup, not verdict).
    let mutating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "e2e-mutate"},
        "webhooks": [
            hook("mutate.e2e.example.com", format!("{base}/mutate"), &ca, "configmaps", &["CREATE", "UPDATE"]),
            hook("shard.e2e.example.com", format!("{base}/shard"), &ca, "secrets", &["CREATE"]),
        ],
    });
    let validating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "e2e-validate"},
        "webhooks": [hook("validate.e2e.example.com", format!("{base}/validate"), &ca, "configmaps", &["CREATE", "UPDATE"])],
    });
    let registration = "/apis/admissionregistration.k8s.io/v1";
    create(
        &client,
        &format!("{registration}/mutatingwebhookconfigurations"),
        mutating,
    )
    .await
    .unwrap();
    create(
        &client,
        &format!("{registration}/validatingwebhookconfigurations"),
        validating,
    )
    .await
    .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();
    // Both configurations are read by the API server on their own: wait until each is
    // called (a refusal with the handler's words, a label on a clean object), for a minute.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for attempt in 0.. {
        let probe = config_map(&format!("probe-{attempt}"), json!({"forbidden": "x"}));
        let validated = matches!(
            configmaps.create(&pp, &probe).await,
            Err(kube::Error::Api(status)) if status.message.contains("is not allowed")
        );
        let clean = config_map(&format!("probe-clean-{attempt}"), json!({}));
        let mutated = configmaps
            .create(&pp, &clean)
            .await
            .is_ok_and(|cm| cm.labels().contains_key("mutated-by"));
        if validated && mutated {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the API server never called both webhooks (validating: {validated}, mutating: {mutated})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Mutated: the label added, the rest as sent.
    let created = configmaps
        .create(&pp, &config_map("plain", json!({"k": "v"})))
        .await
        .unwrap();
    assert_eq!(
        created.labels().get("mutated-by").map(String::as_str),
        Some("webhook")
    );
    assert_eq!(created.labels().get("app").map(String::as_str), Some("web"));
    assert_eq!(created.data.unwrap()["k"], "v");

    // Refused, on create and on update, with the handler's message and code.
    let (code, message) = refusal(
        configmaps
            .create(&pp, &config_map("bad", json!({"forbidden": "1"})))
            .await,
    );
    assert_eq!(code, 422, "{message}");
    assert!(
        message.contains("the key `forbidden` is not allowed"),
        "{message}"
    );
    let patch = json!({"data": {"forbidden": "now"}});
    let (_, message) = refusal(
        configmaps
            .patch("plain", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert!(message.contains("not allowed"), "{message}");

    // A panicking handler: a refusal that says why, and the server still serves.
    let (_, message) = refusal(
        configmaps
            .create(&pp, &config_map("boom", json!({"panic": "1"})))
            .await,
    );
    assert!(
        message.contains("the webhook handler panicked: asked to panic"),
        "{message}"
    );
    configmaps
        .create(&pp, &config_map("after-panic", json!({})))
        .await
        .unwrap();

    // A hung handler, with the server's defaults: refused before the API server's own
    // deadline (the call says it: `?timeout=`), so the client reads the handler's refusal,
    // not "context deadline exceeded". Registered with the default timeoutSeconds (10 s:
    // the server's 9 s limit) and with 3 s (cut to 2.7 s).
    let hang = |name: &str, selector: &str, timeout: Option<u32>| {
        let mut hook = json!({
            "name": name,
            "clientConfig": {"url": format!("{base}/hang"), "caBundle": ca},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
            "objectSelector": {"matchLabels": {"hang": selector}},
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
        });
        if let Some(seconds) = timeout {
            hook["timeoutSeconds"] = json!(seconds);
        }
        hook
    };
    let hangs = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "e2e-hang"},
        "webhooks": [hang("default.hang.e2e.example.com", "default", None), hang("short.hang.e2e.example.com", "short", Some(3))],
    });
    create(
        &client,
        &format!("{registration}/validatingwebhookconfigurations"),
        hangs,
    )
    .await
    .unwrap();
    for (selector, within) in [("short", "2.7s"), ("default", "9s")] {
        // Until the configuration is loaded, the object is simply created (setup).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let message = loop {
            let mut probe = config_map(&format!("hang-{selector}-{}", rand_suffix()), json!({}));
            probe.labels_mut().insert("hang".into(), selector.into());
            if let Err(error) = configmaps.create(&pp, &probe).await {
                break refusal(Err::<(), _>(error)).1;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the hang webhook was never called"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(
            message.contains(&format!(
                "the webhook handler did not answer within {within}"
            )),
            "{selector}: {message}"
        );
    }

    // Sharding's labelling webhook: each Secret stored with its shard's label.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    for name in ["s1", "s2", "s3", "s4"] {
        let secret: Secret = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        let stored = secrets.create(&pp, &secret).await.unwrap();
        let mut keyed = secret.clone();
        keyed.metadata.namespace = Some(NS.to_owned());
        let key = ShardKey::of(&keyed, &()).unwrap();
        let wanted = ring.shard_for(key.as_str()).unwrap();
        assert_eq!(
            stored.labels().get(&shard_label("e2e")).map(String::as_str),
            Some(wanted),
            "{name}"
        );
    }

    conversion_through_the_webhook(&client, &base, &ca).await;

    graceful.cancel();
    running
        .join_next()
        .await
        .unwrap()
        .unwrap()
        .expect("the manager stops cleanly");
    let _ = std::fs::remove_dir_all(&dir);
}

async fn conversion_through_the_webhook(client: &kube::Client, base: &str, ca: &str) {
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{GROUP}")},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v2", "served": true, "storage": false, "schema": schema},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": format!("{base}/convert"), "caBundle": ca},
                "conversionReviewVersions": ["v1"],
            }},
        },
    });
    create(
        client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd,
    )
    .await
    .unwrap();
    let (v1, v2) = (
        format!("/apis/{GROUP}/v1/namespaces/{NS}/widgets"),
        format!("/apis/{GROUP}/v2/namespaces/{NS}/widgets"),
    );
    let widget = |version: &str, name: &str, spec: Value| json!({"apiVersion": format!("{GROUP}/{version}"), "kind": "Widget", "metadata": {"name": name}, "spec": spec});
    // Served once both versions are in discovery (setup, not verdict).
    let mut created = None;
    for _ in 0..600 {
        if get(client, &v2).await.is_ok() {
            created = create(client, &v1, widget("v1", "small", json!({"size": 3})))
                .await
                .ok();
            if created.is_some() {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(created.is_some(), "the CRD was not served within 60 s");

    // Stored as v1, read as v2: converted by the webhook.
    let read = get(client, &format!("{v2}/small")).await.unwrap();
    assert_eq!(read["apiVersion"], format!("{GROUP}/v2"));
    assert_eq!(read["spec"], json!({"replicas": 3}));
    // Written as v2, stored (and read) as v1.
    create(client, &v2, widget("v2", "large", json!({"replicas": 9})))
        .await
        .unwrap();
    let read = get(client, &format!("{v1}/large")).await.unwrap();
    assert_eq!(read["spec"], json!({"size": 9}));
    let list = get(client, &v2).await.unwrap();
    let mut sizes: Vec<i64> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["spec"]["replicas"].as_i64().unwrap())
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [3, 9]);

    // A conversion that fails: the client gets the converter's reason.
    create(client, &v1, widget("v1", "odd", json!({"explode": true})))
        .await
        .unwrap();
    let error = get(client, &format!("{v2}/odd"))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("this widget cannot be converted"), "{error}");
}
