//! The replay server through kube's client: pages, watches from any version, refusals.

use bytes::Bytes;
use fake_apiserver::replay::{ReplayEvent, ReplayServer, Traffic};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ListParams, WatchEvent, WatchParams},
};

fn cm(name: &str, rv: u64) -> Vec<u8> {
    format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#).into_bytes()
}

fn traffic() -> Traffic {
    Traffic {
        list_kind: "ConfigMapList".into(),
        api_version: "v1".into(),
        list_resource_version: 5,
        objects: (1..=5)
            .map(|i| Bytes::from(cm(&format!("cm-{i}"), i)))
            .collect(),
        events: vec![
            ReplayEvent::new(6, "ADDED", &cm("cm-6", 6)),
            ReplayEvent::new(7, "MODIFIED", &cm("cm-1", 7)),
            ReplayEvent::new(8, "DELETED", &cm("cm-2", 8)),
        ],
    }
}

async fn api() -> (ReplayServer, Api<ConfigMap>) {
    let server = ReplayServer::start(traffic()).await.unwrap();
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    (server, Api::all(client))
}

#[tokio::test]
async fn lists_page_by_limit_and_continue_like_the_real_server() {
    let (_server, api) = api().await;
    let mut params = ListParams::default().limit(2);
    let mut names = Vec::new();
    let mut remaining = Vec::new();
    loop {
        let page = api.list(&params).await.unwrap();
        assert_eq!(page.metadata.resource_version.as_deref(), Some("5"));
        remaining.push(page.metadata.remaining_item_count);
        names.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    assert_eq!(names, ["cm-1", "cm-2", "cm-3", "cm-4", "cm-5"]);
    assert_eq!(remaining, [Some(3), Some(1), None]);
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        5
    );
    let bad = api
        .list(&ListParams::default().continue_token("nope"))
        .await;
    assert!(matches!(bad, Err(kube::Error::Api(s)) if s.code == 400));
}

async fn watch_from(api: &Api<ConfigMap>, rv: &str, expect: usize) -> Vec<String> {
    let params = WatchParams::default().timeout(1);
    let mut stream = api.watch(&params, rv).await.unwrap().boxed();
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        let line = match event.unwrap() {
            WatchEvent::Added(c) => format!("ADDED {}", c.metadata.name.unwrap()),
            WatchEvent::Modified(c) => format!("MODIFIED {}", c.metadata.name.unwrap()),
            WatchEvent::Deleted(c) => format!("DELETED {}", c.metadata.name.unwrap()),
            WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
            WatchEvent::Error(e) => panic!("{e:?}"),
        };
        seen.push(line);
        if seen.len() == expect {
            break;
        }
    }
    seen
}

#[tokio::test]
async fn watches_replay_the_events_after_the_requested_version_then_a_bookmark() {
    let (_server, api) = api().await;
    assert_eq!(
        watch_from(&api, "5", 4).await,
        ["ADDED cm-6", "MODIFIED cm-1", "DELETED cm-2", "BOOKMARK 8"]
    );
    assert_eq!(
        watch_from(&api, "7", 2).await,
        ["DELETED cm-2", "BOOKMARK 8"]
    );
    assert_eq!(watch_from(&api, "8", 1).await, ["BOOKMARK 8"]);
}

#[tokio::test]
async fn streaming_lists_are_refused_with_a_status() {
    let (_server, api) = api().await;
    let params = WatchParams::streaming_lists();
    let refused = match api.watch(&params, "").await {
        Err(e) => e,
        Ok(stream) => match stream.boxed().next().await {
            Some(Err(e)) => e,
            other => panic!("not refused: {other:?}"),
        },
    };
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 422),
        "{refused:?}"
    );
}
