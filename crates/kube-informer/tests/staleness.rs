//! Staleness (issue #56): how far an informer's cache is behind its source, on a paused
//! clock. A watch held back while the source moves on shows its lag through the probe (one
//! `limit=1` read per period, and no other request) and none once it catches up; events
//! waiting behind a handler count from their arrival without any probe; the metrics say the
//! same as the API.

use crate::common::until;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, ObjectList, WatchParams};
use kube_informer::{
    informer::{HandlerOptions, InformerOptions, QueueKind, SharedIndexInformer, Staleness},
    list_watch::{ListerWatcher, MemorySource, WatchStream},
    metrics::Metrics,
    reflector::ReflectorOptions,
};
use parking_lot::Mutex;
use prometheus_client::{encoding::text::encode, registry::Registry};
use tokio_util::sync::CancellationToken;

const PROBE: Duration = Duration::from_secs(10);

/// A [`MemorySource`] recording the `limit` of every LIST it serves.
#[derive(Clone, Default)]
struct Listed {
    source: MemorySource<ConfigMap>,
    limits: Arc<Mutex<Vec<Option<u32>>>>,
}

impl ListerWatcher<ConfigMap> for Listed {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<ConfigMap>, kube::Error> {
        self.limits.lock().push(params.limit);
        self.source.list(params).await
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<ConfigMap>, kube::Error> {
        self.source.watch(params, resource_version).await
    }
}

fn cm(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some("demo".into());
    cm.metadata.name = Some(name.into());
    cm
}

fn level() -> Staleness {
    let mut level = Staleness::default();
    level.versions_behind = Some(0);
    level
}

/// `name`'s value of the metric `family`, scraped now.
fn scraped(registry: &Registry, family: &str, name: &str) -> f64 {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    let series = format!("{family}{{name=\"{name}\"}} ");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line.parse().unwrap()
}

struct Rig {
    listed: Listed,
    informer: SharedIndexInformer<ConfigMap>,
    registry: Registry,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Rig {
    async fn start(reflector: ReflectorOptions) -> Rig {
        Self::start_with(reflector, QueueKind::RealFifo).await
    }

    async fn start_with(reflector: ReflectorOptions, queue: QueueKind) -> Rig {
        let listed = Listed::default();
        listed.source.add(cm("first"));
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let options = InformerOptions::default()
            .name("cms")
            .queue(queue)
            .reflector(reflector)
            .metrics(&metrics);
        let informer = SharedIndexInformer::new(listed.clone(), options);
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        informer
            .wait_for_sync(Duration::from_secs(60))
            .await
            .unwrap();
        Rig {
            listed,
            informer,
            registry,
            cancel,
            task,
        }
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_watch_held_back_shows_its_lag_through_the_probe_and_none_once_caught_up() {
    let started = tokio::time::Instant::now();
    let rig = Rig::start(ReflectorOptions::default().staleness_probe(PROBE)).await;
    tokio::time::sleep(PROBE * 2 + Duration::from_secs(1)).await;
    assert_eq!(rig.informer.staleness(), level(), "probed twice, level");

    rig.listed.source.hold();
    for name in ["a", "b", "c"] {
        rig.listed.source.add(cm(name));
    }
    let held = tokio::time::Instant::now();
    tokio::time::sleep(PROBE * 4).await;
    let staleness = rig.informer.staleness();
    // The first probe after the hold went out within a period of it.
    assert!(
        staleness.behind >= PROBE * 3 && staleness.behind <= held.elapsed(),
        "behind since the first probe that saw the writes: {staleness:?}"
    );
    assert_eq!(staleness.versions_behind, Some(3), "three writes behind");
    let seconds = scraped(&rig.registry, "informer_staleness_seconds", "cms");
    assert!(
        seconds >= (PROBE * 3).as_secs_f64(),
        "the metric agrees: {seconds}"
    );
    let versions = scraped(&rig.registry, "informer_staleness_resource_versions", "cms");
    assert_eq!(versions, 3.0);

    rig.listed.source.release();
    until("the held events applied", || {
        rig.informer.store().len() == 4
    })
    .await;
    assert_eq!(rig.informer.staleness(), level(), "caught up: level again");
    assert_eq!(
        scraped(&rig.registry, "informer_staleness_seconds", "cms"),
        0.0
    );

    // The probe is the only LIST: one `limit=1` read per period, no more.
    let limits = rig.listed.limits.lock().clone();
    let periods = (started.elapsed().as_secs() / PROBE.as_secs()) as usize;
    assert!(
        limits.iter().all(|l| *l == Some(1)) && (periods - 1..=periods).contains(&limits.len()),
        "{periods} periods, LIST limits {limits:?}"
    );
    rig.stop().await;
}

#[tokio::test(start_paused = true)]
async fn events_waiting_behind_a_handler_count_from_their_arrival_without_any_probe() {
    let rig = Rig::start(ReflectorOptions::default()).await;
    // A stream nobody reads, allowed to hold the informer back for an hour after 2.
    let stream = rig
        .informer
        .stream(HandlerOptions::default().backpressure(2, Duration::from_secs(3600)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    // One at a time: each arrives as a batch of its own, so the informer stops applying
    // once the stream's backlog is full (a batch popped is applied whole).
    for i in 0..10 {
        rig.listed.source.add(cm(&format!("cm-{i}")));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(29)).await;
    let staleness = rig.informer.staleness();
    assert!(
        rig.informer.store().len() < 11 && staleness.behind >= Duration::from_secs(29),
        "the unapplied events arrived 30 s ago: {staleness:?}, {} cached",
        rig.informer.store().len()
    );
    assert!(staleness.versions_behind.is_some_and(|v| v > 0));
    drop(stream); // the handler goes: nothing holds the informer back
    until("every event applied", || rig.informer.store().len() == 11).await;
    assert_eq!(rig.informer.staleness(), level());
    assert!(rig.listed.limits.lock().is_empty(), "no probe, no LIST");
    rig.stop().await;
}

/// A DeltaFifo's events do not move the cache's resourceVersion (only bookmarks and relists
/// do): they are not counted, so an informer that applied them all is level, not behind
/// until the next bookmark.
#[tokio::test(start_paused = true)]
async fn a_delta_fifo_that_applied_its_events_is_level() {
    let rig = Rig::start_with(ReflectorOptions::default(), QueueKind::DeltaFifo).await;
    for i in 0..5 {
        rig.listed.source.add(cm(&format!("cm-{i}")));
    }
    until("applied", || rig.informer.store().len() == 6).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(rig.informer.staleness().behind, Duration::ZERO);
    rig.stop().await;
}
