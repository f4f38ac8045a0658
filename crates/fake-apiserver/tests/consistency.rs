//! Consistency under concurrent writers: paged LISTs read one snapshot, watches see every
//! write exactly once, in revision order.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use fake_apiserver::{Gvr, ServerConfig};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/demo/configmaps";

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Writers create new objects, update and delete old ones while a client pages through the
/// collection: the pages together hold exactly the objects of the first page's revision,
/// each once, each at a version no newer than it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_reads_one_snapshot_while_writers_run() {
    let server =
        std::sync::Arc::new(server(ServerConfig::default().history_window(1_000_000)).await);
    let cms = Gvr::core("configmaps");
    server
        .seed(
            &cms,
            (0..1000).map(
                |i| json!({"metadata": {"name": format!("orig-{i:04}"), "namespace": "demo"}}),
            ),
        )
        .unwrap();
    let expected: BTreeSet<String> = (0..1000).map(|i| format!("orig-{i:04}")).collect();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let first_page_read = std::sync::Arc::new(tokio::sync::Notify::new());
    let first_write = std::sync::Arc::new(tokio::sync::Notify::new());
    let writer = {
        let (server, stop, cms) = (server.clone(), stop.clone(), cms.clone());
        let (first_page_read, first_write) = (first_page_read.clone(), first_write.clone());
        tokio::spawn(async move {
            // Write only once the snapshot is taken, so the snapshot is known: the seed.
            first_page_read.notified().await;
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                server
                    .create(
                        &cms,
                        Some("demo"),
                        json!({"metadata": {"name": format!("new-{i}")}}),
                    )
                    .unwrap();
                let victim = format!("orig-{:04}", (i * 7) % 1000);
                let _ = server.patch(
                    &cms,
                    Some("demo"),
                    &victim,
                    json!({"data": {"touched": i.to_string()}}),
                );
                if i % 3 == 0 {
                    let _ =
                        server.delete(&cms, Some("demo"), &format!("orig-{:04}", (i * 13) % 1000));
                }
                if i == 0 {
                    first_write.notify_one();
                }
                i += 1;
                tokio::task::yield_now().await;
            }
            i
        })
    };

    let mut seen: Vec<String> = Vec::new();
    let mut snapshot = None;
    let mut snapshot_pages = 0;
    let mut url = format!("{CMS}?limit=37");
    loop {
        let page = get(&server, &url).await.json();
        let page_rv: u64 = page["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            *snapshot.get_or_insert(page_rv),
            page_rv,
            "every page is at the first page's revision"
        );
        for item in page["items"].as_array().unwrap() {
            assert!(rv(item) <= page_rv, "an item newer than the snapshot");
            seen.push(item["metadata"]["name"].as_str().unwrap().to_owned());
        }
        if snapshot_pages == 0 {
            // The rest is read while the writer runs: it has written at least once, however
            // the two tasks are scheduled.
            first_page_read.notify_one();
            first_write.notified().await;
        }
        snapshot_pages += 1;
        if let Some(remaining) = page["metadata"]["remainingItemCount"].as_u64() {
            assert_eq!(
                remaining,
                1000 - seen.len() as u64,
                "remainingItemCount counts the snapshot"
            );
        }
        match page["metadata"]["continue"].as_str() {
            Some(token) => url = format!("{CMS}?limit=37&continue={token}"),
            None => break,
        }
        tokio::task::yield_now().await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = writer.await.unwrap();
    assert!(writes > 0, "the writer never ran during the list");
    let unique: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "an item appeared twice");
    let extra: Vec<_> = unique.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&unique).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "not the snapshot: extra {extra:?}, missing {missing:?}"
    );
}

