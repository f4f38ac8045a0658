//! Webhook certificates made and rotated by the runtime, called by a real kube-apiserver
//! (real only: fake-apiserver calls no webhooks). Two replicas keep one Secret with
//! lifetimes of seconds, so that in half a minute the serving certificate is renewed
//! several times and the CA is rolled; every request meanwhile calls both replicas'
//! webhook servers, and none fails. The replicas never flip the Secret back and forth.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use e2e::ensure_namespace;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, api::PostParams, core::admission::AdmissionRequest};
use kube_envtest::{Environment, EnvironmentOptions};
use kube_informer_runtime::{
    CancellationToken,
    tls::ServingCert,
    webhook::{Allowed, Denied, WebhookServer, certs::WebhookCerts},
};
use serde_json::json;
use tokio::task::JoinSet;

const NS: &str = "rotation";
const CONFIG: &str = "rotation-validate";

fn server(dir: &PathBuf) -> WebhookServer {
    WebhookServer::new(ServingCert::from_dir(dir).reload_every(Duration::from_millis(200)))
        .address(([127, 0, 0, 1], 0).into())
        .validating(
            "/validate",
            |request: AdmissionRequest<ConfigMap>| async move {
                let data = request.object.and_then(|cm| cm.data).unwrap_or_default();
                if data.contains_key("forbidden") {
                    return Err(Denied::new("the key `forbidden` is not allowed").code(422));
                }
                Ok(Allowed::new())
            },
        )
}

fn config_map(name: String, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn webhooks_keep_answering_across_certificate_and_ca_rotations() {
    let Some(env) = Environment::start_or_skip(EnvironmentOptions::new())
        .await
        .expect("the real API server starts")
    else {
        return;
    };
    let client = env.client();
    ensure_namespace(&client, NS).await;

    // Two replicas: each its own folder and server, one Secret. Seconds, not years.
    let dirs: Vec<PathBuf> = (0..2)
        .map(|i| env.dir().join(format!("replica-{i}")))
        .collect();
    let replicas: Vec<WebhookCerts> = dirs
        .iter()
        .map(|dir| {
            WebhookCerts::new(client.clone(), NS, "webhook-cert", ["127.0.0.1"])
                .validating(CONFIG)
                .cert_dir(dir)
                .ca_validity(Duration::from_secs(24))
                .serving_validity(Duration::from_secs(9))
                .overlap(Duration::from_secs(3))
                .check_every(Duration::from_millis(300))
        })
        .collect();
    for replica in &replicas {
        replica.provision().await.unwrap();
    }
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let mut ports = Vec::new();
    for dir in &dirs {
        let bound = server(dir).bind().await.unwrap();
        ports.push(bound.local_addr().port());
        tasks.spawn(bound.run(cancel.clone()));
    }

    // Every request calls both replicas; the configuration has no caBundle until the
    // replicas inject it.
    let hook = |name: &str, port: u16| {
        json!({
            "name": name,
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/validate")},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail", "timeoutSeconds": 10,
        })
    };
    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIG},
        "webhooks": [hook("a.rotation.example.com", ports[0]), hook("b.rotation.example.com", ports[1])],
    });
    let request = http::Request::post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    )
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&configuration).unwrap())
    .unwrap();
    client.request::<serde_json::Value>(request).await.unwrap();
    for replica in replicas {
        tasks.spawn(replica.run(cancel.clone()));
    }

    // Setup, not verdict: wait until both webhooks are called (a refusal in their words).
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    for attempt in 0.. {
        let probe = config_map(format!("probe-{attempt}"), json!({"forbidden": "x"}));
        match configmaps.create(&pp, &probe).await {
            Err(kube::Error::Api(status)) if status.message.contains("is not allowed") => break,
            other => assert!(
                Instant::now() < deadline,
                "the webhooks were never called: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Half a minute of admissions across the rotations: none may fail.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let signing = |secret: &Secret| {
        let data = secret.data.as_ref().unwrap();
        String::from_utf8(data["signing-ca.crt"].0.clone()).unwrap()
    };
    let (mut cas, mut servings): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    let (mut admitted, mut failed) = (0, Vec::new());
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(30) {
        n += 1;
        match configmaps
            .create(
                &pp,
                &config_map(format!("cm-{n}"), json!({"n": n.to_string()})),
            )
            .await
        {
            Ok(_) => admitted += 1,
            Err(error) => failed.push(format!("{:?}: {error}", started.elapsed())),
        }
        let ca = signing(&secrets.get("webhook-cert").await.unwrap());
        if cas.last() != Some(&ca) {
            cas.push(ca);
        }
        let serving = std::fs::read_to_string(dirs[0].join("tls.crt")).unwrap();
        if servings.last() != Some(&serving) {
            servings.push(serving);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "rotation: {admitted} admissions, {} failed, {} CAs, {} serving certificates",
        failed.len(),
        cas.len(),
        servings.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {} admissions failed: {failed:?}",
        failed.len(),
        admitted + failed.len()
    );
    assert!(admitted > 50, "only {admitted} admissions");
    assert!(
        cas.len() >= 2,
        "the CA was never rolled ({} CAs seen)",
        cas.len()
    );
    assert!(
        servings.len() >= 3,
        "only {} serving certificates seen",
        servings.len()
    );
    // One CA after another, never back: the replicas did not fight over the Secret.
    for (i, ca) in cas.iter().enumerate() {
        assert!(
            !cas[i + 1..].contains(ca),
            "CA {i} came back after being replaced"
        );
    }

    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}
