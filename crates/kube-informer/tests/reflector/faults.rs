//! Faults: throttling, expired continue tokens, silent and malformed watches, compaction, and 200 seeds of random faults.

use super::*;

#[tokio::test]
async fn throttling_and_server_errors_are_retried_until_synced() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..5).map(|i| format!("cm-{i}")));
    server.inject(Fault::Status {
        verb: Verb::List,
        code: 429,
        times: 1,
        retry_after_seconds: Some(1),
    });
    server.inject(Fault::Status {
        verb: Verb::List,
        code: 500,
        times: 2,
        retry_after_seconds: None,
    });
    server.inject(Fault::Status {
        verb: Verb::List,
        code: 503,
        times: 2,
        retry_after_seconds: None,
    });
    server.inject(Fault::Status {
        verb: Verb::Watch,
        code: 500,
        times: 2,
        retry_after_seconds: None,
    });
    let h = Harness::start(server, fast().streaming_lists(false)).await;
    h.converge().await;
    seed(&h.server, ["live".to_owned()]);
    h.converge().await;
    // Every answer reaches the reflector, 429 and 503 included (kube's client would retry
    // those itself, out of sight): one failure heard per fault served.
    let counts = h.server.fault_counts();
    assert_eq!(
        (
            counts["status:429"],
            counts["status:500"],
            counts["status:503"]
        ),
        (1, 4, 2),
        "{counts:?}"
    );
    let heard = h
        .errors
        .lock()
        .iter()
        .filter(|e| ["429 ", "500 ", "503 "].iter().any(|code| e.contains(code)))
        .count();
    assert_eq!(heard, 7, "{:?}", h.errors.lock());
    h.stop().await;
}

/// A source that compacts the server right before the second page is asked for, so that
/// continue token has expired.
struct CompactBeforeSecondPage {
    api: Api<ConfigMap>,
    server: Arc<FakeApiServer>,
    lists: Mutex<usize>,
}

impl ListerWatcher<ConfigMap> for CompactBeforeSecondPage {
    async fn list(
        &self,
        params: &kube::api::ListParams,
    ) -> Result<kube::api::ObjectList<ConfigMap>, kube::Error> {
        if params.continue_token.is_some() {
            let mut lists = self.lists.lock();
            *lists += 1;
            if *lists == 1 {
                self.server
                    .create(
                        &cms(),
                        Some("demo"),
                        json!({"metadata": {"name": "meanwhile"}}),
                    )
                    .unwrap();
                self.server.compact();
            }
        }
        self.api.list(params).await
    }

    async fn watch(
        &self,
        params: &kube::api::WatchParams,
        rv: &str,
    ) -> Result<kube_informer::list_watch::WatchStream<ConfigMap>, kube::Error> {
        ListerWatcher::watch(&self.api, params, rv).await
    }
}

#[tokio::test]
async fn an_expired_continue_token_falls_back_to_one_full_list() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..25).map(|i| format!("cm-{i:02}")));
    server.inject(Fault::Status {
        verb: Verb::List,
        code: 410,
        times: 1,
        retry_after_seconds: None,
    });
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let lw = CompactBeforeSecondPage {
        api,
        server: server.clone(),
        lists: Mutex::new(0),
    };
    let h = Harness::start_with(server, lw, fast().streaming_lists(false).page_size(10)).await;
    h.converge().await;
    let lists = h.requests(Verb::List);
    let expired = lists
        .iter()
        .position(|l| l.param("continue").is_some() && l.status == 410)
        .expect("the continue expired");
    let full = &lists[expired + 1];
    assert_eq!(
        (full.param("limit"), full.param("continue")),
        (None, None),
        "{lists:?}"
    );
    assert!(h.cached().contains_key("meanwhile"));
    h.stop().await;
}

#[tokio::test]
async fn a_silent_watch_is_dropped_after_the_idle_limit_and_resumed() {
    let server = server(ServerConfig::default().bookmark_interval(Duration::from_secs(3600))).await;
    server.inject(Fault::SilentWatch { after_events: 0 });
    let h = Harness::start(
        server,
        fast()
            .streaming_lists(false)
            .idle_timeout(Duration::from_millis(300)),
    )
    .await;
    h.watching().await; // listed (empty); the first watch is now silent
    seed(&h.server, (0..3).map(|i| format!("s-{i}")));
    h.converge().await;
    assert!(
        h.errors.lock().iter().any(|e| e.contains("silent")),
        "{:?}",
        h.errors.lock()
    );
    assert_eq!(h.requests(Verb::List).len(), 1, "resumed, not relisted");
    h.stop().await;
}

