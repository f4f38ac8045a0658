//! Warm restarts through a factory with a cache directory, on an in-memory source: synced
//! only once caught up, snapshots written while running and at a graceful stop, a directory
//! that cannot be written leaving the informer unaffected, and restarts at random points of
//! a change stream (seeded) each ending with the cache equal to the source.

use crate::common;

use std::{collections::BTreeMap, path::Path, time::Duration};

use common::until;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::{
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
    informer::SharedIndexInformer,
    list_watch::{MemorySource, Selectors},
    reflector::ReflectorOptions,
    snapshot::CacheDir,
};
use tokio_util::sync::CancellationToken;

fn cm(name: &str, v: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some("demo".into());
    cm.data = Some([("v".to_owned(), v.to_owned())].into());
    cm
}

/// An informer of `source` with a cache in `dir`, run by the test (so it can be killed).
struct Running {
    informer: SharedIndexInformer<ConfigMap>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(source: &MemorySource<ConfigMap>, dir: &Path, every: Duration) -> Running {
        // No client is ever used: the spec's source serves the informer.
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .expect("a client");
        let fast = ReflectorOptions::default().backoff(
            Duration::from_millis(5),
            Duration::from_millis(20),
            Duration::from_secs(60),
        );
        let factory = SharedInformerFactory::new(client, FactoryOptions::default().reflector(fast));
        let cache = CacheDir {
            every,
            ..CacheDir::new(dir, "memory")
        };
        let informer = factory.informer_with::<ConfigMap>(
            InformerSpec::new()
                .list_watcher(source.clone())
                .cache_dir(cache),
        );
        Running::run(informer)
    }

    /// Runs `informer` on a task of the test's.
    fn run(informer: SharedIndexInformer<ConfigMap>) -> Running {
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        Running {
            informer,
            cancel,
            task,
        }
    }

    async fn synced(&self) {
        self.informer
            .wait_for_sync(Duration::from_secs(60))
            .await
            .expect("synced");
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap();
    }

    async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// name → data of the cache, or of the source.
fn contents<'a>(objects: impl Iterator<Item = &'a ConfigMap>) -> BTreeMap<String, String> {
    objects
        .map(|o| {
            let v = o
                .data
                .as_ref()
                .and_then(|d| d.get("v"))
                .cloned()
                .unwrap_or_default();
            (o.metadata.name.clone().unwrap_or_default(), v)
        })
        .collect()
}

fn cached(running: &Running) -> BTreeMap<String, String> {
    let objects = running.informer.store().list();
    contents(objects.iter().map(|o| o.as_ref()))
}

fn served(
    source: &MemorySource<ConfigMap>,
    names: impl Iterator<Item = String>,
) -> BTreeMap<String, String> {
    let objects: Vec<ConfigMap> = names
        .filter_map(|n| source.get(&format!("demo/{n}")))
        .collect();
    contents(objects.iter())
}

fn snapshot_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "snapshot"))
                .count()
        })
        .unwrap_or(0)
}

