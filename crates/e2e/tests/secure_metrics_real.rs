//! `/metrics` over HTTPS behind the API server's TokenReview and SubjectAccessReview, on a
//! real kube-apiserver with RBAC (real only: fake-apiserver has neither review): a scraper
//! whose service account is bound to `get /metrics` reads them; another service account is
//! refused with 403; no token or a forged one gets 401; the plain port keeps the probes and
//! no longer serves metrics; a decision is reused instead of asked again per scrape.

use crate::grant;

use base64::Engine as _;
use e2e::ensure_namespace;
use kube_envtest::ServingCerts;
use kube_informer_runtime::{
    CancellationToken, Manager, ManagerOptions, manager::SecureMetrics, tls::ServingCert,
};
use serde_json::{Value, json};
use tokio::task::JoinSet;

const NS: &str = "secure-metrics";

async fn post(client: &kube::Client, path: &str, body: Value) -> Value {
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    client.request::<Value>(request).await.unwrap()
}

/// A token for the service account `name` (TokenRequest).
async fn token_for(client: &kube::Client, name: &str) -> String {
    let path = format!("/api/v1/namespaces/{NS}/serviceaccounts");
    post(client, &path, json!({"metadata": {"name": name}})).await;
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}});
    let answer = post(client, &format!("{path}/{name}/token"), request).await;
    answer["status"]["token"].as_str().unwrap().to_owned()
}

fn pem_to_der(pem: &str) -> Vec<u8> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

