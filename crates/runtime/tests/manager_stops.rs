//! Stops that must keep their word whatever still runs, on a paused clock: a stop with a
//! hung reconcile and a hung Lease store returns by the shutdown deadline; a second stop
//! (the second SIGTERM) during the drain returns at once; a leadership lost and taken again
//! before the manager looks (the `leading` watch keeps only the newest value) stops it as
//! any loss does. Each time the hung reconcile is dropped, not leaked. And once a manager
//! has returned — stopped gracefully, forced while its event writer is stuck on a server
//! that never answers, or refused at start — no task it spawned is left (counted in the
//! runtime's live tasks).

use crate::common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures_util::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::{factory::InformerSpec, list_watch::MemorySource};
use kube_informer_runtime::{
    controller::{Action, Cached, ControllerOptions},
    leader_election::LeaderElectionConfig,
    lease::{LeaseStore, MemoryLeases},
    manager::{Manager, ManagerError, ManagerOptions},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Timer granularity of tokio's wheel (it rounds deadlines up to the millisecond).
const TOLERANCE: Duration = Duration::from_millis(5);

/// Sets a flag when dropped: proof that a cancelled future was dropped, not leaked.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A stop while leading, with a reconcile that never ends and an API server that never
/// answers (the Lease release hangs): `run_until` still returns by the shutdown deadline,
/// having dropped the hung reconcile, and leaves the Lease to expire.
#[tokio::test(start_paused = true)]
async fn a_stop_keeps_its_deadline_with_a_hung_reconcile_and_a_hung_api_server() {
    let leases = Arc::new(MemoryLeases::default());
    let timeout = Duration::from_secs(4);
    let (manager, started, dropped) = hung_manager(leases.clone(), elected(), timeout).await;
    let stop = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(stop.clone(), CancellationToken::new()));
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    leases.set_hanging(true);
    let asked = Instant::now();
    stop.cancel();
    let result = running.await.unwrap();
    let took = asked.elapsed();
    assert!(result.is_ok(), "{result:?}");
    assert!(
        took <= timeout + TOLERANCE,
        "took {took:?}, deadline {timeout:?}"
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the hung reconcile was leaked"
    );
    let holder = leases.lease("hung").and_then(|l| l.spec?.holder_identity);
    assert_eq!(
        holder.as_deref(),
        Some("only"),
        "a hung release cannot have landed"
    );
}

/// The election of [`hung_manager`]s: the defaults, one candidate.
fn elected() -> LeaderElectionConfig {
    LeaderElectionConfig::new("hung")
        .namespace("shop")
        .identity("only")
}

/// A manager elected with `election` on `leases`, with one controller whose reconcile never
/// ends: (manager, the reconcile started, its future dropped).
async fn hung_manager(
    leases: Arc<dyn LeaseStore>,
    election: LeaderElectionConfig,
    timeout: Duration,
) -> (Manager, Arc<AtomicBool>, Arc<AtomicBool>) {
    let source = MemorySource::<ConfigMap>::default();
    source.add(
        serde_json::from_value(json!({"metadata": {"name": "a", "namespace": "shop"}})).unwrap(),
    );
    let options = ManagerOptions::default()
        .no_endpoints()
        .shutdown_timeout(timeout)
        .leader_election(election)
        .lease_store(leases);
    let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let mut manager = Manager::new(kube::Client::try_from(nowhere).unwrap(), options)
        .await
        .unwrap();
    manager
        .factory()
        .informer_with::<ConfigMap>(InformerSpec::new().list_watcher(source.clone()));
    let controller = manager.controller::<ConfigMap>(ControllerOptions::default().name("hung"));
    let (started, dropped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, d) = (started.clone(), dropped.clone());
    manager.add_controller(
        controller,
        move |_: Cached<ConfigMap>, _: Arc<()>| {
            s.store(true, Ordering::SeqCst);
            let guard = Dropped(d.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok::<_, kube::Error>(Action::Done)
            }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
    );
    (manager, started, dropped)
}

/// A second stop during the drain (the second SIGTERM or Ctrl-C) stops at once: the hung
/// reconcile is dropped without waiting for the 60 s drain, and the Lease is left to
/// expire rather than released by a process told to go now.
#[tokio::test(start_paused = true)]
async fn a_second_stop_during_the_drain_returns_at_once() {
    let leases = Arc::new(MemoryLeases::default());
    let election = elected();
    let (manager, started, dropped) = hung_manager(leases, election, Duration::from_secs(60)).await;
    let (stop, force) = (CancellationToken::new(), CancellationToken::new());
    let running = tokio::spawn(manager.run_until(stop.clone(), force.clone()));
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!running.is_finished(), "the drain waits for the reconcile");
    assert!(!dropped.load(Ordering::SeqCst));
    let again = Instant::now();
    force.cancel();
    let result = running.await.unwrap();
    let took = again.elapsed();
    assert!(result.is_ok(), "{result:?}");
    assert!(took <= TOLERANCE, "took {took:?} after the second stop");
    assert!(
        dropped.load(Ordering::SeqCst),
        "the hung reconcile was leaked"
    );
}

