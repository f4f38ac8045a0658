//! Syncing, resuming and relisting: the requests client-go 1.36 makes.

use super::*;

#[tokio::test]
async fn syncs_with_a_streaming_list_by_default() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..30).map(|i| format!("cm-{i}")));
    let h = Harness::start(server, fast()).await;
    h.converge().await;
    assert!(
        h.requests(Verb::List).is_empty(),
        "no LIST when streaming lists work"
    );
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches[0].param("sendInitialEvents"), Some("true"));
    assert_eq!(
        watches[0].param("resourceVersionMatch"),
        Some("NotOlderThan")
    );
    // The same watch carries on after the initial state.
    seed(&h.server, ["late".to_owned()]);
    h.converge().await;
    assert_eq!(h.requests(Verb::Watch).len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn falls_back_to_lists_once_when_the_server_lacks_streaming_lists() {
    let server = server(ServerConfig::default().streaming_lists(false)).await;
    seed(&server, (0..10).map(|i| format!("cm-{i}")));
    let h = Harness::start(server, fast()).await;
    h.converge().await;
    let lists = h.requests(Verb::List);
    assert_eq!(lists.len(), 1);
    assert_eq!(
        (lists[0].param("resourceVersion"), lists[0].param("limit")),
        (Some("0"), None)
    );
    assert!(
        h.errors.lock().iter().any(|e| e.contains("streaming list")),
        "{:?}",
        h.errors.lock()
    );
    // A later resync (after a restart) lists again; it does not retry streaming.
    h.server.restart();
    seed(&h.server, ["after".to_owned()]);
    h.converge().await;
    let streaming = h
        .requests(Verb::Watch)
        .iter()
        .filter(|w| w.param("sendInitialEvents").is_some())
        .count();
    assert_eq!(streaming, 1, "one attempt, then LIST for good");
    h.stop().await;
}

#[tokio::test]
async fn lists_at_zero_then_watches_with_bookmarks_and_a_spread_timeout() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..5).map(|i| format!("cm-{i}")));
    let h = Harness::start(server, fast().streaming_lists(false)).await;
    h.converge().await;
    h.watching().await; // converged by the LIST; the watch follows it
    let list = &h.requests(Verb::List)[0];
    assert_eq!(list.param("resourceVersion"), Some("0"));
    let watch = &h.requests(Verb::Watch)[0];
    assert_eq!(watch.param("allowWatchBookmarks"), Some("true"));
    let timeout: u64 = watch.param("timeoutSeconds").unwrap().parse().unwrap();
    assert!((300..=600).contains(&timeout), "{timeout}");
    assert_eq!(
        watch.param("resourceVersion").map(str::to_owned),
        Some(h.server.resource_version().to_string())
    );
    h.stop().await;
}

#[tokio::test]
async fn a_dropped_watch_resumes_from_the_last_version_without_a_list() {
    let server = server(ServerConfig::default()).await;
    let h = Harness::start(server, fast().streaming_lists(false)).await;
    h.converge().await;
    h.server.inject(Fault::DropWatch { after_events: 1 });
    // The current watch is cut when it was opened... so start a fresh one: restart-free way
    // is to let the next watch carry the fault; trigger it by ending the current watch.
    h.server.inject(Fault::DropWatch { after_events: 1 });
    seed(&h.server, (0..3).map(|i| format!("a-{i}")));
    h.converge().await;
    assert_eq!(
        h.requests(Verb::List).len(),
        1,
        "a resumed watch needs no LIST"
    );
    h.stop().await;
}

#[tokio::test]
async fn after_a_server_restart_the_relist_is_at_the_last_synced_version() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..5).map(|i| format!("cm-{i}")));
    let h = Harness::start(server, fast().streaming_lists(false)).await;
    h.converge().await;
    let synced = h.server.resource_version().to_string();
    // The resumed watch is answered only after the writes and the compaction below, so it
    // asks for a version the restarted server no longer has: 410.
    h.server.inject(Fault::Delay {
        verb: Verb::Watch,
        delay: Duration::from_millis(300),
        times: 1,
    });
    h.server.restart(); // cuts the watch and forgets the history
    seed(&h.server, ["after-restart".to_owned()]);
    h.server.compact();
    h.converge().await;
    let lists = h.requests(Verb::List);
    assert_eq!(lists.len(), 2, "{lists:?}");
    assert_eq!(
        lists[1].param("resourceVersion"),
        Some(synced.as_str()),
        "not \"\": no stampede on etcd"
    );
    assert_eq!(
        lists[1].param("limit"),
        None,
        "a relist at a version is served whole from the cache"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_410_on_list_falls_back_to_a_consistent_paged_list() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..25).map(|i| format!("cm-{i:02}")));
    server.inject(Fault::Status {
        verb: Verb::List,
        code: 410,
        times: 1,
        retry_after_seconds: None,
    });
    let h = Harness::start(server, fast().streaming_lists(false).page_size(10)).await;
    h.converge().await;
    let lists = h.requests(Verb::List);
    assert_eq!(
        (lists[0].param("resourceVersion"), lists[0].status),
        (Some("0"), 410)
    );
    assert_eq!(lists[1].param("resourceVersion"), None, "consistent read");
    assert_eq!(lists[1].param("limit"), Some("10"));
    assert_eq!(lists.len(), 4, "three pages of 10: {lists:?}");
    assert!(lists[2].param("continue").is_some());
    h.stop().await;
}
