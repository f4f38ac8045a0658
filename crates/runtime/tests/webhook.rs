//! The webhook server over real TLS on loopback: typed validating and mutating handlers,
//! conversion, and every request that must be refused with a reason (a panicking or hung
//! handler, a body too large, not JSON, not the handler's type, a wrong path or method),
//! and the certificate reloaded when its files change.

pub(crate) mod client;

use std::{path::Path, time::Duration};

use bytes::Bytes;
use client::{Connection, connect};
use http_body_util::Full;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{ResourceExt, core::admission::AdmissionRequest};
use kube_envtest::ServingCerts;
use kube_informer_runtime::{
    CancellationToken,
    tls::{Reload, ServingCert},
    webhook::{Allowed, BoundWebhookServer, Denied, WebhookError, WebhookServer},
};
use serde_json::{Value, json};
use tokio::task::JoinSet;

/// A custom resource's type whose `replicas` has a serde default: absent from the raw object
/// the API server sends, present in the typed one.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct WidgetSpec {
    #[serde(default)]
    replicas: u32,
    size: String,
}

type Widget = kube::core::Object<WidgetSpec, kube::core::NotUsed>;

fn review(uid: &str, operation: &str, object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "operation": operation, "name": "c", "namespace": "ns",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "userInfo": {"username": "tester"}, "object": object, "dryRun": false,
        }
    })
}

fn configmap(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}, "data": data})
}

