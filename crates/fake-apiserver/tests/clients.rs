//! Real clients against the fake: kube's typed `Api` and, when installed, kubectl.

use crate::common;

use common::*;
use fake_apiserver::{Gvr, ServerConfig};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
};
use serde_json::json;

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test]
async fn kube_typed_api_round_trips() {
    let server = server(ServerConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    for i in 0..5 {
        api.create(&PostParams::default(), &configmap(&format!("cm-{i}")))
            .await
            .unwrap();
    }
    // Paging through kube's ListParams.
    let page = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.metadata.remaining_item_count, Some(3));
    let token = page.metadata.continue_.clone().unwrap();
    let rest = api
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 3);

    let got = api.get("cm-0").await.unwrap();
    assert!(got.metadata.uid.is_some());
    // A stale resourceVersion is a 409 Conflict.
    api.patch(
        "cm-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "new"}})),
    )
    .await
    .unwrap();
    let err = api
        .replace("cm-0", &PostParams::default(), &got)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => {
            assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"))
        }
        other => panic!("expected a 409, got {other}"),
    }
    // Immediate deletion answers a Status (kube's Right).
    let deleted = api.delete("cm-1", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_right());
    let missing = api.get("cm-1").await.unwrap_err();
    assert!(
        matches!(missing, kube::Error::Api(ref s) if s.code == 404),
        "{missing}"
    );
}

#[tokio::test]
async fn kube_watch_decodes_events_and_bookmarks() {
    let server =
        server(ServerConfig::default().bookmark_interval(std::time::Duration::from_millis(20)))
            .await;
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let rv = server.resource_version().to_string();
    let stream = api
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap();
    let mut stream = stream.boxed();
    let cms = Gvr::core("configmaps");
    server.create(&cms, Some("demo"), cm("a")).unwrap();
    server.delete(&cms, Some("demo"), "a").unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        match stream.try_next().await.unwrap().expect("stream ended") {
            WatchEvent::Added(o) => kinds.push(format!("added {}", o.metadata.name.unwrap())),
            WatchEvent::Deleted(o) => kinds.push(format!("deleted {}", o.metadata.name.unwrap())),
            WatchEvent::Bookmark(b) if kinds.len() == 2 => {
                kinds.push(format!("bookmark {}", b.metadata.resource_version))
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        kinds,
        [
            "added a",
            "deleted a",
            format!("bookmark {}", server.resource_version()).as_str()
        ]
    );
}

/// As kube-apiserver's watch cache: a watch that asked for bookmarks gets one at the
/// server's current version two seconds before its deadline (the soonest a client resuming
/// from an old version learns it has caught up), even when nothing it watches changed.
#[tokio::test]
async fn a_watch_with_bookmarks_gets_one_two_seconds_before_its_deadline() {
    let server = server(ServerConfig::default().namespaces(["demo", "other"])).await;
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let from = server.resource_version().to_string();
    // A change elsewhere: the server's version moves, nothing this watch sees.
    server
        .create(
            &Gvr::core("configmaps"),
            Some("other"),
            json!({"metadata": {"name": "elsewhere", "namespace": "other"}}),
        )
        .unwrap();
    let now = server.resource_version().to_string();
    for bookmarks in [true, false] {
        let params = WatchParams {
            bookmarks,
            ..WatchParams::default().timeout(3)
        };
        let events: Vec<_> = api
            .watch(&params, &from)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let seen: Vec<String> = events
            .iter()
            .map(|e| match e {
                WatchEvent::Bookmark(b) => format!("bookmark {}", b.metadata.resource_version),
                other => format!("{other:?}"),
            })
            .collect();
        let expected = match bookmarks {
            true => vec![format!("bookmark {now}")],
            false => vec![],
        };
        assert_eq!(seen, expected, "bookmarks asked: {bookmarks}");
    }
}

#[tokio::test]
async fn kubectl_gets_creates_labels_and_deletes() {
    if !kubectl_installed() {
        return;
    }
    let server = server(ServerConfig::default()).await;
    server.create(&Gvr::core("pods"), Some("demo"), json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})).unwrap();
    let manifest = std::env::temp_dir().join(format!(
        "fake-apiserver-kubectl-{}.json",
        std::process::id()
    ));
    std::fs::write(&manifest, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-kubectl", "namespace": "demo"}, "data": {"a": "b"}}).to_string()).unwrap();
    let url = server.url().to_owned();
    let run = |args: Vec<String>| kubectl(&url, args);
    let s = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert!(run(s(&["get", "pods", "-n", "demo"])).await.contains("web"));
    let file = manifest.display().to_string();
    assert!(run(s(&["create", "-f", &file])).await.contains("created"));
    assert!(
        run(s(&[
            "label",
            "configmap",
            "from-kubectl",
            "-n",
            "demo",
            "touched=yes"
        ]))
        .await
        .contains("labeled")
    );
    let labels = run(s(&[
        "get",
        "configmap",
        "from-kubectl",
        "-n",
        "demo",
        "-o",
        "jsonpath={.metadata.labels.touched}",
    ]))
    .await;
    assert_eq!(labels.trim(), "yes");
    assert!(
        run(s(&["delete", "configmap", "from-kubectl", "-n", "demo"]))
            .await
            .contains("deleted")
    );
    assert!(
        server
            .get(&Gvr::core("configmaps"), Some("demo"), "from-kubectl")
            .is_err()
    );
    let _ = std::fs::remove_file(manifest);
}

