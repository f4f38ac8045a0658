//! Every fault type, over real HTTP: it happens, it is counted, and it is used up.

use crate::common;

use std::time::Duration;

use common::*;
use fake_apiserver::{Fault, Gate, Gvr, ServerConfig, Verb};
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/demo/configmaps";

fn cms() -> Gvr {
    Gvr::core("configmaps")
}

#[tokio::test]
async fn status_faults_answer_the_next_requests_then_stop() {
    let server = server(ServerConfig::default()).await;
    server.inject(Fault::Status {
        verb: Verb::List,
        code: 429,
        times: 2,
        retry_after_seconds: Some(3),
    });
    for _ in 0..2 {
        let resp = get(&server, CMS).await;
        assert_eq!(resp.status, 429);
        // As the real server's throttling filters answer: plain text, not a Status.
        assert_eq!(resp.headers["retry-after"], "3");
        assert_eq!(resp.headers["content-type"], "text/plain; charset=utf-8");
        assert_eq!(
            &resp.body[..],
            b"Too many requests, please try again later.\n"
        );
    }
    assert_eq!(get(&server, CMS).await.status, 200, "used up after 2");
    for code in [500, 503, 410] {
        server.inject(Fault::Status {
            verb: Verb::List,
            code,
            times: 1,
            retry_after_seconds: None,
        });
        assert_eq!(get(&server, CMS).await.status, code);
    }
    // Only the named verb is affected.
    server.inject(Fault::Status {
        verb: Verb::Create,
        code: 500,
        times: 1,
        retry_after_seconds: None,
    });
    assert_eq!(get(&server, CMS).await.status, 200);
    let counts = server.fault_counts();
    assert_eq!(
        (
            counts["status:429"],
            counts["status:500"],
            counts["status:503"],
            counts["status:410"]
        ),
        (2, 1, 1, 1)
    );
    // A 410 on a watch arrives as an ERROR event.
    server.inject(Fault::Status {
        verb: Verb::Watch,
        code: 410,
        times: 1,
        retry_after_seconds: None,
    });
    let mut watch = Lines::open(&server, &format!("{CMS}?watch=1")).await;
    assert_eq!(watch.status, 200);
    let event = watch.next().await.unwrap();
    assert_eq!(
        (event["type"].as_str(), event["object"]["code"].as_u64()),
        (Some("ERROR"), Some(410))
    );
}

#[tokio::test]
async fn random_faults_are_seeded() {
    async fn codes(seed: u64) -> Vec<u16> {
        let server = server(ServerConfig::default().seed(seed)).await;
        server.inject(Fault::Random {
            verb: Verb::List,
            probability: 0.5,
            codes: vec![500, 503],
            times: 100,
        });
        let mut out = Vec::new();
        for _ in 0..40 {
            out.push(get(&server, CMS).await.status);
        }
        out
    }
    let (a, b) = (codes(42).await, codes(42).await);
    assert_eq!(a, b, "the same seed fails the same requests");
    assert!(a.contains(&200) && a.iter().any(|c| *c >= 500), "{a:?}");
    assert_ne!(a, codes(7).await, "another seed, another sequence");
}

#[tokio::test]
async fn delays_hold_the_answer_and_are_counted() {
    let server = server(ServerConfig::default()).await;
    server.inject(Fault::Delay {
        verb: Verb::Get,
        delay: Duration::from_millis(20),
        times: 1,
    });
    server.create(&cms(), Some("demo"), cm("a")).unwrap();
    assert_eq!(get(&server, &format!("{CMS}/a")).await.status, 200);
    assert_eq!(server.fault_counts()["delay"], 1);
}