/// GET `path` at `url` (trusting `ca`, when HTTPS) with `token`: the code and the body.
async fn scrape(url: &str, ca: Option<&str>, token: Option<&str>, path: &str) -> (u16, String) {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.root_cert = ca.map(|pem| vec![pem_to_der(pem)]);
    let client = kube::Client::try_from(config).unwrap();
    let mut request = http::Request::get(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    match client.request_text(request.body(Vec::new()).unwrap()).await {
        Ok(text) => (200, text),
        Err(kube::Error::Api(status)) => (status.code, status.message),
        Err(other) => panic!("GET {url}{path}: {other}"),
    }
}

/// `GET path` on `url` with `token`: the status and the raw body (a profile is binary).
async fn fetch(url: &str, ca: Option<&str>, token: &str, path: &str) -> (u16, Vec<u8>) {
    use http_body_util::BodyExt as _;
    let mut config = kube::Config::new(url.parse().unwrap());
    config.root_cert = ca.map(|pem| vec![pem_to_der(pem)]);
    let client = kube::Client::try_from(config).unwrap();
    let request = http::Request::get(path)
        .header("authorization", format!("Bearer {token}"))
        .body(kube::client::Body::empty())
        .unwrap();
    let response = client.send(request).await.unwrap();
    let code = response.status().as_u16();
    (
        code,
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
}

/// `rest_client_requests_total{code="201",method="POST"}` in a metrics text: the reviews
/// the manager has sent.
fn reviews_sent(metrics: &str) -> u64 {
    metrics
        .lines()
        .find(|l| {
            l.starts_with("rest_client_requests_total")
                && l.contains("code=\"201\"")
                && l.contains("method=\"POST\"")
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn only_callers_the_api_server_authorizes_read_secure_metrics() {
    let Some(env) = grant::rbac_server().await else {
        return;
    };
    let client = env.client();
    ensure_namespace(&client, NS).await;
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    post(
        &client,
        &format!("{rbac}/clusterroles"),
        json!({
            "metadata": {"name": "metrics-reader"},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }),
    )
    .await;
    let (scraper, stranger) = (
        token_for(&client, "scraper").await,
        token_for(&client, "stranger").await,
    );
    post(&client, &format!("{rbac}/clusterrolebindings"), json!({
        "metadata": {"name": "scraper-reads-metrics"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": NS}],
    }))
    .await;
    // The authorizer reads RBAC from its own informer: wait until it has seen the binding
    // (setup, not verdict), or the first scrape's denial would be the cache's lag.
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {
            "user": format!("system:serviceaccount:{NS}:scraper"),
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{NS}"), "system:authenticated"],
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
    });
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let reviews = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    while post(&client, reviews, review.clone()).await["status"]["allowed"] != json!(true) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the API server never authorized the scraper's binding"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    let dir = std::env::temp_dir().join(format!("secure-metrics-real-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let certs = ServingCerts::for_loopback().unwrap();
    certs.write_to(&dir).unwrap();
    let secure = SecureMetrics::new(ServingCert::from_dir(&dir)).bind(([127, 0, 0, 1], 0).into());
    // The manager runs as a user with exactly the RBAC it generates (the two reviews).
    let operator = grant::impersonating(&env, "metrics-operator");
    let options = ManagerOptions::for_tests()
        .secure_metrics(secure)
        .profiling(true);
    let manager = Manager::new(operator, options).await.unwrap();
    let needed = manager.rbac();
    assert_eq!(needed.permissions().len(), 2, "{needed:?}");
    grant::grant(&client, &needed, "metrics-operator", "metrics-operator").await;
    let (mut plain, mut tls) = (manager.endpoints(), manager.secure_metrics_endpoint());
    let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
    let mut running = JoinSet::new();
    running.spawn(manager.run_until(graceful.clone(), force));
    let tls = tls.wait_for(Option::is_some).await.unwrap().unwrap();
    let plain = plain.wait_for(Option::is_some).await.unwrap().unwrap();
    let (secure_url, plain_url) = (
        format!("https://127.0.0.1:{}", tls.port()),
        format!("http://{plain}"),
    );
    let ca = Some(certs.ca_pem.as_str());

    let (code, body) = scrape(&secure_url, ca, None, "/metrics").await;
    assert_eq!(code, 401, "{body}");
    let (code, body) = scrape(&secure_url, ca, Some("forged-token"), "/metrics").await;
    assert_eq!(code, 401, "{body}");
    let (code, body) = scrape(&secure_url, ca, Some(&stranger), "/metrics").await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("system:serviceaccount:secure-metrics:stranger"),
        "{body}"
    );
    assert!(body.contains("may not get /metrics"), "{body}");

    let (code, first) = scrape(&secure_url, ca, Some(&scraper), "/metrics").await;
    assert_eq!(code, 200, "{first}");
    assert!(first.contains("rest_client_requests_total"), "{first}");
    // Asked once (a TokenReview and a SubjectAccessReview), then reused.
    let (_, second) = scrape(&secure_url, ca, Some(&scraper), "/metrics").await;
    assert!(reviews_sent(&first) > 0, "{first}");
    assert_eq!(
        reviews_sent(&second),
        reviews_sent(&first),
        "a second scrape asked the API server again"
    );

    // A CPU profile needs its own grant: the scraper may read metrics, not profile.
    let profile = "/debug/pprof/profile?seconds=1";
    let (code, body) = scrape(&secure_url, ca, Some(&scraper), profile).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("may not get /debug/pprof/profile"), "{body}");
    post(
        &client,
        &format!("{rbac}/clusterroles"),
        json!({
            "metadata": {"name": "profiler"},
            "rules": [{"nonResourceURLs": ["/debug/pprof/profile"], "verbs": ["get"]}],
        }),
    )
    .await;
    let profiler = token_for(&client, "profiler").await;
    post(&client, &format!("{rbac}/clusterrolebindings"), json!({
        "metadata": {"name": "profiler-profiles"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "profiler"},
        "subjects": [{"kind": "ServiceAccount", "name": "profiler", "namespace": NS}],
    }))
    .await;
    let mut review = review.clone();
    review["spec"]["user"] = json!(format!("system:serviceaccount:{NS}:profiler"));
    review["spec"]["nonResourceAttributes"]["path"] = json!("/debug/pprof/profile");
    while post(&client, reviews, review.clone()).await["status"]["allowed"] != json!(true) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the API server never authorized the profiler's binding"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (code, body) = fetch(&secure_url, ca, &profiler, profile).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let decoded = <pprof::protos::Profile as pprof::protos::Message>::decode(&body[..]).unwrap();
    assert!(!decoded.sample_type.is_empty());

    // The plain port: probes yes, metrics and profiles no.
    let (code, _) = scrape(&plain_url, None, None, "/healthz").await;
    assert_eq!(code, 200);
    let (code, body) = scrape(&plain_url, None, None, "/metrics").await;
    assert_eq!(code, 404, "{body}");
    let (code, body) = scrape(&plain_url, None, None, profile).await;
    assert_eq!(code, 404, "{body}");

    graceful.cancel();
    running
        .join_next()
        .await
        .unwrap()
        .unwrap()
        .expect("the manager stops cleanly");
    let _ = std::fs::remove_dir_all(&dir);
}
