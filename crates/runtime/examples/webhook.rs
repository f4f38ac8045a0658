//! Admission webhooks served by a manager: a validating webhook that refuses ConfigMaps
//! without an `app` label, and a mutating one that gives each a default `example.com/team`
//! label (the JSON patch the API server applies is computed from the handler's changes).
//!
//! The webhook server presents a certificate read from `tls.crt` and `tls.key` (re-read as
//! they rotate): in a cluster, cert-manager's Secret mounted in the pod; here a CA and a
//! certificate for 127.0.0.1 it signed, generated at start by kube-envtest's `ServingCerts`
//! (the manager serves the files it is given; it generates none).
//!
//! fake-apiserver calls no webhooks, so by default the example calls its own endpoints as the
//! API server would: AdmissionReviews POSTed over HTTPS, trusting only the generated CA. With
//! `--envtest` (a real kube-apiserver on loopback; needs KUBEBUILDER_ASSETS) or `--cluster`
//! (your kubeconfig's), it registers both webhooks for its own namespace at
//! `https://127.0.0.1:PORT` with the CA as `caBundle`, creates ConfigMaps through the API
//! server (dry run), prints its answers, and removes the configurations. The API server must
//! reach this machine's loopback: elsewhere it answers "failed calling webhook".
//!
//! ```text
//! cargo run -p kube-informer-runtime --example webhook               # embedded fake-apiserver
//! cargo run -p kube-informer-runtime --example webhook -- --envtest  # envtest's kube-apiserver
//! cargo run -p kube-informer-runtime --example webhook -- --cluster  # your kubeconfig's cluster
//! ```

use std::{error::Error, net::SocketAddr, sync::Arc, time::Duration};

use base64::Engine as _;
use bytes::Bytes;
use fake_apiserver::{FakeApiServer, ServerConfig};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::{
    admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
    core::v1::{ConfigMap, Namespace},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    core::admission::AdmissionRequest,
};
use kube_envtest::{Environment, EnvironmentOptions, ServingCerts};
use kube_informer_runtime::{
    CancellationToken,
    manager::{Manager, ManagerOptions},
    tls::ServingCert,
    webhook::{Allowed, Denied, WebhookServer},
};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::{Value, json};

const NAMESPACE: &str = "webhook-example";
const TEAM: &str = "example.com/team";
const VALIDATE: &str = "/validate-configmaps";
const MUTATE: &str = "/default-configmaps";

fn webhooks(cert_dir: &std::path::Path) -> WebhookServer {
    WebhookServer::new(ServingCert::from_dir(cert_dir))
        .address(([127, 0, 0, 1], 0).into()) // a free port (in a pod: the default, 0.0.0.0:9443)
        .validating(
            VALIDATE,
            |request: AdmissionRequest<ConfigMap>| async move {
                let Some(cm) = request.object else {
                    return Ok(Allowed::new()); // a DELETE: nothing to check
                };
                if !cm.labels().contains_key("app") {
                    let message = format!("ConfigMap {} has no `app` label", cm.name_any());
                    return Err(Denied::new(message).code(422));
                }
                if !cm.labels().contains_key(TEAM) {
                    return Ok(Allowed::new().warning(format!("no {TEAM} label")));
                }
                Ok(Allowed::new())
            },
        )
        .mutating(MUTATE, |mut cm: ConfigMap, _| async move {
            cm.labels_mut()
                .entry(TEAM.into())
                .or_insert_with(|| "unowned".into());
            Ok(cm)
        })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client::client::builder=off".into()),
        )
        .init();
    let mode = std::env::args().nth(1).unwrap_or_default();
    let (mut fake, mut envtest) = (None, None); // kept running until the end
    let client = match mode.as_str() {
        "--cluster" => kube::Client::try_default().await?,
        "--envtest" => envtest
            .insert(Environment::start(EnvironmentOptions::new()).await?)
            .client(),
        _ => fake
            .insert(FakeApiServer::start(ServerConfig::default()).await?)
            .client()?,
    };
    let direct = fake.is_some(); // no API server calls the webhooks: the example does

    // The files a mounted `kubernetes.io/tls` Secret would hold.
    let cert_dir = std::env::temp_dir().join(format!("webhook-example-{}", std::process::id()));
    std::fs::create_dir_all(&cert_dir)?;
    let certs = ServingCerts::for_loopback()?;
    certs.write_to(&cert_dir)?;
    let server = webhooks(&cert_dir).bind().await?; // reads the certificate, binds the port
    let addr = server.local_addr();
    println!("webhooks on https://{addr}{VALIDATE} and {MUTATE}");

    let mut manager =
        Manager::new(client.clone(), ManagerOptions::default().no_endpoints()).await?;
    manager.add_webhooks(server); // served on every replica, stopped with the manager
    let (stop, force) = (CancellationToken::new(), CancellationToken::new());
    let running = tokio::spawn(manager.run_until(stop.clone(), force));

    let result = if direct {
        call_directly(addr, &certs.ca_pem).await
    } else {
        through_api_server(&client, addr, &certs.ca_bundle()).await
    };
    stop.cancel();
    running.await??;
    let _ = std::fs::remove_dir_all(&cert_dir);
    result
}

