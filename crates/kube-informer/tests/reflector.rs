//! The reflector against fake-apiserver over loopback HTTP: each behaviour with its fault,
//! the requests the server saw, and the final cache.

use std::{collections::BTreeMap, convert::Infallible, sync::Arc, time::Duration};

use fake_apiserver::{FakeApiServer, Fault, Gvr, RequestRecord, ServerConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_informer::{
    RealFifo, Store,
    fifo::{DeltaQueue, ProcessError},
    informer::handle_deltas,
    list_watch::{ListPage, ListerWatcher},
    reflector::{Reflector, ReflectorError, ReflectorOptions},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn cms() -> Gvr {
    Gvr::core("configmaps")
}

/// A server, a reflector on `demo` config maps feeding a RealFifo, and a loop applying the
/// FIFO to a store (what the informer will do).
struct Harness {
    server: Arc<FakeApiServer>,
    store: Store<ConfigMap>,
    errors: Arc<Mutex<Vec<String>>>,
    cancel: CancellationToken,
    reflector: tokio::task::JoinHandle<()>,
}

/// Fast retries for tests; everything else as in production.
fn fast() -> ReflectorOptions {
    ReflectorOptions::default().backoff(
        Duration::from_millis(10),
        Duration::from_millis(50),
        Duration::from_secs(120),
    )
}

async fn server(config: ServerConfig) -> Arc<FakeApiServer> {
    let server = FakeApiServer::start(config).await.unwrap();
    server
        .create(
            &Gvr::core("namespaces"),
            None,
            json!({"metadata": {"name": "demo"}}),
        )
        .unwrap();
    Arc::new(server)
}

fn seed(server: &FakeApiServer, names: impl IntoIterator<Item = String>) {
    for name in names {
        server
            .create(
                &cms(),
                Some("demo"),
                json!({"metadata": {"name": name}, "data": {"v": "1"}}),
            )
            .unwrap();
    }
}

impl Harness {
    async fn start(server: Arc<FakeApiServer>, options: ReflectorOptions) -> Self {
        let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
        Self::start_with(server, api, options).await
    }

    async fn start_with(
        server: Arc<FakeApiServer>,
        lw: impl ListerWatcher<ConfigMap>,
        options: ReflectorOptions,
    ) -> Self {
        let store = Store::default();
        let fifo = Arc::new(RealFifo::new(Arc::new(store.clone())));
        let reflector = Arc::new(Reflector::new(lw, fifo.clone(), options));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let seen = errors.clone();
        reflector.set_error_handler(move |e: &ReflectorError| seen.lock().push(e.to_string()));
        let cancel = CancellationToken::new();
        let running = {
            let (reflector, cancel) = (reflector.clone(), cancel.clone());
            tokio::spawn(async move { reflector.run(cancel).await })
        };
        tokio::spawn({
            let (store, fifo) = (store.clone(), fifo.clone());
            async move {
                loop {
                    let popped = fifo
                        .pop(|deltas, initial| {
                            handle_deltas(&store, deltas, initial, &mut Vec::new());
                            Ok::<(), ProcessError<Infallible>>(())
                        })
                        .await;
                    if popped.is_err() {
                        return;
                    }
                }
            }
        });
        Self {
            server,
            store,
            errors,
            cancel,
            reflector: running,
        }
    }

    /// name -> resourceVersion, as the server has them.
    fn truth(&self) -> BTreeMap<String, String> {
        let objects = self.server.list(&cms()).unwrap();
        objects
            .iter()
            .map(|o| {
                (
                    o["metadata"]["name"].as_str().unwrap().to_owned(),
                    o["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                )
            })
            .collect()
    }

    fn cached(&self) -> BTreeMap<String, String> {
        let objects = self.store.list();
        objects
            .iter()
            .map(|o| {
                (
                    o.metadata.name.clone().unwrap(),
                    o.metadata.resource_version.clone().unwrap(),
                )
            })
            .collect()
    }

    /// Waits until the cache equals the server's state (the bound only guards a hang).
    async fn converge(&self) {
        for _ in 0..3000 {
            if self.cached() == self.truth() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!(
            "never converged:\ncache  {:?}\nserver {:?}\nerrors {:?}",
            self.cached(),
            self.truth(),
            self.errors.lock()
        );
    }

    /// Waits until the reflector has a watch open (the bound only guards a hang).
    async fn watching(&self) {
        for _ in 0..3000 {
            if self.server.watch_count(&cms()) > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!(
            "the reflector never started watching: {:?}",
            self.errors.lock()
        );
    }

    fn requests(&self, verb: Verb) -> Vec<RequestRecord> {
        let all = self.server.requests();
        all.into_iter()
            .filter(|r| r.verb == Some(verb) && r.resource.as_deref() == Some("configmaps"))
            .collect()
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.reflector)
            .await
            .expect("run returns when cancelled")
            .unwrap();
    }
}

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
    // kube's client retries 429 and 503 itself; the reflector backs off from the rest.
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
    assert!(
        h.errors
            .lock()
            .iter()
            .filter(|e| e.contains("injected fault"))
            .count()
            >= 4
    );
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

/// A source that always fails with `code`, on a paused clock.
struct AlwaysFailing {
    calls: Arc<Mutex<Vec<tokio::time::Instant>>>,
    code: u16,
    retry_after: u32,
}

impl AlwaysFailing {
    fn error(&self) -> kube::Error {
        let mut status =
            kube::core::Status::failure("injected", "InternalError").with_code(self.code);
        if self.retry_after > 0 {
            let details = serde_json::json!({"name": "", "group": "", "kind": "", "uid": "", "causes": [], "retryAfterSeconds": self.retry_after});
            status.details = Some(serde_json::from_value(details).unwrap());
        }
        kube::Error::Api(Box::new(status))
    }
}

impl ListerWatcher<ConfigMap> for AlwaysFailing {
    async fn list(
        &self,
        _: &kube::api::ListParams,
    ) -> Result<kube::api::ObjectList<ConfigMap>, kube::Error> {
        self.calls.lock().push(tokio::time::Instant::now());
        Err(self.error())
    }

    async fn watch(
        &self,
        _: &kube::api::WatchParams,
        _: &str,
    ) -> Result<kube_informer::list_watch::WatchStream<ConfigMap>, kube::Error> {
        Err(self.error())
    }
}

/// Runs a reflector on `source` for `secs` of paused time; returns the gaps between calls.
async fn gaps_between_calls(code: u16, retry_after: u32, secs: u64) -> Vec<Duration> {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let store: Store<ConfigMap> = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store)));
    let source = AlwaysFailing {
        calls: calls.clone(),
        code,
        retry_after,
    };
    let reflector = Reflector::new(
        source,
        fifo,
        ReflectorOptions::default().streaming_lists(false),
    );
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_secs(secs)).await;
    cancel.cancel();
    run.await.unwrap();
    let calls = calls.lock();
    calls.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn throttling_waits_as_long_as_the_server_says() {
    let gaps = gaps_between_calls(429, 7, 60).await;
    assert!(gaps.len() >= 4, "{gaps:?}");
    let (asked, most) = (Duration::from_secs(7), Duration::from_millis(8400));
    assert!(
        gaps[..3].iter().all(|g| *g >= asked && *g <= most),
        "Retry-After is 7 s, jittered by up to a fifth: {gaps:?}"
    );
    assert!(
        gaps.iter()
            .all(|g| *g >= asked && *g <= Duration::from_secs(30)),
        "never sooner than asked; growing with the backoff while throttling goes on: {gaps:?}"
    );
    assert!(
        gaps.windows(2).any(|w| w[0] != w[1]),
        "jittered, not a fixed beat every client shares: {gaps:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_persistently_failing_server_is_retried_on_the_backoff_schedule() {
    let gaps = gaps_between_calls(500, 0, 600).await;
    let calls = &gaps;
    assert!(
        gaps.iter().all(|g| *g >= Duration::from_millis(800)),
        "a retry came sooner than 800 ms: {gaps:?}"
    );
    assert!(
        gaps.iter().all(|g| *g <= Duration::from_secs(30)),
        "a retry waited past the 30 s cap: {gaps:?}"
    );
    // In 10 minutes of failures: far fewer than a hot loop, more than one per cap.
    assert!(
        (20..=600).contains(&calls.len()),
        "{} retries in 10 min",
        calls.len()
    );
    let late: Vec<_> = gaps.iter().skip(8).collect();
    let mean = late.iter().map(|g| g.as_secs_f64()).sum::<f64>() / late.len() as f64;
    assert!(
        mean > 8.0,
        "after 8 failures the delays approach the cap, mean {mean:.1} s"
    );
}

#[cfg(feature = "metrics")]
#[tokio::test]
async fn metrics_count_lists_watches_and_restarts() {
    use kube_informer::reflector::ReflectorMetrics;
    use prometheus_client::{encoding::text::encode, registry::Registry};
    let mut registry = Registry::default();
    let metrics = ReflectorMetrics::register(&mut registry);
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..7).map(|i| format!("cm-{i}")));
    let h = Harness::start(
        server,
        fast().streaming_lists(false).name("cms").metrics(&metrics),
    )
    .await;
    h.converge().await;
    h.watching().await;
    h.server.inject(Fault::Delay {
        verb: Verb::Watch,
        delay: Duration::from_millis(200),
        times: 1,
    });
    h.server.restart();
    seed(&h.server, ["x".to_owned()]);
    h.server.compact();
    h.converge().await;
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for expected in [
        r#"reflector_lists_total{name="cms"} 2"#,
        r#"reflector_list_items_count{name="cms"} 2"#,
        r#"reflector_watch_restarts_total{name="cms",reason="gone"} 1"#,
        &format!(
            r#"reflector_last_resource_version{{name="cms"}} {}"#,
            h.server.resource_version()
        ),
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(text.contains(r#"reflector_watches_total{name="cms"}"#));
    h.stop().await;
}

/// Runs a reflector over `lw` into a fresh store until it holds `n` objects, then stops it.
async fn sync_objects<K>(lw: impl ListerWatcher<K>, n: usize) -> Store<K>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
{
    let store: Store<K> = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store.clone())));
    let reflector = Arc::new(Reflector::new(lw, fifo.clone(), fast()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (reflector, cancel) = (reflector.clone(), cancel.clone());
        async move { reflector.run(cancel).await }
    });
    while store.len() < n {
        fifo.pop(|deltas, _| {
            store
                .insert(deltas.key().clone(), deltas.newest().object().clone())
                .unwrap();
            Ok::<(), ProcessError<Infallible>>(())
        })
        .await
        .unwrap();
    }
    cancel.cancel();
    run.await.unwrap();
    store
}

#[tokio::test]
async fn dynamic_objects_of_a_custom_resource_sync_too() {
    use fake_apiserver::ResourceType;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let widgets = Gvr::new("example.com", "v1", "widgets");
    let server = server(
        ServerConfig::default().resource(ResourceType::namespaced(widgets.clone(), "Widget")),
    )
    .await;
    for i in 0..5 {
        server
            .create(
                &widgets,
                Some("demo"),
                json!({"metadata": {"name": format!("w-{i}")}, "spec": {"size": i}}),
            )
            .unwrap();
    }
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(server.client().unwrap(), "demo", &resource);
    let store = sync_objects(api, 5).await;
    let w3 = store.get_by_key("demo/w-3").unwrap();
    assert_eq!(w3.data["spec"]["size"], 3);
}

/// A source whose LIST is empty and whose every watch ends at once, without events.
struct ClosesAtOnce {
    watches: Arc<Mutex<usize>>,
}

impl ListerWatcher<ConfigMap> for ClosesAtOnce {
    async fn list(
        &self,
        _: &kube::api::ListParams,
    ) -> Result<kube::api::ObjectList<ConfigMap>, kube::Error> {
        let list = json!({"metadata": {"resourceVersion": "7"}, "items": []});
        Ok(serde_json::from_value(list).unwrap())
    }

    async fn watch(
        &self,
        _: &kube::api::WatchParams,
        _: &str,
    ) -> Result<kube_informer::list_watch::WatchStream<ConfigMap>, kube::Error> {
        *self.watches.lock() += 1;
        Ok(Box::pin(futures_util::stream::empty()))
    }
}

#[tokio::test(start_paused = true)]
async fn a_watch_ending_at_once_without_events_is_reported_and_backed_off() {
    let watches = Arc::new(Mutex::new(0));
    let store: Store<ConfigMap> = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store)));
    let source = ClosesAtOnce {
        watches: watches.clone(),
    };
    let reflector = Reflector::new(
        source,
        fifo,
        ReflectorOptions::default().streaming_lists(false),
    );
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    reflector.set_error_handler(move |e: &ReflectorError| seen.lock().push(e.to_string()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    cancel.cancel();
    run.await.unwrap();
    let watches = *watches.lock();
    assert!(
        (2..=75).contains(&watches),
        "{watches} watches in 60 s: not a hot loop, still retrying"
    );
    assert!(
        errors
            .lock()
            .iter()
            .all(|e| e.contains("with 0 events; backing off")),
        "{:?}",
        errors.lock()
    );
    assert_eq!(errors.lock().len(), watches);
}

/// Records what reaches the sink.
#[derive(Default)]
struct Recording {
    resyncs: Mutex<usize>,
    replaced: Mutex<usize>,
}

impl kube_informer::fifo::DeltaSink<ConfigMap> for Recording {
    fn add(&self, _: Arc<ConfigMap>) -> Result<(), kube_informer::KeyError> {
        Ok(())
    }
    fn update(&self, _: Arc<ConfigMap>) -> Result<(), kube_informer::KeyError> {
        Ok(())
    }
    fn delete(&self, _: Arc<ConfigMap>) -> Result<(), kube_informer::KeyError> {
        Ok(())
    }
    fn replace(&self, list: Vec<Arc<ConfigMap>>, _: &str) -> Result<(), kube_informer::KeyError> {
        *self.replaced.lock() += list.len();
        Ok(())
    }
    fn resync(&self) {
        *self.resyncs.lock() += 1;
    }
}

#[tokio::test]
async fn the_resync_ticker_resyncs_only_when_due() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..3).map(|i| format!("cm-{i}")));
    let sink = Arc::new(Recording::default());
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let reflector = Reflector::new(
        api,
        sink.clone(),
        fast().resync_period(Duration::from_millis(20)),
    );
    let checks = Arc::new(Mutex::new(0usize));
    let counted = checks.clone();
    // Due on every other check.
    reflector.set_should_resync(move || {
        let mut n = counted.lock();
        *n += 1;
        *n % 2 == 0
    });
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    for _ in 0..2000 {
        if *checks.lock() >= 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cancel.cancel();
    run.await.unwrap();
    let (checks, resyncs) = (*checks.lock(), *sink.resyncs.lock());
    assert!(checks >= 6, "the ticker never ticked");
    assert_eq!(
        resyncs,
        checks / 2,
        "resync exactly when due: {resyncs} of {checks} checks"
    );
    assert_eq!(*sink.replaced.lock(), 3);
}