const RENEW_DEADLINE: Duration = Duration::from_secs(5);

/// Leases in memory, cut off from the moment [`cut`](Self::cut) is called until exactly
/// the renew deadline of the last write that got through: the elector steps down at that
/// instant and its first attempt to take the Lease again (in the same poll, the store
/// answering at once) succeeds.
#[derive(Default)]
struct CutUntilTheDeadline {
    inner: MemoryLeases,
    last_write: Mutex<Option<Instant>>,
    cut_until: Mutex<Option<Instant>>,
}

impl CutUntilTheDeadline {
    fn cut(&self) {
        let last = self.last_write.lock().expect("a Lease was written");
        *self.cut_until.lock() = Some(last + RENEW_DEADLINE);
    }

    fn check(&self) -> Result<(), kube::Error> {
        match *self.cut_until.lock() {
            Some(until) if Instant::now() < until => {
                Err(kube::Error::Service("cut off from the Leases".into()))
            }
            _ => Ok(()),
        }
    }

    fn wrote<T>(&self, result: Result<T, kube::Error>) -> Result<T, kube::Error> {
        if result.is_ok() {
            *self.last_write.lock() = Some(Instant::now());
        }
        result
    }
}

impl LeaseStore for CutUntilTheDeadline {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.inner.get(name).await
        })
    }

    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.wrote(self.inner.create(lease).await)
        })
    }

    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.wrote(self.inner.replace(name, lease).await)
        })
    }

    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>> {
        Box::pin(async move {
            self.check()?;
            self.inner.list(label, value).await
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_term_lost_and_taken_again_before_the_manager_looks_stops_it() {
    let leases = Arc::new(CutUntilTheDeadline::default());
    // Renewals every 2 s: the 5 s deadline falls between two, so the step-down is the
    // deadline's and nothing else's.
    let election = LeaderElectionConfig::new("terms")
        .namespace("shop")
        .identity("only")
        .lease_duration(Duration::from_secs(8))
        .renew_deadline(RENEW_DEADLINE)
        .retry_period(Duration::from_secs(2));
    let timeout = Duration::from_secs(5);
    let (manager, started, dropped) = hung_manager(leases.clone(), election, timeout).await;
    let elector = manager.elector().unwrap().clone();
    let running =
        tokio::spawn(manager.run_until(CancellationToken::new(), CancellationToken::new()));
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(elector.term(), 1);
    leases.cut();
    let result = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the manager went on leading a term that had ended")
        .unwrap();
    assert!(
        matches!(result, Err(ManagerError::LeadershipLost)),
        "{result:?}"
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the reconcile was not stopped"
    );
    assert_eq!(elector.term(), 2, "the Lease was taken again in a new term");
}

/// Nothing a manager spawns outlives it: once `run_until` has returned, the runtime holds
/// as many tasks as before the manager was made — its controller and workers, its caches
/// and their decoders, its endpoints, the workers of its recording client, and its event
/// writer (a reconcile published an Event), though the application still holds a
/// recorder.
#[tokio::test(flavor = "current_thread")]
async fn no_task_of_the_manager_outlives_it() {
    let server = common::server().await;
    outlived_by_nothing(&server, |graceful, _| graceful.cancel()).await;
}

/// The same after a second signal, with the event writer stuck on an API server that never
/// answers its write: the writer is stopped at once and awaited, not left running.
#[tokio::test(flavor = "current_thread")]
async fn no_task_outlives_a_forced_stop_with_the_event_writer_stuck() {
    let server = common::server().await;
    server.inject(fake_apiserver::Fault::Hold {
        verb: fake_apiserver::Verb::Create,
        gate: fake_apiserver::Gate::new(),
        times: usize::MAX,
    });
    outlived_by_nothing(&server, |graceful, force| {
        graceful.cancel();
        force.cancel();
    })
    .await;
}

/// The tasks alive on the runtime.
fn alive() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Asserts the runtime is back to `before` tasks. A finished task is counted until the
/// runtime reaps it: it is given turns, not time.
async fn assert_reaped_to(before: usize) {
    for _ in 0..1000 {
        if alive() == before {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(alive(), before, "tasks outlived the manager");
}

/// Runs a manager whose reconcile publishes an Event, stops it with `stop` once it has
/// reconciled, and checks that the runtime is left with the tasks it had before.
async fn outlived_by_nothing(
    server: &fake_apiserver::FakeApiServer,
    stop: impl FnOnce(&CancellationToken, &CancellationToken),
) {
    use kube_informer_runtime::events::{EventType, NewEvent};
    let client = server.memory_client();
    let before = alive();

    let mut manager = Manager::new(client.clone(), ManagerOptions::for_tests())
        .await
        .unwrap();
    let recorder = manager.recorder("tasks");
    let kept = recorder.clone(); // say, in a context the application keeps
    let controller = manager.controller::<ConfigMap>(ControllerOptions::default().name("tasks"));
    let reconciled = Arc::new(AtomicBool::new(false));
    let seen = reconciled.clone();
    let reconcile = move |cm: Cached<ConfigMap>, _: Arc<()>| {
        let (recorder, seen) = (recorder.clone(), seen.clone());
        async move {
            if let Cached::Present(cm) = cm {
                recorder.publish(&*cm, NewEvent::new(EventType::Normal, "Seen", "Reconcile"));
                seen.store(true, Ordering::SeqCst);
            }
            Ok::<_, kube::Error>(Action::Done)
        }
    };
    manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(()));
    let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
    let running = manager.run_until(graceful.clone(), force.clone());
    let cm = json!({"metadata": {"name": "one", "namespace": "shop"}});
    server
        .create(&fake_apiserver::Gvr::core("configmaps"), Some("shop"), cm)
        .unwrap();
    let stopping = async {
        while !reconciled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(alive() > before, "the manager runs tasks");
        stop(&graceful, &force);
    };
    let (ran, ()) = tokio::join!(running, stopping);
    ran.unwrap();
    assert_reaped_to(before).await;
    drop(kept);
}

/// A manager that refuses to start (two controllers of one name) leaves no task either: its
/// event writer, started when the recorder was made, is closed, though the application
/// still holds a recorder.
#[tokio::test(flavor = "current_thread")]
async fn a_manager_that_refuses_to_start_leaves_no_task() {
    let server = common::server().await;
    let before = alive();
    let mut manager = Manager::new(server.memory_client(), ManagerOptions::for_tests())
        .await
        .unwrap();
    let kept = manager.recorder("tasks");
    for _ in 0..2 {
        let controller = manager.controller::<ConfigMap>(ControllerOptions::default().name("twin"));
        let reconcile =
            |_: Cached<ConfigMap>, _: Arc<()>| async { Ok::<_, kube::Error>(Action::Done) };
        manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(()));
    }
    let refused = manager
        .run_until(CancellationToken::new(), CancellationToken::new())
        .await;
    assert!(
        matches!(refused, Err(ManagerError::DuplicateController { .. })),
        "{refused:?}"
    );
    assert_reaped_to(before).await;
    drop(kept);
}