/// What the API server would do: an AdmissionReview per call, over HTTPS trusting the CA.
async fn call_directly(addr: SocketAddr, ca_pem: &str) -> Result<(), Box<dyn Error>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(
        rustls::crypto::ring::default_provider().into(),
    )
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1")?, tcp)
        .await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);

    let [plain, web] = objects();
    let calls = [(VALIDATE, &plain), (VALIDATE, &web), (MUTATE, &web)];
    for (uid, (path, object)) in calls.into_iter().enumerate() {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": uid.to_string(), "operation": "CREATE", "name": object["metadata"]["name"],
                "namespace": NAMESPACE, "object": object, "dryRun": false,
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "userInfo": {"username": "webhook-example"},
            }
        });
        let request = http::Request::post(path)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(review.to_string())))?;
        sender.ready().await?;
        let response = sender.send_request(request).await?;
        let body = response.into_body().collect().await?.to_bytes();
        let mut answer: Value = serde_json::from_slice(&body)?;
        // The patch travels base64-encoded, as Go encodes bytes: shown decoded.
        if let Some(patch) = answer["response"]["patch"].as_str() {
            let patch = base64::engine::general_purpose::STANDARD.decode(patch)?;
            answer["response"]["patch"] = serde_json::from_slice(&patch)?;
        }
        let name = &object["metadata"]["name"];
        println!("{path} {name}: {}", answer["response"]);
    }
    Ok(())
}

/// Registers both webhooks with the API server, lets it call them, then removes them.
async fn through_api_server(
    client: &kube::Client,
    addr: SocketAddr,
    ca_bundle: &str,
) -> Result<(), Box<dyn Error>> {
    let ns = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await; // 409: it exists
    let configuration = |kind: &str, path: &str| {
        Patch::Apply(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": format!("{kind}WebhookConfiguration"),
            "metadata": {"name": NAMESPACE},
            "webhooks": [{
                "name": format!("{}.example.com", &path[1..]),
                "clientConfig": {"url": format!("https://{addr}{path}"), "caBundle": ca_bundle},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                           "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
                "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail", "timeoutSeconds": 5,
            }],
        }))
    };
    let apply = PatchParams::apply("webhook-example").force();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let config = configuration("Validating", VALIDATE);
    validating.patch(NAMESPACE, &apply, &config).await?;
    mutating
        .patch(NAMESPACE, &apply, &configuration("Mutating", MUTATE))
        .await?;

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    // Webhooks with `sideEffects: None` are called, nothing is stored.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let [plain, web] = objects().map(serde_json::from_value::<ConfigMap>);
    let (plain, web) = (plain?, web?);
    // The API server reads new configurations within seconds: until it has read both, `plain`
    // is admitted, or `web` stored without the default label.
    let mut attempts = 0;
    let (first, second) = loop {
        let first = configmaps.create(&dry_run, &plain).await;
        let second = configmaps.create(&dry_run, &web).await;
        let defaulted = second
            .as_ref()
            .ok()
            .is_none_or(|cm| cm.labels().contains_key(TEAM));
        attempts += 1;
        if (first.is_err() && defaulted) || attempts == 300 {
            break (first, second);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for (name, result) in [("plain", first), ("web", second)] {
        match result {
            Ok(cm) => println!("{name}: admitted, labels {:?}", cm.labels()),
            Err(kube::Error::Api(status)) => {
                println!("{name}: refused ({}): {}", status.code, status.message)
            }
            Err(error) => println!("{name}: {error}"),
        }
    }
    let _ = validating.delete(NAMESPACE, &DeleteParams::default()).await;
    let _ = mutating.delete(NAMESPACE, &DeleteParams::default()).await;
    Ok(())
}

/// Two ConfigMaps: `plain`, without labels, and `web`, with an `app` label.
fn objects() -> [Value; 2] {
    let meta = [
        json!({"name": "plain"}),
        json!({"name": "web", "labels": {"app": "web"}}),
    ];
    meta.map(|metadata| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}))
}
