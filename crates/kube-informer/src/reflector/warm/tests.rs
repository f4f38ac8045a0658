//! Warm starts against a scripted server, on a paused clock: what is requested, and when
//! the reflector says it has caught up.

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{CaughtUp, WarmStart};
use crate::{
    Store,
    fifo::{DeltaQueue, ProcessError, RealFifo},
    informer::apply_deltas,
    list_watch::{ListerWatcher, WatchStream},
    reflector::{Reflector, ReflectorOptions},
};

type Events = Vec<WatchEvent<ConfigMap>>;
type WatchScript = Box<dyn Fn(usize, &str) -> Events + Send + Sync>;

/// A server at `version` whose `n`th watch (from a version) sends `watch(n, from)`, then
/// stays open until its timeout. Every request is recorded as text.
struct Server {
    version: &'static str,
    watch: WatchScript,
    calls: Arc<Mutex<Vec<String>>>,
}

impl ListerWatcher<ConfigMap> for Server {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<ConfigMap>, kube::Error> {
        self.calls
            .lock()
            .push(format!("list limit={:?}", params.limit));
        let list = json!({"metadata": {"resourceVersion": self.version}, "items": [cm("a", "3")]});
        Ok(serde_json::from_value(list).expect("a list"))
    }

    async fn watch(
        &self,
        params: &WatchParams,
        from: &str,
    ) -> Result<WatchStream<ConfigMap>, kube::Error> {
        let n = self
            .calls
            .lock()
            .iter()
            .filter(|c| c.starts_with("watch"))
            .count();
        let timeout = params.timeout.unwrap_or(0);
        self.calls
            .lock()
            .push(format!("watch {from} timeout={}", timeout.min(300)));
        let events = (self.watch)(n, from);
        let until_timeout =
            futures_util::stream::once(tokio::time::sleep(Duration::from_secs(u64::from(timeout))))
                .filter_map(|()| async { None });
        Ok(futures_util::stream::iter(events.into_iter().map(Ok))
            .chain(until_timeout)
            .boxed())
    }
}

fn cm(name: &str, rv: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}),
    )
    .expect("a config map")
}

fn bookmark(rv: &str) -> WatchEvent<ConfigMap> {
    serde_json::from_value(
        json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"resourceVersion": rv}}}),
    )
    .expect("a bookmark")
}

/// A warm start from a snapshot at `snapshot` holding a@1 and b@2, on `server`.
struct Run {
    store: Store<ConfigMap>,
    caught_up: Arc<CaughtUp>,
    calls: Arc<Mutex<Vec<String>>>,
    cancel: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    fifo: Arc<RealFifo<ConfigMap>>,
}

fn start(server: Server, snapshot: &str) -> Run {
    let calls = server.calls.clone();
    let store = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store.clone())));
    let options = ReflectorOptions::default().streaming_lists(false).seed(3);
    let reflector = Reflector::new(server, fifo.clone(), options);
    let caught_up = CaughtUp::pending(Arc::new(Notify::new()), None);
    reflector.start_from(WarmStart {
        objects: vec![cm("a", "1"), cm("b", "2")],
        resource_version: snapshot.to_owned(),
        caught_up: caught_up.clone(),
    });
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    let apply = tokio::spawn({
        let (store, fifo) = (store.clone(), fifo.clone());
        async move {
            let apply = |deltas: &_, initial| {
                apply_deltas(&store, deltas, initial);
                Ok::<(), ProcessError<std::convert::Infallible>>(())
            };
            while fifo.pop(apply).await.is_ok() {}
        }
    });
    Run {
        store,
        caught_up,
        calls,
        cancel,
        tasks: vec![run, apply],
        fifo,
    }
}

impl Run {
    /// Lets `secs` of paused time pass.
    async fn after(&self, secs: u64) -> &Self {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        self
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().clone()
    }

    fn cached(&self) -> Vec<String> {
        let mut cached: Vec<String> = self
            .store
            .list()
            .iter()
            .map(|o| {
                format!(
                    "{}@{}",
                    o.metadata.name.as_deref().unwrap_or(""),
                    o.metadata.resource_version.as_deref().unwrap_or("")
                )
            })
            .collect();
        cached.sort();
        cached
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.fifo.close();
        for task in self.tasks {
            task.await.unwrap();
        }
    }
}