/// A source of `objects` config maps and a directory holding its snapshot, written by an
/// informer that synced and stopped.
async fn snapshot_of(objects: usize) -> (MemorySource<ConfigMap>, tempfile::TempDir) {
    let source = MemorySource::<ConfigMap>::default();
    for i in 0..objects {
        source.add(cm(&format!("cm-{i}"), "1"));
    }
    let dir = tempfile::tempdir().unwrap();
    let first = Running::start(&source, dir.path(), Duration::from_secs(600));
    first.synced().await;
    first.stop().await;
    (source, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_informer_is_not_synced_until_it_has_caught_up() {
    let (source, dir) = snapshot_of(20).await;
    assert_eq!(
        snapshot_files(dir.path()),
        1,
        "written at the graceful stop"
    );

    // Down: changes the restarted informer's watch holds back.
    source.hold();
    source.modify(cm("cm-0", "2"));
    let gone = source.get("demo/cm-1").unwrap();
    source.delete(gone);
    let second = Running::start(&source, dir.path(), Duration::from_secs(600));
    until("the snapshot loaded", || {
        second.informer.store().len() == 20
    })
    .await;
    // The snapshot is readable, but the server's version has not been reached.
    assert!(!second.informer.has_synced(), "synced before catching up");
    source.release();
    second.synced().await;
    let cache = cached(&second);
    assert_eq!(cache.len(), 19);
    assert_eq!(cache["cm-0"], "2");
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_that_cannot_be_written_leaves_the_informer_working() {
    let source = MemorySource::<ConfigMap>::default();
    source.add(cm("a", "1"));
    let dir = tempfile::tempdir().unwrap();
    // A file where the directory should be: every write fails.
    let blocked = dir.path().join("blocked");
    std::fs::write(&blocked, b"").unwrap();
    let running = Running::start(&source, &blocked, Duration::from_millis(20));
    running.synced().await;
    source.add(cm("b", "1"));
    until("b cached", || running.informer.store().len() == 2).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // several failed writes
    assert!(running.informer.has_synced());
    assert!(running.informer.health().is_ready());
    running.stop().await;
}

/// Restarts at seeded random points of a change stream, gracefully or killed; each restart
/// ends with the cache equal to the source, whatever snapshot it started from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_at_random_points_end_with_the_cache_equal_to_the_source() {
    for seed in [1u64, 7, 42] {
        let mut rng = seed;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let source = MemorySource::<ConfigMap>::default();
        let names: Vec<String> = (0..30).map(|i| format!("cm-{i}")).collect();
        let dir = tempfile::tempdir().unwrap();
        let mut running = Running::start(&source, dir.path(), Duration::from_millis(5));
        for round in 0..6 {
            for _ in 0..(next() % 40) {
                let name = &names[(next() % 30) as usize];
                match (source.get(&format!("demo/{name}")), next() % 3) {
                    (Some(obj), 0) => {
                        source.delete(obj);
                    }
                    (Some(_), _) => {
                        source.modify(cm(name, &format!("{round}-{}", next() % 100)));
                    }
                    (None, _) => {
                        source.add(cm(name, &format!("{round}")));
                    }
                }
                if next() % 8 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            match next() % 2 {
                0 => running.stop().await,
                _ => running.kill().await,
            }
            if next() % 3 == 0 {
                source.close_watches();
                source.expire(); // down past the history: a relist
            }
            running = Running::start(&source, dir.path(), Duration::from_millis(5));
            running.synced().await;
            // Synced means caught up: equal the moment it says so (nothing changes meanwhile).
            let expected = served(&source, names.iter().cloned());
            assert_eq!(cached(&running), expected, "seed {seed} round {round}");
        }
        running.stop().await;
    }
}

/// An informer over several namespaces keeps one snapshot per namespace (one watch each,
/// one version each): restarted after changes in both, it lists neither, each namespace
/// resumes its own watch, and the cache equals the server; a namespace whose snapshot is
/// gone starts cold on its own while the other stays warm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_over_several_namespaces_resumes_each_from_its_own_snapshot() {
    use fake_apiserver::{FakeApiServer, ServerConfig, Verb};
    use kube::api::{Api, DeleteParams, PostParams};

    let server = FakeApiServer::start(ServerConfig::default().namespaces(["a", "b", "c"]))
        .await
        .unwrap();
    let apis: Vec<Api<ConfigMap>> = ["a", "b"]
        .iter()
        .map(|ns| Api::namespaced(server.client().unwrap(), ns))
        .collect();
    for (api, ns) in apis.iter().zip(["a", "b"]) {
        for i in 0..10 {
            let mut obj = cm(&format!("{ns}-{i}"), "1");
            obj.metadata.namespace = Some(ns.into());
            api.create(&PostParams::default(), &obj).await.unwrap();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let start_in = |namespaces: &[&str]| {
        let namespaces = namespaces.iter().map(|ns| (*ns).to_owned());
        let factory = SharedInformerFactory::new(
            server.client().unwrap(),
            FactoryOptions::default().selectors(Selectors::default().in_namespaces(namespaces)),
        );
        let cache = CacheDir::new(dir.path(), "fake");
        Running::run(factory.informer_with::<ConfigMap>(InformerSpec::new().cache_dir(cache)))
    };
    let start = || start_in(&["a", "b"]);
    let all = |apis: Vec<Api<ConfigMap>>| async move {
        let mut objects = Vec::new();
        for api in &apis {
            objects.extend(api.list(&Default::default()).await.unwrap().items);
        }
        contents(objects.iter())
    };
    let syncs = |server: &FakeApiServer| {
        let requests = server.requests().into_iter();
        let configmaps = requests.filter(|r| r.resource.as_deref() == Some("configmaps"));
        let syncs = configmaps.filter(|r| {
            let streaming = r
                .query
                .get("sendInitialEvents")
                .is_some_and(|v| v == "true");
            let list = r.verb == Some(Verb::List) && r.query.get("limit").is_none_or(|l| l != "1");
            streaming || list
        });
        syncs.map(|r| r.path).collect::<Vec<_>>()
    };

    let first = start();
    first.synced().await;
    first.stop().await;
    assert_eq!(snapshot_files(dir.path()), 2, "one snapshot per namespace");

    // Changes in both namespaces while it is down.
    let mut current = apis[0].get("a-1").await.unwrap();
    current.data = cm("a-1", "2").data;
    apis[0]
        .replace("a-1", &PostParams::default(), &current)
        .await
        .unwrap();
    apis[1]
        .delete("b-3", &DeleteParams::default())
        .await
        .unwrap();
    server.clear_requests();
    let second = start();
    second.synced().await;
    assert_eq!(syncs(&server), Vec::<String>::new(), "no namespace listed");
    assert_eq!(
        cached(&second),
        all(apis.clone()).await,
        "equal to the server"
    );
    second.stop().await;

    // Namespace b's snapshot lost: b lists, a resumes.
    for entry in std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
    {
        let text = std::fs::read(entry.path()).unwrap_or_default();
        let of_b = String::from_utf8_lossy(&text).contains("\"b-0\"");
        if entry.path().extension().is_some_and(|x| x == "snapshot") && of_b {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    assert_eq!(snapshot_files(dir.path()), 1);
    server.clear_requests();
    let third = start();
    third.synced().await;
    let listed = syncs(&server);
    assert_eq!(cached(&third), all(apis.clone()).await);
    assert!(
        listed.len() == 1 && listed[0].contains("/namespaces/b/"),
        "only b synced cold: {listed:?}"
    );
    third.stop().await;

    // One more namespace: a and b resume from their snapshots, c lists.
    server.clear_requests();
    let fourth = start_in(&["a", "b", "c"]);
    fourth.synced().await;
    let listed = syncs(&server);
    assert!(
        listed.len() == 1 && listed[0].contains("/namespaces/c/"),
        "only the new namespace synced cold: {listed:?}"
    );
    assert_eq!(cached(&fourth), all(apis.clone()).await, "c is empty");
    fourth.stop().await;
}

/// Read-your-writes across a restart: a write made while the informer was down, and one
/// made just after it started, are both waited for with `wait_for_resource_version`, which
/// returns only once the cache holds them (the snapshot's older version never satisfies
/// it), before and after the informer reports synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_a_written_version_works_across_a_warm_restart() {
    let (source, dir) = snapshot_of(5).await;

    // Written while down; the watch is held so the restart cannot have seen it yet.
    source.hold();
    let while_down = source.modify(cm("cm-2", "down"));
    let rv = while_down.metadata.resource_version.clone().unwrap();
    let second = Running::start(&source, dir.path(), Duration::from_secs(600));
    let store = second.informer.store();
    let waiting = tokio::spawn({
        let store = store.clone();
        async move {
            store.wait_for_resource_version(&rv).await.unwrap();
            let cached = store.get_by_key("demo/cm-2").unwrap();
            cached.data.as_ref().unwrap()["v"].clone()
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "not before the cache has the write");
    source.release();
    assert_eq!(
        waiting.await.unwrap(),
        "down",
        "the cache held it when the wait ended"
    );
    second.synced().await;

    // Written after the restart.
    let after = source.add(cm("late", "1"));
    let rv = after.metadata.resource_version.unwrap();
    tokio::time::timeout(
        Duration::from_secs(60),
        store.wait_for_resource_version(&rv),
    )
    .await
    .expect("reached")
    .unwrap();
    assert!(store.get_by_key("demo/late").is_some());
    second.stop().await;
}
