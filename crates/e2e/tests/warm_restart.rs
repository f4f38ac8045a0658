//! Warm restarts (issue #56): an informer with a cache directory is stopped, the server
//! changes while it is down, and a new one starts from the snapshot. On both servers: no
//! LIST of the collection (one `limit=1` read, then the watch from the snapshot's version),
//! a cache equal to the server, handlers told of what changed meanwhile; a history
//! compacted meanwhile gets a relist; a killed informer resumes from its last periodic
//! snapshot; a corrupt or an older snapshot is refused.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use e2e::{
    Backend, BackendOptions, Request, assert_cache_matches, both, config_map, ensure_namespace,
    quick, server_state,
};
use futures_util::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube_informer::{
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
    informer::{HandlerFuncs, HandlerOptions, SharedIndexInformer},
    list_watch::Selectors,
    snapshot::CacheDir,
};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "warm";
const COMPACTION: Duration = Duration::from_secs(2);

/// What the handlers of one informer were told, in order.
#[derive(Default)]
struct Told {
    initial: Vec<String>,
    added: Vec<String>,
    updated: Vec<String>,
    deleted: Vec<String>,
}

/// An informer of the namespace's config maps keeping its cache in `dir`, run by the test
/// (so it can be killed), with its handler's record.
struct Informer {
    informer: SharedIndexInformer<ConfigMap>,
    told: Arc<Mutex<Told>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    started: Instant,
}

fn name_of(cm: &ConfigMap) -> String {
    cm.metadata.name.clone().unwrap_or_default()
}

impl Informer {
    fn start(backend: &Backend, dir: &Path, every: Duration) -> Informer {
        let factory = SharedInformerFactory::new(
            backend.informer_client(),
            FactoryOptions::default()
                .selectors(Selectors::default().in_namespace(NAMESPACE))
                .reflector(quick()),
        );
        let cache = CacheDir {
            every,
            ..CacheDir::new(dir, backend.name())
        };
        let informer = factory.informer_with::<ConfigMap>(InformerSpec::new().cache_dir(cache));
        let told = Arc::new(Mutex::new(Told::default()));
        let (a, u, d) = (told.clone(), told.clone(), told.clone());
        informer.add_event_handler(
            HandlerFuncs::new()
                .on_add(move |cm: Arc<ConfigMap>, initial| {
                    let mut told = a.lock();
                    match initial {
                        true => told.initial.push(name_of(&cm)),
                        false => told.added.push(name_of(&cm)),
                    }
                })
                .on_update(move |_, cm: Arc<ConfigMap>| u.lock().updated.push(name_of(&cm)))
                .on_delete(move |gone| d.lock().deleted.push(name_of(gone.object()))),
            HandlerOptions::default(),
        );
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        Informer {
            informer,
            told,
            cancel,
            task,
            started: Instant::now(),
        }
    }

    async fn synced(&self) -> Duration {
        if let Err(err) = self.informer.wait_for_sync(Duration::from_secs(60)).await {
            panic!("the informer did not sync: {err}");
        }
        self.started.elapsed()
    }

    /// The cache as it is, name → resourceVersion (no waiting).
    fn cached(&self) -> BTreeMap<String, String> {
        let store = self.informer.store();
        let objects = store.list().into_iter();
        let versions = objects.map(|cm| (name_of(&cm), cm.metadata.resource_version.clone()));
        versions
            .map(|(name, rv)| (name, rv.unwrap_or_default()))
            .collect()
    }

    /// A graceful stop: the last snapshot is written before `run` returns.
    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.expect("the informer's task ends");
    }

    /// Killed: the task dropped where it stands, no last snapshot.
    async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

async fn create_many(api: &Api<ConfigMap>, names: impl Iterator<Item = String>) {
    stream::iter(names)
        .for_each_concurrent(16, |name| async move {
            api.create(&PostParams::default(), &config_map(&name, "v0"))
                .await
                .expect("created");
        })
        .await;
}

/// While the informer is down: 10 created, 10 changed, 10 deleted. Returns the deleted.
async fn change_while_down(api: &Api<ConfigMap>) -> Vec<String> {
    create_many(api, (0..10).map(|i| format!("new-{i}"))).await;
    for i in 0..10 {
        let patch = json!({"data": {"v": format!("changed-{i}")}});
        api.patch(
            &format!("cm-{i}"),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .expect("patched");
    }
    let deleted: Vec<String> = (10..20).map(|i| format!("cm-{i}")).collect();
    for name in &deleted {
        api.delete(name, &DeleteParams::default())
            .await
            .expect("deleted");
    }
    deleted
}

/// The informer's requests for the namespace's config maps since `from` of them.
fn requests_since(backend: &Backend, from: usize) -> Vec<Request> {
    backend.requests_for("configmaps", NAMESPACE)[from..].to_vec()
}

/// The snapshot file in `dir`, with its version from the `.newest` beside it.
fn snapshot_version(dir: &Path) -> Option<String> {
    let newest = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .ends_with(".snapshot.newest")
        })?;
    std::fs::read_to_string(newest.path()).ok()
}