fn server(
    version: &'static str,
    watch: impl Fn(usize, &str) -> Events + Send + Sync + 'static,
) -> Server {
    Server {
        version,
        watch: Box::new(watch),
        calls: Arc::default(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_warm_start_lists_one_object_and_watches_from_the_snapshot() {
    // The server changed a and deleted b while the informer was down; its version is 9.
    let run = start(
        server("9", |n, _| match n {
            0 => vec![
                WatchEvent::Modified(cm("a", "5")),
                WatchEvent::Deleted(cm("b", "6")),
                bookmark("9"),
            ],
            _ => vec![],
        }),
        "4",
    );
    run.after(1).await;
    assert_eq!(
        run.calls()[..2],
        ["list limit=Some(1)", "watch 4 timeout=3"]
    );
    assert!(
        run.caught_up.applied_in(&run.store),
        "a bookmark at the server's version catches up"
    );
    assert_eq!(run.cached(), ["a@5"]);
    run.after(10).await;
    // Caught up: the next watches are the usual long ones, with no more reads.
    let calls = run.calls();
    assert_eq!(calls[2], "watch 9 timeout=300", "{calls:?}");
    assert_eq!(
        calls.iter().filter(|c| c.starts_with("list")).count(),
        1,
        "{calls:?}"
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn not_caught_up_until_an_event_or_bookmark_reaches_the_servers_version() {
    // Bookmarks below the server's version 20 (the watch's cache had not moved), then an
    // event at it in the third watch.
    let run = start(
        server("20", |n, _| match n {
            0 => vec![WatchEvent::Modified(cm("a", "12")), bookmark("15")],
            1 => vec![bookmark("15")],
            _ => vec![WatchEvent::Added(cm("c", "20"))],
        }),
        "10",
    );
    run.after(2).await;
    assert!(
        !run.caught_up.applied_in(&run.store),
        "a bookmark below the server's version"
    );
    assert_eq!(
        run.cached(),
        ["a@12", "b@2"],
        "the snapshot is readable meanwhile"
    );
    run.after(3).await;
    assert!(!run.caught_up.applied_in(&run.store));
    run.after(3).await;
    assert!(
        run.caught_up.applied_in(&run.store),
        "an event at the server's version"
    );
    // Each catch-up watch after the first is preceded by one more read of one object.
    let calls = run.calls();
    assert_eq!(
        calls[..6],
        [
            "list limit=Some(1)",
            "watch 10 timeout=3",
            "list limit=Some(1)",
            "watch 15 timeout=3",
            "list limit=Some(1)",
            "watch 15 timeout=3",
        ],
        "{calls:?}"
    );
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_server_that_never_confirms_gets_a_relist_after_twenty_watches() {
    let run = start(server("20", |_, _| vec![]), "10");
    run.after(50).await;
    assert!(!run.caught_up.applied_in(&run.store));
    run.after(30).await;
    assert!(run.caught_up.applied_in(&run.store), "the relist caught up");
    let calls = run.calls();
    let watches = calls.iter().filter(|c| c.ends_with("timeout=3")).count();
    assert_eq!(watches, 20, "{calls:?}");
    assert!(
        calls.contains(&"list limit=None".to_owned()),
        "a relist: {calls:?}"
    );
    // The relist replaced the snapshot's objects with the server's.
    assert_eq!(run.cached(), ["a@3"]);
    run.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_snapshot_ahead_of_the_server_is_refused_for_a_list() {
    let run = start(server("7", |_, _| vec![]), "10");
    run.after(1).await;
    let calls = run.calls();
    assert_eq!(
        calls[..3],
        [
            "list limit=Some(1)",
            "list limit=None",
            "watch 7 timeout=300"
        ],
        "{calls:?}"
    );
    assert!(
        run.caught_up.applied_in(&run.store),
        "a cold start is caught up once listed"
    );
    assert_eq!(run.cached(), ["a@3"], "nothing of the snapshot");
    run.stop().await;
}