/// The server every test uses, with its certificate files in `dir`.
fn server(dir: &Path) -> WebhookServer {
    WebhookServer::new(ServingCert::from_dir(dir))
        .address(([127, 0, 0, 1], 0).into())
        .handler_timeout(Duration::from_millis(200))
        .max_request_bytes(64 << 10)
        .validating(
            "/validate",
            |request: AdmissionRequest<ConfigMap>| async move {
                let cm = request.object.expect("creates have an object");
                match cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get("size"))
                    .map(String::as_str)
                {
                    Some("huge") => Err(Denied::new("size must not be huge").code(422)),
                    Some("big") => Ok(Allowed::new().warning("size big is deprecated")),
                    _ => Ok(Allowed::new()),
                }
            },
        )
        .mutating("/mutate", |mut cm: ConfigMap, _| async move {
            cm.labels_mut().insert("team".into(), "unowned".into());
            Ok(cm)
        })
        .mutating("/scale-widget", |mut widget: Widget, _| async move {
            widget.spec.replicas = 3;
            Ok(widget)
        })
        .validating("/panic", |_: AdmissionRequest<ConfigMap>| async move {
            panic!("no handler should do this");
        })
        .validating("/hang", |_: AdmissionRequest<ConfigMap>| {
            std::future::pending::<Result<Allowed, Denied>>()
        })
        .conversion("/convert", |mut object: Value, to: &str| {
            if object.pointer("/spec/explode").is_some() {
                panic!("cannot convert an exploding object");
            }
            let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
                return Err("no spec".to_owned());
            };
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

struct Running {
    addr: std::net::SocketAddr,
    ca: String,
    server: BoundWebhookServer,
}

async fn bind(dir: &tempdir::Dir) -> Running {
    let certs = ServingCerts::for_loopback().unwrap();
    certs.write_to(dir.path()).unwrap();
    let server = server(dir.path()).bind().await.unwrap();
    Running {
        addr: server.local_addr(),
        ca: certs.ca_pem,
        server,
    }
}

/// Runs the server until the end of `test`, as a task this test owns.
async fn with_server<F, Fut>(test: F)
where
    F: FnOnce(std::net::SocketAddr, String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let dir = tempdir::Dir::new();
    let running = bind(&dir).await;
    let (addr, ca, cancel) = (running.addr, running.ca.clone(), CancellationToken::new());
    let mut tasks = JoinSet::new();
    tasks.spawn(running.server.run(cancel.clone()));
    test(addr, ca).await;
    cancel.cancel();
    tasks.join_next().await.unwrap().unwrap();
}

mod tempdir {
    /// A folder under the target dir, removed on drop.
    pub(crate) struct Dir(std::path::PathBuf);
    impl Dir {
        pub(crate) fn new() -> Dir {
            static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path =
                std::env::temp_dir().join(format!("webhook-test-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }
        pub(crate) fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn response(answer: &Value) -> &Value {
    &answer["response"]
}

#[tokio::test]
async fn validating_allows_warns_and_denies_with_the_code_given() {
    with_server(|addr, ca| async move {
        let mut conn = connect(addr, &ca).await.unwrap();
        let (status, answer) = conn
            .post(
                "/validate",
                &review("u1", "CREATE", configmap(json!({"size": "small"}))),
            )
            .await;
        assert_eq!(status, 200);
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(response(&answer)["uid"], "u1");
        assert_eq!(response(&answer)["allowed"], true);

        let (_, answer) = conn
            .post(
                "/validate",
                &review("u2", "CREATE", configmap(json!({"size": "big"}))),
            )
            .await;
        assert_eq!(response(&answer)["allowed"], true);
        assert_eq!(
            response(&answer)["warnings"],
            json!(["size big is deprecated"])
        );

        let (_, answer) = conn
            .post(
                "/validate",
                &review("u3", "CREATE", configmap(json!({"size": "huge"}))),
            )
            .await;
        assert_eq!(response(&answer)["uid"], "u3");
        assert_eq!(response(&answer)["allowed"], false);
        assert_eq!(response(&answer)["status"]["code"], 422);
        assert_eq!(
            response(&answer)["status"]["message"],
            "size must not be huge"
        );
    })
    .await;
}

#[tokio::test]
async fn mutating_answers_a_patch_that_keeps_fields_the_type_does_not_know() {
    with_server(|addr, ca| async move {
        let mut conn = connect(addr, &ca).await.unwrap();
        // A field k8s-openapi's ConfigMap does not have: the patch must leave it alone.
        let mut object = configmap(json!({"a": "1"}));
        object["metadata"]["labels"] = json!({"app": "web"});
        object["futureField"] = json!({"keep": true});
        let (status, answer) = conn
            .post("/mutate", &review("m1", "CREATE", object.clone()))
            .await;
        assert_eq!(status, 200);
        let response = response(&answer);
        assert_eq!(response["allowed"], true);
        assert_eq!(response["patchType"], "JSONPatch");
        let patch = base64_decode(response["patch"].as_str().unwrap());
        let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
        assert_eq!(
            object["metadata"]["labels"],
            json!({"app": "web", "team": "unowned"})
        );
        assert_eq!(object["futureField"], json!({"keep": true}));
        assert_eq!(object["data"], json!({"a": "1"}));

        // Already as the handler wants it: no patch at all.
        let (_, answer) = conn
            .post("/mutate", &review("m2", "CREATE", object.clone()))
            .await;
        assert_eq!(answer["response"]["allowed"], true);
        assert!(answer["response"].get("patch").is_none(), "{answer}");

        // A DELETE has no object: allowed, handler not called.
        let mut delete = review("m3", "DELETE", Value::Null);
        delete["request"]["oldObject"] = object;
        let (_, answer) = conn.post("/mutate", &delete).await;
        assert_eq!(answer["response"]["allowed"], true);
    })
    .await;
}

#[tokio::test]
async fn a_mutation_of_a_field_the_raw_object_lacks_is_a_patch_that_applies() {
    with_server(|addr, ca| async move {
        let mut conn = connect(addr, &ca).await.unwrap();
        let mut object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                                "metadata": {"name": "w", "namespace": "ns"}, "spec": {"size": "big"}});
        let (_, answer) = conn.post("/scale-widget", &review("w1", "CREATE", object.clone())).await;
        assert_eq!(response(&answer)["allowed"], true, "{answer}");
        let patch = base64_decode(response(&answer)["patch"].as_str().unwrap());
        let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
        // As the API server does: the patch applies to what it holds, or the request fails.
        json_patch::patch(&mut object, &patch).unwrap();
        assert_eq!(object["spec"], json!({"size": "big", "replicas": 3}));
    })
    .await;
}

#[tokio::test]
async fn a_body_that_never_arrives_is_refused_after_the_handler_timeout() {
    with_server(|addr, ca| async move {
        let mut tls = client::tls_stream(addr, &ca).await.unwrap();
        let head = "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
        tokio::io::AsyncWriteExt::write_all(&mut tls, head.as_bytes()).await.unwrap();
        // Read until the whole answer is in (its body ends the JSON review).
        let (mut answer, mut chunk) = (String::new(), [0u8; 4096]);
        while !answer.ends_with('}') {
            let read = tokio::io::AsyncReadExt::read(&mut tls, &mut chunk).await.unwrap();
            if read == 0 {
                break;
            }
            answer.push_str(&String::from_utf8_lossy(&chunk[..read]));
        }
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("did not arrive within 200ms"), "{answer}");
        assert!(answer.contains("\"code\":408"), "{answer}");
    })
    .await;
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

#[tokio::test]
async fn a_panicking_or_hung_handler_is_a_refusal_and_the_connection_lives_on() {
    with_server(|addr, ca| async move {
        let mut conn = connect(addr, &ca).await.unwrap();
        let (status, answer) = conn
            .post("/panic", &review("p1", "CREATE", configmap(json!({}))))
            .await;
        assert_eq!(status, 200);
        assert_eq!(response(&answer)["uid"], "p1");
        assert_eq!(response(&answer)["allowed"], false);
        assert_eq!(response(&answer)["status"]["code"], 500);
        let message = response(&answer)["status"]["message"].as_str().unwrap();
        assert!(
            message.contains("panicked: no handler should do this"),
            "{message}"
        );

        let (_, answer) = conn
            .post("/hang", &review("h1", "CREATE", configmap(json!({}))))
            .await;
        assert_eq!(response(&answer)["uid"], "h1");
        assert_eq!(response(&answer)["allowed"], false);
        let message = response(&answer)["status"]["message"].as_str().unwrap();
        assert!(message.contains("did not answer within 200ms"), "{message}");
        // What the handler had of it: the budget less the body's arrival, never more.
        let had = client::handler_had(message);
        assert!(had <= Duration::from_millis(200), "{message}");

        // Same connection, still served.
        let (status, answer) = conn
            .post("/validate", &review("ok", "CREATE", configmap(json!({}))))
            .await;
        assert_eq!((status, &response(&answer)["allowed"]), (200, &json!(true)));
    })
    .await;
}

#[tokio::test]
async fn bad_requests_are_refused_with_what_was_wrong() {
    with_server(|addr, ca| async move {
        let mut conn = connect(addr, &ca).await.unwrap();
        // Not a ConfigMap: `data` must map strings to strings. The uid still comes back.
        let (status, answer) = conn
            .post("/validate", &review("t1", "CREATE", configmap(json!(7))))
            .await;
        assert_eq!(status, 200);
        assert_eq!(response(&answer)["uid"], "t1");
        assert_eq!(response(&answer)["allowed"], false);
        assert_eq!(response(&answer)["status"]["code"], 400);
        let message = response(&answer)["status"]["message"].as_str().unwrap();
        assert!(
            message.contains("cannot decode the AdmissionReview as ConfigMap"),
            "{message}"
        );

        // Larger than the limit (64 KiB here).
        let big = configmap(json!({"blob": "x".repeat(100 << 10)}));
        let (status, answer) = conn.post("/validate", &review("b1", "CREATE", big)).await;
        assert_eq!(status, 200);
        assert_eq!(response(&answer)["allowed"], false);
        assert_eq!(response(&answer)["status"]["code"], 413);
        // The unread body ends that connection (as HTTP/1.1 must); the server goes on.
        let mut conn = connect(addr, &ca).await.unwrap();

        // Not JSON at all, then not declared as JSON.
        let request = |content_type: &str, body: &'static str| {
            http::Request::post("/validate")
                .header("content-type", content_type)
                .header("host", "127.0.0.1")
                .body(Full::new(Bytes::from_static(body.as_bytes())))
                .unwrap()
        };
        let (status, body) = conn.send(request("application/json", "{not json")).await;
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (status, &response(&answer)["status"]["code"]),
            (200, &json!(400))
        );
        let (_, body) = conn
            .send(request("text/plain", r#"{"request":{"uid":"ct1"}}"#))
            .await;
        let answer: Value = serde_json::from_slice(&body).unwrap();
        let message = response(&answer)["status"]["message"].as_str().unwrap();
        assert!(message.contains("application/json"), "{message}");
        assert_eq!(
            response(&answer)["uid"],
            "ct1",
            "the refusal names its request"
        );

        // A path nobody serves, a GET.
        let (status, answer) = conn.post("/nowhere", &json!({})).await;
        assert_eq!(status, 404);
        assert!(answer.as_str().unwrap().contains("/validate"), "{answer}");
        let get = http::Request::get("/validate")
            .header("host", "127.0.0.1")
            .body(Full::new(Bytes::new()))
            .unwrap();
        assert_eq!(conn.send(get).await.0, 405);
    })
    .await;
}

fn conversion_review(objects: Vec<Value>) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "c1", "desiredAPIVersion": "example.com/v2", "objects": objects}
    })
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "ns"}, "spec": spec})
}