/// A held request is answered once its gate opens, and not before: with what was written
/// while it waited. The next request is not held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_request_waits_for_its_gate_and_sees_what_was_written_meanwhile() {
    let server = std::sync::Arc::new(server(ServerConfig::default()).await);
    let gate = Gate::new();
    server.inject(Fault::Hold {
        verb: Verb::List,
        gate: gate.clone(),
        times: 1,
    });
    let list = tokio::spawn({
        let server = server.clone();
        async move { get(&server, CMS).await }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while server.fault_counts().get("hold") != Some(&1) {
        assert!(tokio::time::Instant::now() < deadline, "never held");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.create(&cms(), Some("demo"), cm("late")).unwrap();
    assert!(!list.is_finished(), "answered before its gate opened");
    gate.open();
    let held = list.await.unwrap();
    assert_eq!(held.status, 200);
    assert_eq!(held.json()["items"][0]["metadata"]["name"], "late");
    assert_eq!(get(&server, CMS).await.status, 200, "used up after 1");
    assert_eq!(server.fault_counts()["hold"], 1);
}

/// `clear_faults` ends a fault injected for longer than a test needs it; what fired stays
/// counted.
#[tokio::test]
async fn cleared_faults_stop_at_once_and_stay_counted() {
    let server = server(ServerConfig::default()).await;
    server.inject(Fault::Status {
        verb: Verb::List,
        code: 500,
        times: 1_000_000,
        retry_after_seconds: None,
    });
    assert_eq!(get(&server, CMS).await.status, 500);
    server.clear_faults();
    assert_eq!(get(&server, CMS).await.status, 200);
    assert_eq!(server.fault_counts()["status:500"], 1);
}

#[tokio::test]
async fn a_cut_list_breaks_the_body_mid_way() {
    let server = server(ServerConfig::default()).await;
    server
        .seed(
            &cms(),
            (0..20).map(|i| json!({"metadata": {"name": format!("c{i}"), "namespace": "demo"}})),
        )
        .unwrap();
    server.inject(Fault::CutList { times: 1 });
    let mut lines = Lines::open(&server, CMS).await;
    assert_eq!(lines.status, 200);
    let mut read = Ok(Some(String::new()));
    while let Ok(Some(_)) = read {
        read = lines.next_raw().await;
    }
    assert!(
        read.is_err(),
        "the body must end in a broken connection, not cleanly"
    );
    assert_eq!(
        get(&server, CMS).await.json()["items"]
            .as_array()
            .unwrap()
            .len(),
        20
    );
    assert_eq!(server.fault_counts()["cut_list"], 1);
}

#[tokio::test]
async fn a_dropped_watch_breaks_after_k_events() {
    let server = server(ServerConfig::default()).await;
    let rv = server.resource_version();
    server.inject(Fault::DropWatch { after_events: 2 });
    let mut watch = Lines::open(&server, &format!("{CMS}?watch=1&resourceVersion={rv}")).await;
    for i in 0..4 {
        server
            .create(&cms(), Some("demo"), cm(&format!("d{i}")))
            .unwrap();
    }
    assert!(watch.next_raw().await.unwrap().is_some());
    assert!(watch.next_raw().await.unwrap().is_some());
    assert!(
        watch.next_raw().await.is_err(),
        "the third read hits the broken connection"
    );
    // The next watch is healthy again.
    let mut again = Lines::open(&server, &format!("{CMS}?watch=1&resourceVersion={rv}")).await;
    assert_eq!(again.events(4).await.len(), 4);
}

/// A slow watch holds each event back, and loses none: every write arrives, in order,
/// on a paused clock only once its lag has passed (here the server's in-memory client, so
/// no real I/O runs beside the paused clock).
#[tokio::test(start_paused = true)]
async fn a_slow_watch_holds_each_event_back_and_delivers_them_all_in_order() {
    let server = server(ServerConfig::default()).await;
    let client = server.memory_client();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client, "demo");
    server.inject(Fault::SlowWatch {
        lag: Duration::from_secs(1),
    });
    let params = kube::api::WatchParams::default().disable_bookmarks();
    let rv = server.resource_version().to_string();
    let mut events = std::pin::pin!(api.watch(&params, &rv).await.unwrap());
    let start = tokio::time::Instant::now();
    for i in 0..3 {
        server
            .create(&cms(), Some("demo"), cm(&format!("s{i}")))
            .unwrap();
    }
    for i in 0..3 {
        let event = futures_util::StreamExt::next(&mut events)
            .await
            .unwrap()
            .unwrap();
        let kube::api::WatchEvent::Added(cm) = event else {
            panic!("{event:?}");
        };
        assert_eq!(cm.metadata.name.as_deref(), Some(format!("s{i}").as_str()));
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(i + 1),
            "one lag each, in turn"
        );
    }
    assert_eq!(server.fault_counts()["slow_watch"], 1);
}

/// After k events a silent watch sends nothing, although writes go on; a restart then cuts
/// it. Were it not silent, the writes' events would arrive before the cut (they are queued
/// ahead of it), so no sleep is needed to tell.
#[tokio::test]
async fn a_silent_watch_sends_nothing_more_yet_stays_open() {
    let server = server(ServerConfig::default().bookmark_interval(Duration::from_millis(10))).await;
    let rv = server.resource_version();
    server.inject(Fault::SilentWatch { after_events: 1 });
    let url = format!("{CMS}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true");
    let mut watch = Lines::open(&server, &url).await;
    server.create(&cms(), Some("demo"), cm("first")).unwrap();
    let first = watch.next().await.unwrap();
    assert_eq!(first["object"]["metadata"]["name"], "first");
    for i in 0..5 {
        server
            .create(&cms(), Some("demo"), cm(&format!("unseen-{i}")))
            .unwrap();
    }
    assert_eq!(
        server.watch_count(&cms()),
        1,
        "the connection is still open"
    );
    server.restart();
    assert!(
        watch.next_raw().await.is_err(),
        "nothing but the cut after going silent"
    );
}