/// The informer's cache against a fresh LIST of the namespace, once it has seen a fence:
/// a write to `cm-0` made now. (Not the LIST's own version: on a real server other
/// collections' writes move it past this one's last change, and only a bookmark, sent
/// about once a minute, would carry the cache there.)
async fn assert_matches(backend: &Backend, informer: &Informer, api: &Api<ConfigMap>) {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        .to_string();
    let patch = json!({"metadata": {"annotations": {"e2e.kube-informer.dev/fence": stamp}}});
    let fenced = api
        .patch("cm-0", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("the fence written");
    let fence = fenced.metadata.resource_version.unwrap_or_default();
    assert_cache_matches(backend.name(), &informer.informer.store(), api, &fence).await;
}

/// The namespace with `count` config maps, and a cache directory.
async fn prepare(backend: &Backend, count: usize) -> (Api<ConfigMap>, tempfile::TempDir) {
    ensure_namespace(&backend.client(), NAMESPACE).await;
    let api: Api<ConfigMap> = Api::namespaced(backend.client(), NAMESPACE);
    create_many(&api, (0..count).map(|i| format!("cm-{i}"))).await;
    (api, tempfile::tempdir().unwrap())
}

/// No LIST of the collection: only reads of one object (one before the watch, one before
/// each later catch-up watch on a quiet server), then watches; the first watch's version.
fn assert_no_list(backend: &Backend, requests: &[Request]) -> String {
    let syncs: Vec<_> = requests.iter().filter(|r| r.is_sync()).collect();
    assert!(!syncs.is_empty(), "{}: {requests:#?}", backend.name());
    for sync in &syncs {
        assert_eq!(sync.limit, Some(1), "{}: {requests:#?}", backend.name());
        assert_eq!(sync.resource_version.as_deref().unwrap_or(""), "");
    }
    assert_eq!(
        requests[0].verb,
        "list",
        "{}: {requests:#?}",
        backend.name()
    );
    let watch = requests
        .iter()
        .find(|r| r.verb == "watch")
        .expect("a watch");
    watch.resource_version.clone().unwrap_or_default()
}

async fn a_restart_resumes_from_the_snapshot_without_a_list(backend: Backend) {
    let (api, dir) = prepare(&backend, 5000).await;

    let first = Informer::start(&backend, dir.path(), Duration::from_secs(600));
    let cold = first.synced().await;
    first.stop().await;
    let written = snapshot_version(dir.path()).expect("a snapshot written at the stop");

    let deleted = change_while_down(&api).await;
    // A write elsewhere: the server's version moves past the collection's last change, so
    // only a bookmark can tell the watch has caught up.
    ensure_namespace(&backend.client(), "default").await;
    let elsewhere: Api<ConfigMap> = Api::namespaced(backend.client(), "default");
    elsewhere
        .create(&PostParams::default(), &config_map("elsewhere", "v"))
        .await
        .expect("created");
    let before = backend.requests_for("configmaps", NAMESPACE).len();
    let second = Informer::start(&backend, dir.path(), Duration::from_secs(600));
    let warm = second.synced().await;
    // Synced means caught up: the cache is the server's state the moment it says so.
    let at_sync = second.cached();
    eprintln!(
        "{}: synced cold in {cold:?}, warm in {warm:?}",
        backend.name()
    );
    let requests = requests_since(&backend, before);
    assert!(
        at_sync == server_state(&api).await,
        "{}: synced before caught up",
        backend.name()
    );
    assert_matches(&backend, &second, &api).await;

    // No LIST; the first watch from the snapshot's version.
    assert_eq!(assert_no_list(&backend, &requests), written);

    // Handlers: the snapshot as the initial list, then what changed while down.
    {
        let told = second.told.lock();
        assert_eq!(told.initial.len(), 5000, "{}", backend.name());
        let mut gone = told.deleted.clone();
        gone.sort();
        let mut expected = deleted.clone();
        expected.sort();
        assert_eq!(
            gone,
            expected,
            "{}: deletions made while down",
            backend.name()
        );
        assert_eq!(told.added.len(), 10, "{}", backend.name());
        assert!(told.updated.len() >= 10, "{}", backend.name());
    }
    second.stop().await;
}

both!(a_restart_resumes_from_the_snapshot_without_a_list);

fn compacting() -> BackendOptions {
    BackendOptions {
        compaction: Some(COMPACTION),
        uncached: vec!["configmaps"],
        ..Default::default()
    }
}

async fn down_past_the_servers_history_relists(backend: Backend) {
    let (api, dir) = prepare(&backend, 50).await;
    let first = Informer::start(&backend, dir.path(), Duration::from_secs(600));
    first.synced().await;
    first.stop().await;

    let deleted = change_while_down(&api).await;
    backend.compact(COMPACTION).await;
    let second = Informer::start(&backend, dir.path(), Duration::from_secs(600));
    second.synced().await;
    assert_matches(&backend, &second, &api).await;
    // The snapshot's objects were handed out, so the relist tells of the deletions.
    {
        let told = second.told.lock();
        assert_eq!(told.initial.len(), 50, "{}", backend.name());
        for name in &deleted {
            assert!(
                told.deleted.contains(name),
                "{}: {name} not deleted: {:?}",
                backend.name(),
                told.deleted
            );
        }
    }
    second.stop().await;
}

both!(down_past_the_servers_history_relists, compacting());

async fn a_killed_informer_resumes_from_its_last_periodic_snapshot(backend: Backend) {
    let (api, dir) = prepare(&backend, 50).await;
    let first = Informer::start(&backend, dir.path(), Duration::from_millis(200));
    first.synced().await;
    e2e::eventually("a periodic snapshot", || {
        snapshot_version(dir.path()).is_some()
    })
    .await;
    let periodic: u128 = snapshot_version(dir.path()).unwrap().parse().unwrap();
    // Changes the killed informer saw but never wrote (most likely: the period is short).
    create_many(&api, (0..5).map(|i| format!("late-{i}"))).await;
    first.kill().await;

    let deleted = change_while_down(&api).await;
    let before = backend.requests_for("configmaps", NAMESPACE).len();
    let second = Informer::start(&backend, dir.path(), Duration::from_secs(600));
    second.synced().await;
    // (Taken before the comparison's own LISTs.)
    let requests = requests_since(&backend, before);
    assert_matches(&backend, &second, &api).await;
    let store = second.informer.store();
    for name in &deleted {
        assert!(store.get_by_key(&format!("{NAMESPACE}/{name}")).is_none());
    }
    // Resumed from a periodic snapshot (the first, or a later one), without a LIST.
    let resumed: u128 = assert_no_list(&backend, &requests).parse().unwrap();
    assert!(
        resumed >= periodic,
        "{}: resumed at {resumed}, before {periodic}",
        backend.name()
    );
    second.stop().await;
}

both!(a_killed_informer_resumes_from_its_last_periodic_snapshot);

async fn corrupt_or_older_snapshots_are_refused(backend: Backend) {
    let (api, dir) = prepare(&backend, 20).await;
    let first = Informer::start(&backend, dir.path(), Duration::from_secs(600));
    first.synced().await;
    first.stop().await;
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "snapshot"))
        .expect("a snapshot");
    let old = std::fs::read(&file).unwrap();

    // A second run, with changes: a newer snapshot.
    change_while_down(&api).await;
    let second = Informer::start(&backend, dir.path(), Duration::from_secs(600));
    second.synced().await;
    second.stop().await;

    let starts = [
        ("an older snapshot put back", old.clone()),
        ("a corrupt snapshot", {
            let mut bytes = std::fs::read(&file).unwrap();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x20;
            bytes
        }),
        (
            "a truncated snapshot",
            std::fs::read(&file).unwrap()[..old.len() / 3].to_vec(),
        ),
    ];
    for (what, bytes) in starts {
        std::fs::write(&file, bytes).unwrap();
        let before = backend.requests_for("configmaps", NAMESPACE).len();
        let informer = Informer::start(&backend, dir.path(), Duration::from_secs(600));
        informer.synced().await;
        let requests = requests_since(&backend, before);
        // A cold start: a full sync (a LIST without a limit of one, or a streaming list).
        assert!(
            requests.iter().any(|r| r.is_sync() && r.limit != Some(1)),
            "{}: {what} was used: {requests:#?}",
            backend.name()
        );
        assert_matches(&backend, &informer, &api).await;
        assert!(
            informer.told.lock().deleted.is_empty(),
            "{}: {what}",
            backend.name()
        );
        informer.stop().await;
    }
}

both!(corrupt_or_older_snapshots_are_refused);
