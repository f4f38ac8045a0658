//! Per-controller knobs: a controller's own backoff (or rate limiter) on a paused clock, and
//! a controller that runs on every replica beside a leader-only one, with two elected
//! replicas on fake-apiserver.

use crate::common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use common::{server, until};
use fake_apiserver::Gvr;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::{
    ObjectKey,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
    list_watch::MemorySource,
    workqueue::RateLimiter,
};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, Controller, ControllerOptions},
    leader_election::LeaderElectionConfig,
    manager::{Manager, ManagerOptions},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;

/// Runs a controller of one ConfigMap whose reconcile always fails, until it has been
/// tried `tries` times; the gaps between the tries.
async fn gaps_between_failures(options: ControllerOptions, tries: usize) -> Vec<Duration> {
    let source = MemorySource::<ConfigMap>::default();
    let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let factory = SharedInformerFactory::new(
        kube::Client::try_from(nowhere).unwrap(),
        FactoryOptions::default(),
    );
    factory.informer_with::<ConfigMap>(InformerSpec::new().list_watcher(source.clone()));
    let controller = Controller::<ConfigMap>::new(&factory, options);
    let attempts: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let cancel = CancellationToken::new();
    let running = tokio::spawn(controller.run(
        {
            let attempts = attempts.clone();
            move |_: Cached<ConfigMap>, _: Arc<()>| {
                attempts.lock().push(Instant::now());
                async { Err::<Action, _>(kube::Error::LinesCodecMaxLineLengthExceeded) }
            }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    factory.start();
    let cm = json!({"metadata": {"name": "failing", "namespace": "shop"}});
    source.add(serde_json::from_value(cm).unwrap());
    until("the retries", || attempts.lock().len() >= tries).await;
    cancel.cancel();
    running.await.unwrap().unwrap();
    factory.shutdown().await;
    let attempts = attempts.lock().clone();
    attempts.windows(2).map(|w| w[1] - w[0]).collect()
}

/// Each gap is `want`, give or take the 5 ms polls of a paused clock.
fn assert_gaps(gaps: &[Duration], want: &[u64]) {
    assert!(gaps.len() >= want.len(), "{gaps:?}");
    for (gap, want) in gaps.iter().zip(want) {
        let want = Duration::from_secs(*want);
        assert!(
            *gap >= want && *gap < want + Duration::from_millis(100),
            "gaps {gaps:?}, wanted {want:?}"
        );
    }
}

/// `backoff(1 s, 4 s)`: 1, 2, 4, then 4 s between tries (the default would start at 5 ms).
#[tokio::test(start_paused = true)]
async fn a_controller_backs_off_as_its_options_say() {
    let options = ControllerOptions::default()
        .name("slow-backoff")
        .backoff(Duration::from_secs(1), Duration::from_secs(4));
    let gaps = gaps_between_failures(options, 6).await;
    assert_gaps(&gaps, &[1, 2, 4, 4, 4]);
}

/// A limiter of the user's making: asked once per failure, its delay is the wait.
#[tokio::test(start_paused = true)]
async fn a_controller_uses_the_rate_limiter_it_is_given() {
    struct Steady(Arc<AtomicU32>);
    impl RateLimiter<ObjectKey> for Steady {
        fn when(&self, _: &ObjectKey) -> Duration {
            self.0.fetch_add(1, Ordering::SeqCst);
            Duration::from_secs(3)
        }
        fn forget(&self, _: &ObjectKey) {}
        fn num_requeues(&self, _: &ObjectKey) -> u32 {
            0
        }
    }
    let asked = Arc::new(AtomicU32::new(0));
    let options = ControllerOptions::default().rate_limiter({
        let asked = asked.clone();
        move || Steady(asked.clone())
    });
    let gaps = gaps_between_failures(options, 4).await;
    assert_gaps(&gaps, &[3, 3, 3]);
    assert!(asked.load(Ordering::SeqCst) >= 3);
}

/// Two elected replicas, each with a leader-only controller and one that runs on every
/// replica: both replicas reconcile with the second, only the leader with the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_on_every_replica_runs_on_the_standby_too() {
    let server = server().await;
    let cms = Gvr::core("configmaps");
    server
        .create(&cms, Some("shop"), json!({"metadata": {"name": "a"}}))
        .unwrap();
    let seen: Arc<Mutex<Vec<(usize, &'static str)>>> = Arc::default();
    let mut replicas = Vec::new();
    for replica in 0..2usize {
        // A lease long enough that the leader never loses it during the test.
        let election = LeaderElectionConfig::new("knobs")
            .namespace("shop")
            .identity(format!("replica-{replica}"))
            .lease_duration(Duration::from_secs(120))
            .renew_deadline(Duration::from_secs(90))
            .retry_period(Duration::from_millis(200));
        let options = ManagerOptions::for_tests().leader_election(election);
        let mut manager = Manager::new(server.client().unwrap(), options)
            .await
            .unwrap();
        for (name, every) in [("leader", false), ("everywhere", true)] {
            let options = ControllerOptions::default()
                .name(name)
                .runs_on_every_replica(every);
            let controller = manager.controller::<ConfigMap>(options);
            let seen = seen.clone();
            manager.add_controller(
                controller,
                move |_: Cached<ConfigMap>, _: Arc<()>| {
                    seen.lock().push((replica, name));
                    async { Ok::<_, kube::Error>(Action::Done) }
                },
                |_, _, _| Action::Retry,
                Arc::new(()),
            );
        }
        let (stop, force) = (CancellationToken::new(), CancellationToken::new());
        replicas.push((tokio::spawn(manager.run_until(stop.clone(), force)), stop));
    }
    let reconciled = |replica: usize, name: &str| seen.lock().contains(&(replica, name));
    until("both replicas reconciled on every replica", || {
        reconciled(0, "everywhere") && reconciled(1, "everywhere")
    })
    .await;
    until("the leader reconciled", || {
        reconciled(0, "leader") || reconciled(1, "leader")
    })
    .await;
    let leaders: Vec<usize> = (0..2).filter(|r| reconciled(*r, "leader")).collect();
    assert_eq!(leaders.len(), 1, "leader-only ran on {leaders:?}");
    for (running, stop) in replicas {
        stop.cancel();
        running.await.unwrap().unwrap();
    }
}