#[tokio::test]
async fn malformed_lines_and_unknown_event_types_are_sent_then_the_stream_goes_on() {
    let server = server(ServerConfig::default()).await;
    let rv = server.resource_version();
    server.inject(Fault::MalformedWatchLine { after_events: 1 });
    server.inject(Fault::UnknownWatchEvent { after_events: 2 });
    let mut watch = Lines::open(&server, &format!("{CMS}?watch=1&resourceVersion={rv}")).await;
    for i in 0..3 {
        server
            .create(&cms(), Some("demo"), cm(&format!("m{i}")))
            .unwrap();
    }
    let mut lines = Vec::new();
    for _ in 0..5 {
        lines.push(watch.next_raw().await.unwrap().unwrap());
    }
    let parsed: Vec<Option<serde_json::Value>> =
        lines.iter().map(|l| serde_json::from_str(l).ok()).collect();
    assert!(parsed[0].is_some());
    assert!(parsed[1].is_none(), "line 2 must not be JSON: {}", lines[1]);
    assert_eq!(parsed[2].as_ref().unwrap()["type"], "ADDED");
    assert_eq!(parsed[3].as_ref().unwrap()["type"], "EXPLODED");
    assert_eq!(
        parsed[4].as_ref().unwrap()["object"]["metadata"]["name"],
        "m2"
    );
}

#[tokio::test]
async fn compaction_and_restart_make_old_versions_410() {
    let server = server(ServerConfig::default()).await;
    server.create(&cms(), Some("demo"), cm("a")).unwrap();
    let old = server.resource_version();
    server.create(&cms(), Some("demo"), cm("b")).unwrap();
    // Before compaction both work.
    assert_eq!(
        get(
            &server,
            &format!("{CMS}?resourceVersion={old}&resourceVersionMatch=Exact")
        )
        .await
        .json()["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    server.compact();
    assert_eq!(
        get(
            &server,
            &format!("{CMS}?resourceVersion={old}&resourceVersionMatch=Exact")
        )
        .await
        .status,
        410
    );
    let mut watch = Lines::open(&server, &format!("{CMS}?watch=1&resourceVersion={old}")).await;
    assert_eq!(watch.next().await.unwrap()["object"]["code"], 410);
    // A watch from the current version works, and a restart cuts it and forgets history.
    let now = server.resource_version();
    let mut live = Lines::open(&server, &format!("{CMS}?watch=1&resourceVersion={now}")).await;
    server.create(&cms(), Some("demo"), cm("c")).unwrap();
    assert_eq!(
        live.next().await.unwrap()["object"]["metadata"]["name"],
        "c"
    );
    server.create(&cms(), Some("demo"), cm("d")).unwrap();
    server.restart();
    assert_eq!(
        live.next().await.unwrap()["object"]["metadata"]["name"],
        "d",
        "queued events still arrive"
    );
    assert!(live.next_raw().await.is_err(), "then the connection is cut");
    let mut resumed = Lines::open(&server, &format!("{CMS}?watch=1&resourceVersion={now}")).await;
    assert_eq!(
        resumed.next().await.unwrap()["object"]["code"],
        410,
        "history is gone after a restart"
    );
    // Objects are kept.
    assert_eq!(
        get(&server, CMS).await.json()["items"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    let counts = server.fault_counts();
    assert_eq!((counts["compaction"], counts["restart"]), (1, 1));
}

#[tokio::test]
async fn streaming_lists_can_be_switched_off_at_run_time() {
    let server = server(ServerConfig::default()).await;
    let url = format!(
        "{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
    );
    server.set_streaming_lists(false);
    let mut refused = Lines::open(&server, &url).await;
    assert_eq!(refused.next().await.unwrap()["object"]["code"], 500);
    server.set_streaming_lists(true);
    let mut accepted = Lines::open(&server, &url).await;
    assert_eq!(accepted.next().await.unwrap()["type"], "BOOKMARK");
}

#[tokio::test]
async fn the_request_log_records_what_clients_asked() {
    let server = server(ServerConfig::default()).await;
    get(&server, &format!("{CMS}?limit=500&resourceVersion=0")).await;
    get(&server, &format!("{CMS}/missing")).await;
    let log = server.requests();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].verb, Some(Verb::List));
    assert_eq!(log[0].param("resourceVersion"), Some("0"));
    assert_eq!(log[0].param("limit"), Some("500"));
    assert_eq!(log[0].resource.as_deref(), Some("configmaps"));
    assert!(log[0].bytes > 0);
    assert_eq!((log[1].verb, log[1].status), (Some(Verb::Get), 404));
    server.clear_requests();
    assert!(server.requests().is_empty());
}
