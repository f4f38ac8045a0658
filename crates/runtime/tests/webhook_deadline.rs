//! One budget per webhook request: the time a slow client takes to upload its body comes
//! out of the handler's time, so the answer (a refusal, for a handler that hangs) is sent
//! within one budget of the request's start — never after the caller's deadline, as it was
//! when the body and the handler each had the whole budget.
//!
//! No verdict here depends on the machine's speed: the client asks `Expect: 100-continue`
//! and uploads only once the server has answered `100 Continue`, which it does when it
//! starts reading the body, after its budget has started. So the upload's 400 ms all count
//! against the budget, however late the server got to the request.

use crate::webhook::client;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::admission::AdmissionRequest;
use kube_envtest::ServingCerts;
use kube_informer_runtime::{
    CancellationToken,
    tls::ServingCert,
    webhook::{Allowed, Denied, WebhookServer},
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BUDGET: Duration = Duration::from_secs(1);
const UPLOAD: Duration = Duration::from_millis(400);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upload_leaves_the_handler_only_what_is_left_of_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let certs = ServingCerts::for_loopback().unwrap();
    certs.write_to(dir.path()).unwrap();
    let server = WebhookServer::new(ServingCert::from_dir(dir.path()))
        .address(([127, 0, 0, 1], 0).into())
        .handler_timeout(BUDGET)
        .validating("/hang", |_: AdmissionRequest<ConfigMap>| {
            std::future::pending::<Result<Allowed, Denied>>()
        })
        .bind()
        .await
        .unwrap();
    let addr = server.local_addr();
    let cancel = CancellationToken::new();
    let serving = tokio::spawn(server.run(cancel.clone()));

    let body = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "slow", "operation": "CREATE", "name": "c", "namespace": "ns",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "userInfo": {"username": "tester"}, "dryRun": false,
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}}},
    })
    .to_string();
    let mut tls = client::tls_stream(addr, &certs.ca_pem).await.unwrap();
    let head = format!(
        "POST /hang HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        body.len()
    );
    let (first, rest) = body.split_at(body.len() / 2);
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    // The server's budget has started once it asks for the body.
    let mut go_on = Vec::new();
    while !go_on.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(tls.read(&mut byte).await.unwrap(), 1, "the server hung up");
        go_on.push(byte[0]);
    }
    let go_on = String::from_utf8_lossy(&go_on);
    assert!(go_on.starts_with("HTTP/1.1 100 Continue"), "{go_on}");
    tls.write_all(first.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    // The upload takes at least this long: the handler may have at most what is left.
    tokio::time::sleep(UPLOAD).await;
    tls.write_all(rest.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    let (mut answer, mut chunk) = (String::new(), [0u8; 4096]);
    while !answer.ends_with('}') {
        let read = tls.read(&mut chunk).await.unwrap();
        if read == 0 {
            break;
        }
        answer.push_str(&String::from_utf8_lossy(&chunk[..read]));
    }
    assert!(answer.contains("\"uid\":\"slow\""), "{answer}");
    assert!(answer.contains("did not answer within"), "{answer}");
    let handler_had = client::handler_had(&answer);
    assert!(
        handler_had <= BUDGET - UPLOAD,
        "the handler had {handler_had:?} after a {UPLOAD:?} upload, of a {BUDGET:?} budget: {answer}"
    );
    cancel.cancel();
    serving.await.unwrap();
}