#[tokio::test]
async fn conversion_converts_every_object_or_names_the_one_that_failed() {
    with_server(|addr, ca| async move {
        let mut conn = connect(addr, &ca).await.unwrap();
        let objects = vec![
            widget("a", json!({"size": 3})),
            widget("b", json!({"size": 5})),
        ];
        let (status, answer) = conn.post("/convert", &conversion_review(objects)).await;
        assert_eq!(status, 200);
        assert_eq!(answer["kind"], "ConversionReview");
        assert_eq!(answer["response"]["uid"], "c1");
        assert_eq!(answer["response"]["result"]["status"], "Success");
        let converted = answer["response"]["convertedObjects"].as_array().unwrap();
        assert_eq!(converted.len(), 2);
        assert_eq!(converted[0]["apiVersion"], "example.com/v2");
        assert_eq!(converted[0]["spec"], json!({"replicas": 3}));
        assert_eq!(converted[1]["metadata"]["name"], "b");

        for (bad, wanted) in [
            (
                widget("c", json!(null)),
                "converting Widget ns/c to example.com/v2: no spec",
            ),
            (
                widget("d", json!({"explode": true})),
                "the converter panicked: cannot convert an exploding object",
            ),
        ] {
            let (_, answer) = conn
                .post(
                    "/convert",
                    &conversion_review(vec![widget("a", json!({})), bad]),
                )
                .await;
            assert_eq!(answer["response"]["uid"], "c1");
            assert_eq!(answer["response"]["result"]["status"], "Failure");
            let message = answer["response"]["result"]["message"].as_str().unwrap();
            assert!(message.contains(wanted), "{message}");
        }
    })
    .await;
}