/// Whether kubectl is on the PATH (a note when not: the test is skipped).
fn kubectl_installed() -> bool {
    let installed = which("kubectl").is_ok();
    if !installed {
        eprintln!(
            "skipped: kubectl is not installed (Debian: apt-get install kubectl or kubernetes-client)"
        );
    }
    installed
}

/// Runs kubectl against the server at `url`, and returns what it printed.
///
/// # Panics
/// When kubectl fails.
async fn kubectl(url: &str, args: Vec<String>) -> String {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new("kubectl")
            .arg(format!("--server={url}"))
            .args(&args)
            .env("KUBECONFIG", "/dev/null")
            .output()
            .expect("kubectl runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "kubectl {args:?} failed: {text}");
        text
    })
    .await
    .unwrap()
}

/// kubectl's everyday edits: `apply` after changing one image keeps the other container
/// (client-side apply sends a strategic merge patch with `$setElementOrder`), `patch`
/// (strategic by default) adds a container, and `scale` goes through the scale subresource.
/// The results are the real server's (see crates/e2e/tests/strategic.rs).
#[tokio::test]
async fn kubectl_apply_patch_and_scale_keep_the_deployment_whole() {
    if !kubectl_installed() {
        return;
    }
    let server = server(ServerConfig::default()).await;
    let url = server.url().to_owned();
    let manifest =
        std::env::temp_dir().join(format!("fake-apiserver-apply-{}.json", std::process::id()));
    let file = manifest.display().to_string();
    let deployment = |image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "a", "image": image}, {"name": "b", "image": "busybox"}]}}}})
        .to_string()
    };
    let apply = || {
        kubectl(
            &url,
            vec![
                "apply".into(),
                "--validate=false".into(),
                "-f".into(),
                file.clone(),
            ],
        )
    };
    std::fs::write(&manifest, deployment("nginx")).unwrap();
    assert!(apply().await.contains("created"));
    std::fs::write(&manifest, deployment("nginx:2")).unwrap();
    assert!(apply().await.contains("configured"));
    let patch =
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}"#;
    kubectl(
        &url,
        ["patch", "deploy", "web", "-p", patch]
            .map(String::from)
            .to_vec(),
    )
    .await;
    kubectl(
        &url,
        ["scale", "deploy", "web", "--replicas=3"]
            .map(String::from)
            .to_vec(),
    )
    .await;
    let stored = server
        .get(
            &Gvr::new("apps", "v1", "deployments"),
            Some("default"),
            "web",
        )
        .unwrap();
    let containers: Vec<(&str, &str)> = stored["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["image"].as_str().unwrap()))
        .collect();
    assert_eq!(
        containers,
        [("sidecar", "busybox"), ("a", "nginx:2"), ("b", "busybox")]
    );
    assert!(!stored.to_string().contains("$setElementOrder"), "{stored}");
    assert_eq!(stored["spec"]["replicas"], 3);
    let _ = std::fs::remove_file(manifest);
}

fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    let path = std::env::var_os("PATH").ok_or(())?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or(())
}

/// A port in use is named in the error, with what to do about it.
#[tokio::test]
async fn a_port_in_use_is_named_in_the_error() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = fake_apiserver::FakeApiServer::start(ServerConfig::default().port(port))
        .await
        .expect_err("the port is taken");
    assert!(
        matches!(&err, fake_apiserver::Error::Bind { addr, .. } if addr.port() == port),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
}

/// The in-memory client on a paused clock: requests and a watch answer without the clock
/// moving, a restart cuts the watch as over TCP, a terminated server refuses new requests
/// with an error saying so, and shutdown ends what is still open.
#[tokio::test(start_paused = true)]
async fn the_memory_client_speaks_the_same_api_without_a_socket() {
    let server = server(ServerConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(server.memory_client(), "demo");
    let start = tokio::time::Instant::now();
    api.create(&PostParams::default(), &configmap("a"))
        .await
        .unwrap();
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.clone().unwrap();
    let mut watch = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &configmap("b"))
        .await
        .unwrap();
    match watch.try_next().await.unwrap() {
        Some(WatchEvent::Added(cm)) => assert_eq!(cm.metadata.name.as_deref(), Some("b")),
        other => panic!("expected b's ADDED, got {other:?}"),
    }
    assert_eq!(start, tokio::time::Instant::now(), "the paused clock moved");
    assert_eq!(server.requests().len(), 4, "recorded like TCP requests");

    server.restart();
    assert!(
        watch.try_next().await.unwrap().is_none(),
        "a restart ends the watch"
    );
    server.terminate();
    let refused = api.get("a").await.unwrap_err();
    assert!(refused.to_string().contains("not listening"), "{refused}");
    server.shutdown().await;
}
