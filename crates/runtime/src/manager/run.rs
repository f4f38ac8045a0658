//! The manager's lifecycle: bind, start, gate the controllers on leadership, watch for
//! failures, then hand over to the shutdown (see `shutdown.rs`).

use std::sync::Arc;

use prometheus_client::metrics::{family::Family, gauge::Gauge};
use tokio::{net::TcpListener, task::JoinSet};
use tokio_util::sync::CancellationToken;

use crate::leader_election::LeaderElector;

use super::{
    Manager, ManagerError, Runnable, Stop,
    health::{HealthState, Probes},
    shutdown::{Ending, Shutdown},
};

/// Cancels `graceful` on the first SIGTERM or SIGINT (Ctrl-C) and `force` on the second,
/// then waits forever: what [`Manager::run`] does, for programs that run managers with
/// [`Manager::run_until`] (several managers, or work of their own around them).
///
/// ```no_run
/// use kube_informer_runtime::{CancellationToken, manager::{Manager, ManagerOptions, shutdown_signals}};
///
/// # async fn example(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let manager = Manager::new(client, ManagerOptions::default()).await?;
/// let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
/// tokio::select! {
///     result = manager.run_until(graceful.clone(), force.clone()) => result?,
///     () = shutdown_signals(graceful, force) => unreachable!("it never returns"),
/// }
/// # Ok(())
/// # }
/// ```
pub async fn shutdown_signals(graceful: CancellationToken, force: CancellationToken) {
    for token in [graceful, force] {
        wait_for_signal().await;
        tracing::info!("shutdown signal received");
        token.cancel();
    }
    std::future::pending::<()>().await;
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(err) => {
            tracing::warn!("cannot listen for SIGTERM ({err}); SIGINT only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

/// Stops the factory's informers if the manager's future is dropped (a killed task).
struct StopInformersOnDrop(kube_informer::factory::SharedInformerFactory);

impl Drop for StopInformersOnDrop {
    fn drop(&mut self) {
        self.0.shutdown_now();
    }
}

/// `leader_election_master_status{name}`: 1 while this replica leads (client-go's metric).
fn leader_gauge(manager: &Manager) -> Option<Gauge> {
    let elector = manager.elector.as_ref()?;
    let family = Family::<Vec<(String, String)>, Gauge>::default();
    manager.registry.lock().register(
        "leader_election_master_status",
        "Whether this replica is the leader (1) or not (0) of its lease",
        family.clone(),
    );
    let name = elector.config().name.clone();
    Some(
        family
            .get_or_create(&vec![("name".to_owned(), name)])
            .clone(),
    )
}

impl Manager {
    /// Runs until `graceful` is cancelled, then shuts down within the shutdown timeout;
    /// cancelling `force` as well stops at once. Dropping this future stops everything it
    /// started (controllers, their reconciles, informers, endpoints, the election) without
    /// waiting.
    pub async fn run_until(
        self,
        graceful: CancellationToken,
        force: CancellationToken,
    ) -> Result<(), ManagerError> {
        let recorder = self.recorder.get().cloned();
        let result = self.run_started(graceful, force.clone()).await;
        // Every reconcile has stopped (or none started): write what they recorded, then the
        // writer ends; a second signal stops it at once. Either way it is gone on return.
        if let Some(recorder) = recorder {
            tokio::select! {
                biased;
                () = force.cancelled() => recorder.abort().await,
                () = recorder.close() => {}
            }
        }
        result
    }

    async fn run_started(
        mut self,
        graceful: CancellationToken,
        force: CancellationToken,
    ) -> Result<(), ManagerError> {
        if let Some(name) = self.duplicate_controller.take() {
            return Err(ManagerError::DuplicateController { name });
        }
        let health = HealthState::default();
        // Owned tasks: dropped with this future, they are aborted.
        let mut background = JoinSet::new();
        let server_cancel = CancellationToken::new();
        #[cfg(feature = "tls")]
        let metrics_in_plain = self.options.secure_metrics.is_none();
        #[cfg(not(feature = "tls"))]
        let metrics_in_plain = true;
        #[cfg(feature = "tls")]
        if let Some(secure) = &self.options.secure_metrics {
            let (bound, addr) = super::secure_metrics::Bound::bind(secure).await?;
            let (client, registry) = (self.plain.clone(), self.registry.clone());
            let profiling = self.options.profiling;
            background.spawn(bound.serve(client, registry, profiling, server_cancel.clone()));
            self.secure_endpoint.send_replace(Some(addr));
        }
        if let Some(addr) = self.options.bind {
            let bind = |source| ManagerError::Bind { addr, source };
            let listener = TcpListener::bind(addr).await.map_err(bind)?;
            let bound = listener.local_addr().map_err(bind)?;
            let probes = Arc::new(Probes {
                state: health.clone(),
                factory: self.factory.clone(),
                elector: self.elector.clone(),
                max_failures: self.options.max_watch_failures,
                healthz: std::mem::take(&mut self.healthz),
                readyz: std::mem::take(&mut self.readyz),
                readyz_details: std::mem::take(&mut self.readyz_details),
            });
            let server = super::server::serve(
                listener,
                probes,
                metrics_in_plain.then(|| self.registry.clone()),
                metrics_in_plain && self.options.profiling,
                server_cancel.clone(),
            );
            background.spawn(server);
            self.endpoints.send_replace(Some(bound));
        }
        let gauge = leader_gauge(&self);
        self.factory.start();
        let _informers = StopInformersOnDrop(self.factory.clone());
        // Subscribed before the election starts, so no term is missed.
        let mut leading = self.elector.as_ref().map(|e| e.leading());
        let election_cancel = CancellationToken::new();
        let mut election = JoinSet::new();
        if let Some(elector) = self.elector.clone() {
            let cancel = election_cancel.clone();
            election.spawn(async move { elector.run(cancel).await });
        }
        let (graceful_work, halt) = (CancellationToken::new(), CancellationToken::new());
        let graceful_support = CancellationToken::new();
        let leader_halt = halt.child_token();
        let (mut leader_only, others): (Vec<_>, Vec<_>) =
            self.runnables.drain(..).partition(|r| r.leader_only);
        let (mut tasks, mut support) = (JoinSet::new(), JoinSet::new());
        let stop = Stop {
            graceful: graceful_work.clone(),
            halt: halt.clone(),
        };
        let support_stop = Stop {
            graceful: graceful_support.clone(),
            halt: halt.clone(),
        };
        for runnable in others {
            if runnable.support {
                spawn(&mut support, runnable, &support_stop, &health);
            } else {
                spawn(&mut tasks, runnable, &stop, &health);
            }
        }
        let leader_stop = Stop {
            graceful: graceful_work.clone(),
            halt: leader_halt.clone(),
        };
        let mut leader_tasks = JoinSet::new();
        let mut was_leading = false;
        // The elector's term the leader-only work started under: a watch keeps only the
        // newest value, so a step-down and a new term that land between two looks read as
        // "still leading"; the term tells them apart.
        let term = || self.elector.as_ref().map(LeaderElector::term);
        let mut started_in = None;
        let ending = loop {
            let mut now_leading = leading.as_mut().is_none_or(|rx| *rx.borrow_and_update());
            if now_leading && was_leading && term() != started_in {
                tracing::warn!(
                    "leadership was lost and taken again between two looks; stopping as after any loss"
                );
                now_leading = false;
            }
            if let Some(gauge) = &gauge {
                gauge.set(i64::from(now_leading));
            }
            if now_leading && !was_leading {
                started_in = term();
                for runnable in leader_only.drain(..) {
                    spawn(&mut leader_tasks, runnable, &leader_stop, &health);
                }
            } else if !now_leading && was_leading {
                // Can no longer prove leadership: stop every reconcile now.
                leader_halt.cancel();
                break Ending::LeadershipLost;
            }
            was_leading = now_leading;
            let changed = async {
                match leading.as_mut() {
                    Some(rx) => rx.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = graceful.cancelled() => break Ending::Asked,
                () = force.cancelled() => break Ending::Asked,
                _ = changed => {}
                Some(done) = election.join_next() => {
                    let why = match done {
                        Err(join) if join.is_panic() => "the leader election task panicked".to_owned(),
                        _ => "the leader election task ended".to_owned(),
                    };
                    leader_halt.cancel();
                    health.failed("leader election", why.clone());
                    break Ending::Failed(ManagerError::Runnable { name: "leader election".into(), why });
                }
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    if let Some(failed) = failure(done, &health) { break Ending::Failed(failed) }
                }
                Some(done) = support.join_next(), if !support.is_empty() => {
                    if let Some(failed) = failure(done, &health) { break Ending::Failed(failed) }
                }
                Some(done) = leader_tasks.join_next(), if !leader_tasks.is_empty() => {
                    if let Some(failed) = failure(done, &health) { break Ending::Failed(failed) }
                }
            }
        };
        if let Some(gauge) = &gauge
            && matches!(ending, Ending::LeadershipLost)
        {
            gauge.set(0);
        }
        health.shutting_down();
        let shutdown = Shutdown {
            timeout: self.options.shutdown_timeout,
            graceful_work,
            graceful_support,
            halt,
            force: force.clone(),
            leading: leading.filter(|_| was_leading),
            factory: self.factory.clone(),
            election_cancel,
        };
        let result = shutdown
            .run(
                ending,
                [&mut leader_tasks, &mut tasks, &mut support],
                &mut election,
            )
            .await;
        if let Some(gauge) = &gauge {
            gauge.set(0);
        }
        server_cancel.cancel();
        while background.join_next().await.is_some() {}
        result
    }
}

fn spawn(
    tasks: &mut JoinSet<(String, Result<(), String>)>,
    runnable: Runnable,
    stop: &Stop,
    health: &HealthState,
) {
    let Runnable { name, start, .. } = runnable;
    health.running(&name, true);
    let future = start(stop.clone());
    tasks.spawn(async move { (name, future.await) });
}

/// A task that ended: a failure if it returned an error or panicked (recorded for
/// `/healthz`); a clean end is fine.
fn failure(
    done: Result<(String, Result<(), String>), tokio::task::JoinError>,
    health: &HealthState,
) -> Option<ManagerError> {
    let (name, why) = match done {
        Ok((name, Ok(()))) => {
            health.running(&name, false);
            return None;
        }
        Ok((name, Err(why))) => (name, why),
        Err(join) => ("a task".to_owned(), join.to_string()),
    };
    health.failed(&name, why.clone());
    Some(ManagerError::Runnable { name, why })
}