/// Several writers at once; one watch from the start sees every write, once, with strictly
/// increasing resourceVersions, and each object's events in its own order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_every_concurrent_write_in_revision_order() {
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 150;
    let server = std::sync::Arc::new(server(ServerConfig::default()).await);
    let start = server.resource_version();
    let mut watch = Lines::open(
        &server,
        &format!("{CMS}?watch=1&resourceVersion={start}&timeoutSeconds=60"),
    )
    .await;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let server = server.clone();
            tokio::spawn(async move {
                let cms = Gvr::core("configmaps");
                let mut revisions = Vec::new();
                for i in 0..PER_WRITER {
                    let name = format!("w{w}-{}", i % 10);
                    let written = match server.get(&cms, Some("demo"), &name) {
                        Err(_) => server.create(&cms, Some("demo"), cm(&name)),
                        Ok(_) if i % 4 == 3 => server
                            .delete(&cms, Some("demo"), &name)
                            .map(|_| json!(null)),
                        Ok(_) => server.patch(
                            &cms,
                            Some("demo"),
                            &name,
                            json!({"data": {"i": i.to_string()}}),
                        ),
                    };
                    revisions.push(written.unwrap());
                    if i % 10 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                revisions
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let total = server.resource_version() - start;
    let events = watch.events(total as usize).await;
    let revisions: Vec<u64> = events.iter().map(|e| rv(&e["object"])).collect();
    assert!(
        revisions.windows(2).all(|w| w[0] < w[1]),
        "revisions must strictly increase"
    );
    assert_eq!(revisions.first(), Some(&(start + 1)));
    assert_eq!(
        revisions.last(),
        Some(&server.resource_version()),
        "every write was seen"
    );
    // Per object, the event types follow a legal life cycle.
    let mut alive: BTreeMap<String, bool> = BTreeMap::new();
    for event in &events {
        let name = event["object"]["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        let was = alive.get(&name).copied().unwrap_or(false);
        match event["type"].as_str().unwrap() {
            "ADDED" => assert!(!was, "{name} added twice"),
            "MODIFIED" | "DELETED" => assert!(was, "{name} changed before it existed"),
            other => panic!("unexpected {other}"),
        }
        alive.insert(name, event["type"] != "DELETED");
    }
}

/// With a label selector, an object that starts matching arrives as ADDED and one that stops
/// matching as DELETED, as the real server turns them.
#[tokio::test]
async fn selector_transitions_become_added_and_deleted() {
    let server = server(ServerConfig::default()).await;
    let cms = Gvr::core("configmaps");
    let start = server.resource_version();
    let mut watch = Lines::open(
        &server,
        &format!("{CMS}?watch=1&resourceVersion={start}&labelSelector=tier%3Dfront"),
    )
    .await;
    server
        .create(
            &cms,
            Some("demo"),
            json!({"metadata": {"name": "a", "labels": {"tier": "back"}}}),
        )
        .unwrap();
    server
        .patch(
            &cms,
            Some("demo"),
            "a",
            json!({"metadata": {"labels": {"tier": "front"}}}),
        )
        .unwrap();
    server
        .patch(&cms, Some("demo"), "a", json!({"data": {"x": "1"}}))
        .unwrap();
    server
        .patch(
            &cms,
            Some("demo"),
            "a",
            json!({"metadata": {"labels": {"tier": "back"}}}),
        )
        .unwrap();
    server.delete(&cms, Some("demo"), "a").unwrap();
    server
        .create(
            &cms,
            Some("demo"),
            json!({"metadata": {"name": "b", "labels": {"tier": "front"}}}),
        )
        .unwrap();
    let types: Vec<String> = watch
        .events(4)
        .await
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(types, ["ADDED a", "MODIFIED a", "DELETED a", "ADDED b"]);
}

/// Field selectors on pods (what kubelets use) and label sets in LISTs.
#[tokio::test]
async fn list_selectors_filter_and_report_no_remaining_count() {
    let server = server(ServerConfig::default()).await;
    let pods = Gvr::core("pods");
    for (name, node, app) in [("p1", "n1", "web"), ("p2", "n2", "web"), ("p3", "n1", "db")] {
        server.create(&pods, Some("demo"), json!({"metadata": {"name": name, "labels": {"app": app}}, "spec": {"nodeName": node}})).unwrap();
    }
    let names = |v: Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let base = "/api/v1/namespaces/demo/pods";
    assert_eq!(
        names(
            get(&server, &format!("{base}?fieldSelector=spec.nodeName%3Dn1"))
                .await
                .json()
        ),
        ["p1", "p3"]
    );
    assert_eq!(
        names(
            get(
                &server,
                &format!("{base}?labelSelector=app%20in%20(web)%2Capp!%3Ddb")
            )
            .await
            .json()
        ),
        ["p1", "p2"]
    );
    assert_eq!(
        names(
            get(
                &server,
                &format!("{base}?fieldSelector=metadata.name!%3Dp1&labelSelector=app")
            )
            .await
            .json()
        ),
        ["p2", "p3"]
    );
    let page = get(&server, &format!("{base}?labelSelector=app%3Dweb&limit=1"))
        .await
        .json();
    assert!(page["metadata"]["continue"].is_string());
    assert!(
        page["metadata"].get("remainingItemCount").is_none(),
        "omitted with a selector, as the real server does"
    );
    let bad = get(&server, &format!("{base}?fieldSelector=spec.foo%3Dx")).await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.json()["message"]
            .as_str()
            .unwrap()
            .contains("field label not supported")
    );
    // All namespaces, cluster-wide.
    assert_eq!(names(get(&server, "/api/v1/pods").await.json()).len(), 3);
}