#[tokio::test]
async fn a_rotated_certificate_is_served_to_new_connections_and_a_broken_one_is_not() {
    let dir = tempdir::Dir::new();
    let first = bind(&dir).await;
    let (addr, watcher) = (first.addr, first.server.certificate().clone());
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    tasks.spawn(first.server.run(cancel.clone()));

    let before: Connection = connect(addr, &first.ca).await.unwrap();
    assert_eq!(before.presented, watcher.current());
    assert_eq!(watcher.check().unwrap(), Reload::Unchanged);

    let second = ServingCerts::for_loopback().unwrap();
    second.write_to(dir.path()).unwrap();
    assert_eq!(watcher.check().unwrap(), Reload::Reloaded);
    let after = connect(addr, &second.ca_pem).await.unwrap();
    assert_ne!(after.presented, before.presented);
    assert_eq!(after.presented, watcher.current());
    assert!(
        connect(addr, &first.ca).await.is_err(),
        "the old CA no longer verifies"
    );

    // A half-written pair: an error, and the second certificate stays.
    std::fs::write(
        dir.path().join("tls.key"),
        "-----BEGIN PRIVATE KEY-----\ngarbage",
    )
    .unwrap();
    assert!(watcher.check().is_err());
    assert_eq!(
        connect(addr, &second.ca_pem).await.unwrap().presented,
        after.presented
    );
    // A key of another pair: refused too.
    let other = ServingCerts::for_loopback().unwrap();
    std::fs::write(dir.path().join("tls.key"), &other.key_pem).unwrap();
    let error = watcher.check().unwrap_err().to_string();
    assert!(error.contains("tls.key"), "{error}");
    assert_eq!(
        connect(addr, &second.ca_pem).await.unwrap().presented,
        after.presented
    );

    cancel.cancel();
    tasks.join_next().await.unwrap().unwrap();
}

