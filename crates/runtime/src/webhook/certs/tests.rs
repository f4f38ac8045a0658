//! Rotation against fake-apiserver on a clock the test moves (days in microseconds): a CA
//! roll whose injection is refused (RBAC) or reverted by another writer never leaves a
//! replica serving a certificate the webhook configuration does not trust, and neither does
//! the Secret deleted under two replicas.

use std::{collections::HashMap, path::Path, time::Duration};

use base64::Engine as _;
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use http::{Request, Response};
use kube::client::Body;
use serde_json::json;

use super::*;

const DAY: i64 = 86_400;
const START: i64 = 1_800_000_000;
const HOOKS: &str = "validating-hooks";

fn hooks() -> Gvr {
    Gvr::new(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
    )
}

async fn server() -> FakeApiServer {
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["shop"]))
        .await
        .unwrap();
    let hook = json!({"name": "a.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "svc", "namespace": "shop", "path": "/x"}}});
    let config = json!({"metadata": {"name": HOOKS}, "webhooks": [hook]});
    server.create(&hooks(), None, config).unwrap();
    server
}

/// A client that the API server refuses every write to webhook configurations (its RBAC
/// lacks `update` there).
fn without_update_rbac(client: kube::Client) -> kube::Client {
    refusing(client, &[http::Method::PUT])
}

/// A client that the API server refuses `methods` on webhook configurations.
fn refusing(client: kube::Client, methods: &'static [http::Method]) -> kube::Client {
    let service = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        async move {
            let path = request.uri().path().to_owned();
            let refused = path.contains("/admissionregistration.k8s.io/");
            if methods.contains(request.method()) && refused {
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "Forbidden", "code": 403, "message": "forbidden: cannot update"});
                let body = Body::from(serde_json::to_vec(&status).unwrap());
                let response = Response::builder()
                    .status(403)
                    .header("content-type", "application/json")
                    .body(body)
                    .unwrap();
                return Ok::<_, kube::Error>(response);
            }
            client.send(request).await
        }
    });
    kube::Client::new(service, "default")
}

/// A clock stopped at `time` (Unix seconds), for one check.
fn at(time: i64) -> impl Fn() -> i64 {
    move || time
}

/// A folder for a replica's certificate files, removed when the test ends.
fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn certs(client: kube::Client, dir: &Path) -> WebhookCerts {
    WebhookCerts::for_service(client, "shop", "svc", "svc-cert")
        .validating(HOOKS)
        .cert_dir(dir)
        .ca_validity(Duration::from_secs(300 * 86_400))
        .serving_validity(Duration::from_secs(30 * 86_400))
        .overlap(Duration::from_secs(86_400))
}

/// What the test knows: which CA signed each serving certificate the Secret ever held.
#[derive(Default)]
struct Signers(HashMap<String, String>);

impl Signers {
    /// Notes the Secret's serving certificate and its signer.
    fn note(&mut self, server: &FakeApiServer) {
        let secret = server
            .get(&Gvr::core("secrets"), Some("shop"), "svc-cert")
            .unwrap();
        let text = |key: &str| {
            let b64 = secret["data"][key].as_str().unwrap_or_default();
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap(),
            )
            .unwrap()
        };
        self.0.insert(text("tls.crt"), text("signing-ca.crt"));
    }

    /// Asserts the certificate served from `dir` is signed by a CA the configuration holds.
    fn assert_trusted(&self, server: &FakeApiServer, dir: &std::path::Path, when: &str) {
        let served = std::fs::read_to_string(dir.join("tls.crt")).unwrap();
        let signer = self
            .0
            .get(&served)
            .unwrap_or_else(|| panic!("{when}: an unknown certificate"));
        let config = server.get(&hooks(), None, HOOKS).unwrap();
        let b64 = config["webhooks"][0]["clientConfig"]["caBundle"]
            .as_str()
            .unwrap_or_default();
        let bundle = String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap();
        let trusted: Vec<String> = pki::certificates(&bundle)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let signer = pki::certificates(signer).remove(0).0;
        assert!(
            trusted.contains(&signer),
            "{when}: the served certificate's CA is not trusted"
        );
    }
}