#[tokio::test]
async fn metadata_only_objects_sync() {
    use kube::core::PartialObjectMeta;
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..4).map(|i| format!("cm-{i}")));
    let api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(server.client().unwrap(), "demo");
    let store = sync_objects(api, 4).await;
    assert!(
        store
            .get_by_key("demo/cm-2")
            .unwrap()
            .metadata
            .uid
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_first_list_is_paged_with_pages_decoded_aside() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..45).map(|i| format!("cm-{i:02}")));
    let options = fast()
        .streaming_lists(false)
        .consistent_first_list(true)
        .page_size(10);
    let h = Harness::start(server, options).await;
    h.converge().await;
    let lists = h.requests(Verb::List);
    assert_eq!(lists.len(), 5, "five pages of at most 10: {lists:?}");
    assert_eq!(
        (lists[0].param("resourceVersion"), lists[0].param("limit")),
        (None, Some("10")),
        "a consistent first read"
    );
    assert!(lists[1..].iter().all(|l| l.param("continue").is_some()));
    assert!(h.errors.lock().is_empty(), "{:?}", h.errors.lock());
    h.stop().await;
}

/// Answers the first LIST with a page whose items do not decode.
struct UndecodableFirstPage {
    api: Api<ConfigMap>,
    pages: Mutex<usize>,
}

impl ListerWatcher<ConfigMap> for UndecodableFirstPage {
    async fn list(
        &self,
        params: &kube::api::ListParams,
    ) -> Result<kube::api::ObjectList<ConfigMap>, kube::Error> {
        self.api.list(params).await
    }

    async fn list_page(
        &self,
        params: &kube::api::ListParams,
    ) -> Result<ListPage<ConfigMap>, kube::Error> {
        let first = {
            let mut pages = self.pages.lock();
            *pages += 1;
            *pages == 1
        };
        if first {
            let body = r#"{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":5}}]}"#;
            return ListPage::from_body(body.to_owned());
        }
        ListerWatcher::list_page(&self.api, params).await
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
async fn a_page_that_does_not_decode_is_reported_and_the_list_retried() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..5).map(|i| format!("cm-{i}")));
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let lw = UndecodableFirstPage {
        api,
        pages: Mutex::new(0),
    };
    let h = Harness::start_with(server, lw, fast().streaming_lists(false)).await;
    h.converge().await;
    let errors = h.errors.lock().clone();
    assert!(
        errors.iter().any(|e| e.contains("invalid type")),
        "the decoding error is reported: {errors:?}"
    );
    h.stop().await;
}