#[tokio::test]
async fn a_missing_certificate_or_a_path_given_twice_fails_at_bind() {
    let dir = tempdir::Dir::new();
    let error = server(dir.path()).bind().await.unwrap_err();
    assert!(matches!(error, WebhookError::Tls(_)), "{error:?}");
    assert!(error.to_string().contains("tls.crt"), "{error}");

    ServingCerts::for_loopback()
        .unwrap()
        .write_to(dir.path())
        .unwrap();
    let twice = server(dir.path())
        .validating("/validate", |_: AdmissionRequest<ConfigMap>| async {
            Ok(Allowed::new())
        });
    let error = twice.bind().await.unwrap_err();
    assert!(
        matches!(error, WebhookError::DuplicatePath(ref path) if path == "/validate"),
        "{error:?}"
    );
}

/// The test server, bound, with an hour for every handler: (its certificates' folder, the
/// certificates, the server).
async fn patient() -> (tempdir::Dir, ServingCerts, BoundWebhookServer) {
    let dir = tempdir::Dir::new();
    let certs = ServingCerts::for_loopback().unwrap();
    certs.write_to(dir.path()).unwrap();
    let server = server(dir.path())
        .handler_timeout(Duration::from_secs(3600))
        .bind()
        .await
        .unwrap();
    (dir, certs, server)
}

/// The API server gives up on a webhook at its `timeoutSeconds` and says so in the call
/// (`?timeout=2s`): a hung handler is refused a margin before that, whatever the server's
/// own limit, so the refusal reaches the client instead of the API server's deadline error.
#[tokio::test]
async fn a_hung_handler_is_refused_before_the_callers_deadline() {
    let (_dir, certs, server) = patient().await;
    let addr = server.local_addr();
    let (cancel, mut tasks) = (CancellationToken::new(), JoinSet::new());
    tasks.spawn(server.run(cancel.clone()));
    let mut conn = connect(addr, &certs.ca_pem).await.unwrap();
    let hung = review("t1", "CREATE", configmap(json!({})));
    let (status, answer) = tokio::time::timeout(
        Duration::from_secs(60),
        conn.post("/hang?timeout=2s", &hung),
    )
    .await
    .expect("no answer within a minute: the caller's deadline was ignored");
    assert_eq!(status, 200);
    assert_eq!(response(&answer)["uid"], "t1");
    assert_eq!(response(&answer)["allowed"], false);
    let message = response(&answer)["status"]["message"].as_str().unwrap();
    assert!(message.contains("did not answer within 1.75s"), "{message}");
    cancel.cancel();
    tasks.join_next().await.unwrap().unwrap();
}

#[tokio::test]
async fn a_dropped_server_ends_its_connections_and_leaves_no_task_behind() {
    // Handlers may take an hour here: only the drop can end the request.
    let (_dir, certs, server) = patient().await;
    let addr = server.local_addr();
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let mut tasks = JoinSet::new();
    tasks.spawn(server.run(CancellationToken::new()));
    // A request to the handler that never answers, held open.
    let mut tls = client::tls_stream(addr, &certs.ca_pem).await.unwrap();
    let body = review("d1", "CREATE", configmap(json!({}))).to_string();
    let request = format!(
        "POST /hang HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut tls, request.as_bytes())
        .await
        .unwrap();
    // The server and its connection are running (a bound, not a verdict).
    for _ in 0..10_000 {
        if metrics.num_alive_tasks() >= before + 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(
        metrics.num_alive_tasks(),
        before + 2,
        "the server and one connection"
    );

    // Killed, not asked to stop.
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    // Aborted tasks are reaped when next polled: a few turns, not a wait for time.
    for _ in 0..100 {
        if metrics.num_alive_tasks() == before {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(
        metrics.num_alive_tasks(),
        before,
        "a connection task outlived its server"
    );
    let mut rest = Vec::new();
    let read = tokio::io::AsyncReadExt::read_to_end(&mut tls, &mut rest).await;
    assert!(
        read.is_err() || rest.is_empty(),
        "the held request got an answer: {rest:?}"
    );
}