fn failures(target: &str, reason: &str) -> u64 {
    let mut registry = prometheus_client::registry::Registry::default();
    register_metrics(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let series = format!(
        "webhook_certificate_injection_failures_total{{target=\"{target}\",reason=\"{reason}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn signing_ca(server: &FakeApiServer) -> String {
    let secret = server
        .get(&Gvr::core("secrets"), Some("shop"), "svc-cert")
        .unwrap();
    secret["data"]["signing-ca.crt"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_roll_waits_while_injection_is_refused_or_reverted_and_serving_stays_trusted() {
    let server = server().await;
    let mut time = START;
    let folder = dir();
    let allowed = certs(server.memory_client(), folder.path());
    let refused = certs(without_update_rbac(server.memory_client()), folder.path());
    let mut signers = Signers::default();
    allowed.check(at(time)).await.unwrap();
    signers.note(&server);
    let first = signing_ca(&server);

    // The RBAC loses `update` on the configuration: the roll starts (day 200) but its
    // bundle never lands, and the first CA keeps signing, day after day.
    let mut errors = 0;
    for day in 1..=260 {
        time = START + day * DAY;
        if let Err(error) = refused.check(at(time)).await {
            assert!(matches!(error, CertError::Inject(_)), "{error}");
            errors += 1;
        }
        signers.note(&server);
        assert_eq!(
            signing_ca(&server),
            first,
            "day {day}: promoted without being injected"
        );
        signers.assert_trusted(&server, folder.path(), &format!("day {day}"));
    }
    assert_eq!(errors, 60, "every check since the roll started says so");
    assert_eq!(failures(HOOKS, "refused"), 60);

    // Allowed again: injected, and promoted only an overlap after.
    time = START + 261 * DAY;
    allowed.check(at(time)).await.unwrap();
    allowed.check(at(time)).await.unwrap(); // seen held: the overlap starts
    signers.note(&server);
    signers.assert_trusted(&server, folder.path(), "injected");
    // A second writer (a GitOps tool's self-heal) puts the old bundle back mid-overlap.
    let mut config = server.get(&hooks(), None, HOOKS).unwrap();
    let injected = config["webhooks"][0]["clientConfig"]["caBundle"].clone();
    config["webhooks"][0]["clientConfig"]["caBundle"] = json!(
        base64::engine::general_purpose::STANDARD.encode(
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(&first)
                    .unwrap()
            )
            .unwrap()
        )
    );
    server.update(&hooks(), None, config).unwrap();
    time = START + 261 * DAY + DAY / 2;
    allowed.check(at(time)).await.unwrap(); // lost: the clock restarts; written back
    assert_eq!(failures(HOOKS, "reverted"), 1, "the revert is counted");
    let config = server.get(&hooks(), None, HOOKS).unwrap();
    assert_eq!(
        config["webhooks"][0]["clientConfig"]["caBundle"], injected,
        "written back"
    );
    time = START + 262 * DAY;
    allowed.check(at(time)).await.unwrap(); // held again since now
    assert_eq!(
        signing_ca(&server),
        first,
        "the overlap restarted at the revert"
    );
    time = START + 263 * DAY + 1;
    allowed.check(at(time)).await.unwrap();
    signers.note(&server);
    assert_ne!(
        signing_ca(&server),
        first,
        "promoted once held for the overlap"
    );
    signers.assert_trusted(&server, folder.path(), "promoted");
}

#[tokio::test]
async fn the_secret_deleted_under_two_replicas_leaves_both_trusted() {
    let server = server().await;
    let mut time = START;
    let (a_dir, b_dir) = (dir(), dir());
    let a = certs(server.memory_client(), a_dir.path());
    let b = certs(server.memory_client(), b_dir.path());
    let mut signers = Signers::default();
    a.check(at(time)).await.unwrap();
    b.check(at(time)).await.unwrap();
    signers.note(&server);
    let first = signing_ca(&server);

    server
        .delete(&Gvr::core("secrets"), Some("shop"), "svc-cert")
        .unwrap();
    time = START + DAY;
    a.check(at(time)).await.unwrap();
    signers.note(&server);
    assert_ne!(signing_ca(&server), first, "a new CA");
    // b still serves its certificate of the first CA until its next check: still trusted.
    signers.assert_trusted(&server, b_dir.path(), "b before its check");
    signers.assert_trusted(&server, a_dir.path(), "a");
    b.check(at(time)).await.unwrap();
    signers.assert_trusted(&server, b_dir.path(), "b after its check");
}

#[tokio::test]
async fn renewals_of_the_served_ca_reach_the_files_while_the_configurations_cannot_be_read() {
    let server = server().await;
    let mut time = START;
    let folder = dir();
    // Its own configuration: the failures it counts are its own.
    let mut config = server.get(&hooks(), None, HOOKS).unwrap();
    config["metadata"] = json!({"name": "blind-hooks"});
    server.create(&hooks(), None, config).unwrap();
    let certs = |client| {
        WebhookCerts::for_service(client, "shop", "svc", "svc-cert")
            .validating("blind-hooks")
            .cert_dir(folder.path())
            .ca_validity(Duration::from_secs(300 * 86_400))
            .serving_validity(Duration::from_secs(30 * 86_400))
    };
    certs(server.memory_client()).check(at(time)).await.unwrap();
    // The RBAC loses `get` and `update` on the configuration: nothing can be read back or
    // injected, but the serving certificate, renewed by the CA it was always signed by,
    // must not expire in the files.
    let blind = certs(refusing(
        server.memory_client(),
        &[http::Method::GET, http::Method::PUT],
    ));
    let mut renewals = 0;
    let mut last = std::fs::read_to_string(folder.path().join("tls.crt")).unwrap();
    for day in 1..=150 {
        time = START + day * DAY;
        assert!(
            blind.check(at(time)).await.is_err(),
            "day {day}: the failure is reported"
        );
        let served = std::fs::read_to_string(folder.path().join("tls.crt")).unwrap();
        assert!(
            pki::not_after(&served).unwrap() > START + day * DAY,
            "day {day}: the served certificate expired"
        );
        renewals += usize::from(served != last);
        last = served;
    }
    assert!(renewals >= 3, "renewed {renewals} times");
}

/// The PUTs of the Secret `svc-cert` the server answered, by status.
fn secret_writes(server: &FakeApiServer) -> Vec<u16> {
    let requests = server.requests().into_iter();
    let puts = requests.filter(|r| r.method == "PUT" && r.path.ends_with("/secrets/svc-cert"));
    puts.map(|r| r.status).collect()
}

#[tokio::test]
async fn a_write_lost_to_another_writer_is_made_again_and_five_lost_wait_for_the_next_check() {
    let server = server().await;
    let folder = dir();
    let replica = certs(server.memory_client(), folder.path());
    replica.check(at(START)).await.unwrap();
    let lost = |times| fake_apiserver::Fault::Status {
        verb: fake_apiserver::Verb::Update,
        code: 409,
        times,
        retry_after_seconds: None,
    };

    // Day 200: the Secret needs writing (a renewal). Another writer wins the first two
    // writes; the third, planned again from what the server holds, lands.
    let serving = |server: &FakeApiServer| {
        let secret = server.get(&Gvr::core("secrets"), Some("shop"), "svc-cert");
        secret.unwrap()["data"]["tls.crt"].clone()
    };
    let before = serving(&server);
    server.clear_requests();
    server.inject(lost(2));
    replica.check(at(START + 200 * DAY)).await.unwrap();
    assert_eq!(secret_writes(&server), [409, 409, 200]);
    assert_ne!(serving(&server), before, "the renewal landed");

    // Five lost in a row: the check gives up and says so; nothing was half written, and the
    // next check makes the write.
    server
        .delete(&Gvr::core("secrets"), Some("shop"), "svc-cert")
        .unwrap();
    replica.check(at(START + 201 * DAY)).await.unwrap();
    server.clear_requests();
    server.inject(lost(5));
    let error = replica.check(at(START + 401 * DAY)).await.unwrap_err();
    assert!(
        matches!(error, CertError::Contended { tries: 5, .. }),
        "{error}"
    );
    assert_eq!(secret_writes(&server), [409; 5]);
    replica.check(at(START + 401 * DAY)).await.unwrap();
    assert_eq!(secret_writes(&server), [409, 409, 409, 409, 409, 200]);
}