#[tokio::test]
async fn malformed_lines_and_unknown_events_are_reported_and_the_watch_resumed() {
    for fault in [
        Fault::MalformedWatchLine { after_events: 1 },
        Fault::UnknownWatchEvent { after_events: 1 },
    ] {
        let server = server(ServerConfig::default()).await;
        let h = Harness::start(server, fast().streaming_lists(false)).await;
        h.watching().await;
        h.server.inject(fault);
        h.server.restart(); // the next watch gets the fault
        seed(&h.server, (0..4).map(|i| format!("m-{i}")));
        h.converge().await;
        assert!(
            h.errors.lock().iter().any(|e| e.contains("watch")),
            "{:?}",
            h.errors.lock()
        );
        h.stop().await;
    }
}

#[tokio::test]
async fn compaction_while_disconnected_leads_to_a_relist() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..5).map(|i| format!("cm-{i}")));
    let h = Harness::start(server, fast().streaming_lists(false)).await;
    h.converge().await;
    h.server.inject(Fault::Status {
        verb: Verb::Watch,
        code: 503,
        times: 3,
        retry_after_seconds: None,
    });
    h.server.restart();
    h.server.delete(&cms(), Some("demo"), "cm-0").unwrap();
    seed(&h.server, ["new".to_owned()]);
    h.server.compact();
    h.converge().await;
    assert!(
        !h.cached().contains_key("cm-0"),
        "the delete missed while away is not lost"
    );
    h.stop().await;
}

/// Random writes and random faults, for 200 seeds: the cache always ends equal to the
/// server (same keys, same resourceVersions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_under_random_faults_for_200_seeds() {
    for seed_no in 0..200u64 {
        let server = server(
            ServerConfig::default()
                .seed(seed_no)
                .bookmark_interval(Duration::from_millis(50)),
        )
        .await;
        let mut rng = seed_no.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        seed(&server, (0..next(10)).map(|i| format!("pre-{i}")));
        let streaming = next(2) == 0;
        let options = fast()
            .streaming_lists(streaming)
            .idle_timeout(Duration::from_millis(200))
            .page_size(3)
            .seed(seed_no);
        let h = Harness::start(server, options).await;
        for step in 0..25 {
            match next(12) {
                0 => h.server.inject(Fault::DropWatch {
                    after_events: next(3) as usize,
                }),
                1 => h.server.inject(Fault::Status {
                    verb: if next(2) == 0 {
                        Verb::List
                    } else {
                        Verb::Watch
                    },
                    code: [410, 500, 503][next(3) as usize],
                    times: 1,
                    retry_after_seconds: None,
                }),
                2 => h.server.restart(),
                3 => h.server.compact(),
                4 => h.server.inject(Fault::MalformedWatchLine {
                    after_events: next(2) as usize,
                }),
                5 => h.server.set_streaming_lists(next(2) == 0),
                _ => {
                    let name = format!("o-{}", next(8));
                    let _ = match next(3) {
                        0 => h.server.delete(&cms(), Some("demo"), &name).map(|_| ()),
                        1 => h
                            .server
                            .patch(
                                &cms(),
                                Some("demo"),
                                &name,
                                json!({"data": {"step": step.to_string()}}),
                            )
                            .map(|_| ()),
                        _ => h
                            .server
                            .create(&cms(), Some("demo"), json!({"metadata": {"name": name}}))
                            .map(|_| ()),
                    };
                }
            }
            if next(3) == 0 {
                tokio::task::yield_now().await;
            }
        }
        // Then writes with no faults: these reach the cache through the watch alone (a
        // relist cannot paper over a lost event).
        h.converge().await;
        h.server
            .create(&cms(), Some("demo"), json!({"metadata": {"name": "tail"}}))
            .unwrap();
        h.server
            .patch(&cms(), Some("demo"), "tail", json!({"data": {"v": "2"}}))
            .unwrap();
        let victim = h.truth().into_keys().next().unwrap();
        h.server.delete(&cms(), Some("demo"), &victim).unwrap();
        h.converge().await;
        h.stop().await;
    }
}
