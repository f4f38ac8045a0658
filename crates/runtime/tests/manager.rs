//! The manager against fake-apiserver: probes as Kubernetes expects them (readiness flips
//! on a failing watch and an unsynced cache, liveness does not; a synced standby is ready),
//! metrics, a graceful shutdown that drains, one that keeps its deadline with a hung
//! reconcile or a hung API server, and two leader-elected replicas in one process that
//! never reconcile at the same time.

use crate::common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use common::{get, server, until};
use fake_apiserver::{Fault, Gvr, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer_runtime::{
    controller::{Action, Cached, ControllerOptions},
    leader_election::LeaderElectionConfig,
    manager::{Manager, ManagerError, ManagerOptions},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Test options: endpoints on a free loopback port, so that the two replicas of
/// `two_replicas_never_reconcile_at_once_and_the_standby_takes_over` (and every test
/// running beside them) never collide.
fn local() -> ManagerOptions {
    ManagerOptions::for_tests().max_watch_failures(3)
}

async fn count(_: Cached<ConfigMap>, done: Arc<AtomicUsize>) -> Result<Action, kube::Error> {
    done.fetch_add(1, Ordering::SeqCst);
    Ok(Action::Done)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_flips_on_a_failing_watch_and_liveness_does_not() {
    let server = server().await;
    for verb in [Verb::List, Verb::Watch] {
        server.inject(Fault::Status {
            verb,
            code: 403,
            // Until the test has seen them (cleared below): a count would end the outage
            // before a slow prober looks.
            times: 1_000_000,
            retry_after_seconds: None,
        });
    }
    let fast = kube_informer::reflector::ReflectorOptions::default().backoff(
        Duration::from_millis(5),
        Duration::from_millis(20),
        Duration::from_secs(60),
    );
    let factory = kube_informer::factory::FactoryOptions::default().reflector(fast);
    let mut manager = Manager::new(server.client().unwrap(), local().factory(factory))
        .await
        .unwrap();
    manager.add_readyz_check("custom", || Ok(()));
    let wedged = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let w = wedged.clone();
    manager.add_healthz_check("pool", move || {
        if w.load(Ordering::SeqCst) {
            Err("the connection pool is wedged".to_owned())
        } else {
            Ok(())
        }
    });
    let mut endpoints = manager.endpoints();
    let done = Arc::new(AtomicUsize::new(0));
    let controller = manager.controller::<ConfigMap>(ControllerOptions::default().name("cms"));
    manager.add_controller(controller, count, |_, _, _| Action::Retry, done.clone());
    let (stop, force) = (CancellationToken::new(), CancellationToken::new());
    let running = tokio::spawn(manager.run_until(stop.clone(), force));
    let addr = endpoints.wait_for(Option::is_some).await.unwrap().unwrap();
    // Failing: not ready, but alive: an API-server outage must not restart every replica.
    let mut failures_seen = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let (ready, body) = get(addr, "/readyz?verbose").await;
        let (alive, alive_body) = get(addr, "/healthz?verbose").await;
        assert_eq!(ready, 500, "ready while the cache cannot sync");
        assert_eq!(
            alive, 200,
            "not alive because the API server fails: {alive_body}"
        );
        assert!(body.contains("[+]custom ok"), "{body}");
        assert!(
            body.ends_with("readyz check failed\n"),
            "kube-apiserver's words: {body}"
        );
        assert!(
            alive_body.ends_with("healthz check passed\n"),
            "{alive_body}"
        );
        if body.contains("list/watch failures in a row") {
            assert!(body.contains("[-]informer ConfigMap failed: "), "{body}");
            failures_seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(failures_seen, "/readyz never named the failing watch");
    // The outage ends: synced, alive, ready, and metrics to show.
    server.clear_faults();
    let mut ready = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if get(addr, "/readyz").await.0 == 200 && get(addr, "/healthz").await.0 == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(ready, "never ready after the faults ran out");
    // A user's liveness check fails /healthz (and only it), named with its reason.
    wedged.store(true, Ordering::SeqCst);
    let (alive, body) = get(addr, "/healthz?verbose").await;
    assert_eq!(alive, 500, "{body}");
    assert!(
        body.contains("[-]pool failed: the connection pool is wedged"),
        "{body}"
    );
    let (ready, ready_body) = get(addr, "/readyz?verbose").await;
    assert_eq!(ready, 200, "liveness is not readiness: {ready_body}");
    assert!(
        ready_body.ends_with("readyz check passed\n"),
        "kube-apiserver's words: {ready_body}"
    );
    wedged.store(false, Ordering::SeqCst);
    assert_eq!(get(addr, "/healthz").await.0, 200);
    server
        .create(
            &Gvr::core("configmaps"),
            Some("shop"),
            json!({"metadata": {"name": "a"}}),
        )
        .unwrap();
    until("reconciled", || done.load(Ordering::SeqCst) >= 1).await;
    let (code, metrics) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    for name in [
        r#"controller_runtime_reconcile_total{controller="cms",result="success"}"#,
        r#"controller_runtime_max_concurrent_reconciles{controller="cms"} 2"#,
        "workqueue_adds_total",
        "informer_fifo_depth",
        "reflector_watches_total",
        // Every request of the manager's client, the refused ones too.
        r#"rest_client_requests_total{code="200",method="GET"}"#,
        r#"rest_client_requests_total{code="403",method="GET"}"#,
        r#"rest_client_request_duration_seconds_count{verb="GET"}"#,
    ] {
        assert!(metrics.contains(name), "{name} missing from\n{metrics}");
    }
    let refused = metrics
        .lines()
        .find(|l| l.starts_with(r#"rest_client_requests_total{code="403",method="GET"}"#))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok());
    let answered = server.fault_counts().get("status:403").copied();
    assert!(answered.is_some_and(|n| n > 0));
    assert_eq!(
        refused, answered,
        "every 403 the server answered is counted"
    );
    stop.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_shutdown_drains_the_reconciles_in_flight() {
    let server = server().await;
    let cms = Gvr::core("configmaps");
    for i in 0..4 {
        server
            .create(
                &cms,
                Some("shop"),
                json!({"metadata": {"name": format!("c{i}")}}),
            )
            .unwrap();
    }
    // The drain's deadline is not what this test is about: far above the 4 × 200 ms it
    // needs, however busy the machine.
    let options = local().shutdown_timeout(Duration::from_secs(60));
    let mut manager = Manager::new(server.client().unwrap(), options)
        .await
        .unwrap();
    let (started, finished) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let controller =
        manager.controller::<ConfigMap>(ControllerOptions::default().name("slow").workers(1));
    let (s, f) = (started.clone(), finished.clone());
    manager.add_controller(
        controller,
        move |_: Cached<ConfigMap>, _: Arc<()>| {
            let (s, f) = (s.clone(), f.clone());
            async move {
                s.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(200)).await;
                f.fetch_add(1, Ordering::SeqCst);
                Ok::<_, kube::Error>(Action::Done)
            }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
    );
    let (stop, force) = (CancellationToken::new(), CancellationToken::new());
    let running = tokio::spawn(manager.run_until(stop.clone(), force));
    until("the first reconcile started", || {
        started.load(Ordering::SeqCst) >= 1
    })
    .await;
    stop.cancel();
    running.await.unwrap().unwrap();
    assert_eq!(
        finished.load(Ordering::SeqCst),
        4,
        "held and queued keys reconciled"
    );
}

/// Two replicas in one process: one leads, the other waits; the leader crashes (its tasks
/// die without releasing) and the other takes over. Reconciles of the two never overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_reconcile_at_once_and_the_standby_takes_over() {
    let server = server().await;
    let cms = Gvr::core("configmaps");
    server
        .create(&cms, Some("shop"), json!({"metadata": {"name": "a"}}))
        .unwrap();
    let spans: Arc<Mutex<Vec<(usize, Instant, Instant)>>> = Arc::default();
    let (mut replicas, mut addrs) = (Vec::new(), Vec::new());
    for replica in 0..2usize {
        let election = LeaderElectionConfig::new("demo")
            .namespace("shop")
            .identity(format!("replica-{replica}"))
            // 4 s for a renewal on a busy machine before the leader steps down on its own
            // (the test crashes it instead), and 4 s more before the standby may lead.
            .lease_duration(Duration::from_secs(8))
            .renew_deadline(Duration::from_secs(4))
            .retry_period(Duration::from_millis(500))
            .release_on_cancel(false);
        let options = local().leader_election(election);
        let mut manager = Manager::new(server.client().unwrap(), options)
            .await
            .unwrap();
        let controller = manager.controller::<ConfigMap>(ControllerOptions::default().name("cms"));
        let log = spans.clone();
        manager.add_controller(
            controller.resync(Duration::from_secs(1)),
            move |_: Cached<ConfigMap>, _: Arc<()>| {
                let log = log.clone();
                async move {
                    let start = Instant::now();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    log.lock().push((replica, start, Instant::now()));
                    Ok::<_, kube::Error>(Action::Done)
                }
            },
            |_, _, _| Action::Retry,
            Arc::new(()),
        );
        let (stop, force) = (CancellationToken::new(), CancellationToken::new());
        let mut endpoints = manager.endpoints();
        replicas.push((tokio::spawn(manager.run_until(stop.clone(), force)), stop));
        addrs.push(endpoints.wait_for(Option::is_some).await.unwrap().unwrap());
    }
    until("someone reconciled", || !spans.lock().is_empty()).await;
    // A rolling update needs the new pod ready while the old one leads: leadership is not
    // readiness, so both replicas are ready once synced.
    for addr in &addrs {
        let mut ready = false;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if get(*addr, "/readyz").await.0 == 200 {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            ready,
            "a synced replica at {addr} is not ready: {:?}",
            get(*addr, "/readyz?verbose").await
        );
    }
    let leader = spans.lock()[0].0;
    // client-go's leader_election_master_status: 1 on the leader, 0 on the standby.
    for (replica, addr) in addrs.iter().enumerate() {
        let (_, metrics) = get(*addr, "/metrics").await;
        let want = format!(
            "leader_election_master_status{{name=\"demo\"}} {}",
            u8::from(replica == leader)
        );
        assert!(
            metrics.contains(&want),
            "replica {replica}: {want} missing from\n{metrics}"
        );
    }
    replicas[leader].0.abort(); // a crash: no release, no drain
    let crashed = Instant::now();
    until("the standby reconciled", || {
        spans.lock().iter().any(|s| s.0 != leader)
    })
    .await;
    let takeover = spans.lock().iter().find(|s| s.0 != leader).unwrap().1;
    assert!(
        takeover - crashed >= Duration::from_secs(1),
        "waited for the lease"
    );
    let spans = spans.lock().clone();
    for a in &spans {
        for b in &spans {
            let overlap = a.0 != b.0 && a.1 < b.2 && b.1 < a.2;
            assert!(!overlap, "two replicas reconciled at once: {a:?} {b:?}");
        }
    }
    let (standby, stop) = replicas.remove(1 - leader);
    stop.cancel();
    let result = standby.await.unwrap();
    assert!(
        result.is_ok() || matches!(result, Err(ManagerError::LeadershipLost)),
        "{result:?}"
    );
}

/// Two controllers of one name (both left at the default, here) would share their metric
/// series, queue names and logs: the manager refuses to start, naming the name and the fix.
#[tokio::test]
async fn two_controllers_of_one_name_are_refused() {
    let server = server().await;
    let mut manager = Manager::new(server.client().unwrap(), local())
        .await
        .unwrap();
    for _ in 0..2 {
        let controller = manager.controller::<ConfigMap>(ControllerOptions::default());
        let done = Arc::new(AtomicUsize::new(0));
        manager.add_controller(controller, count, |_, _, _| Action::Retry, done);
    }
    let result = manager
        .run_until(CancellationToken::new(), CancellationToken::new())
        .await;
    let Err(ManagerError::DuplicateController { name }) = &result else {
        panic!("started with two controllers of one name: {result:?}");
    };
    assert_eq!(name, "controller");
    let message = result.unwrap_err().to_string();
    assert!(message.contains("ControllerOptions::name"), "{message}");
}
