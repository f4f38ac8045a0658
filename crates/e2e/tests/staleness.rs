//! Staleness (issue #56) on both servers: an informer probing the server's version once a
//! second is level with a quiet server; a partition while the server takes writes shows
//! its lag rising (the probe goes unanswered, the watch gets nothing), and once healed the
//! watch delivers the writes and the lag falls back to zero. The request log (fake) and
//! the audit log (real) show no request beyond the documented ones: the watch and one
//! `limit=1` LIST per probe, no LIST of the collection.

use std::time::{Duration, Instant};

use e2e::{Backend, Running, both, config_map, ensure_namespace, eventually, quick};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

const NAMESPACE: &str = "stale";
const PROBE: Duration = Duration::from_secs(1);

async fn create(api: &Api<ConfigMap>, names: impl Iterator<Item = String>) {
    for name in names {
        api.create(&PostParams::default(), &config_map(&name, "v"))
            .await
            .unwrap();
    }
}

async fn a_partitioned_watch_shows_its_lag_rising_and_falling_after(backend: Backend) {
    ensure_namespace(&backend.client(), NAMESPACE).await;
    let api: Api<ConfigMap> = Api::namespaced(backend.client(), NAMESPACE);
    create(&api, (0..5).map(|i| format!("before-{i}"))).await;
    // Short watches: the real server's bookmark two seconds before a watch's deadline
    // confirms soon that a quiet watch is level with the server's version.
    let options = quick()
        .staleness_probe(PROBE)
        .watch_timeout(Duration::from_secs(8), Duration::from_secs(12));
    let started = Instant::now();
    let running = Running::start(backend.informer_client(), NAMESPACE, options).await;
    let informer = running.informer.clone();
    eventually("level with a quiet server", || {
        informer.staleness().behind.is_zero()
    })
    .await;
    // A few probes answered before the partition. (On the real server one may read a
    // version a write elsewhere made, say the API server's own lease, which this watch
    // confirms only with its next bookmark: not level meanwhile, as documented.)
    tokio::time::sleep(PROBE * 5 / 2).await;

    backend.partition();
    create(&api, (0..20).map(|i| format!("during-{i}"))).await;
    eventually("the lag rising while partitioned", || {
        informer.staleness().behind >= 3 * PROBE
    })
    .await;
    let peak = informer.staleness();
    assert_eq!(
        informer.store().len(),
        5,
        "nothing came through the partition"
    );

    backend.heal();
    eventually("every write cached and the lag back to zero", || {
        informer.store().len() == 25 && informer.staleness().behind.is_zero()
    })
    .await;
    let elapsed = started.elapsed();
    running.stop().await;

    let requests = backend.requests_for("configmaps", NAMESPACE);
    let syncs = requests
        .iter()
        .filter(|r| r.is_sync() && r.limit != Some(1));
    assert_eq!(
        syncs.count(),
        1,
        "{}: only the first sync listed",
        backend.name()
    );
    let probes = requests
        .iter()
        .filter(|r| r.verb == "list" && r.limit == Some(1))
        .count();
    let periods = (elapsed.as_secs_f64() / PROBE.as_secs_f64()).ceil() as usize;
    assert!(
        (2..=periods + 1).contains(&probes),
        "{}: {probes} probes in {periods} periods",
        backend.name()
    );
    let other: Vec<_> = requests
        .iter()
        .filter(|r| !matches!(r.verb.as_str(), "list" | "watch" | "create"))
        .collect();
    assert!(other.is_empty(), "{}: {other:?}", backend.name());
    println!(
        "{}: peak lag {:?} ({:?} versions), {probes} probes",
        backend.name(),
        peak.behind,
        peak.versions_behind
    );
}

both!(a_partitioned_watch_shows_its_lag_rising_and_falling_after);
