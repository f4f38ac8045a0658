//! The manager's lifecycle: start, gate on leadership, watch for failures, shut down in
//! order (controllers drain, informers stop, the Lease is released last, so a new leader
//! never overlaps with draining reconciles).

use std::sync::Arc;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{
    Manager, ManagerError, Runnable,
    health::{HealthState, Probes},
};

/// Cancels `graceful` on the first SIGTERM or SIGINT and `force` on the second.
pub(super) async fn signals(graceful: CancellationToken, force: CancellationToken) {
    for token in [graceful, force] {
        wait_for_signal().await;
        tracing::info!("shutdown signal received");
        token.cancel();
    }
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

/// Aborts a task when dropped: if the manager's future is dropped, its endpoint server and
/// its election die with it (a dropped manager must not keep renewing a Lease).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why the main loop ended.
enum Ending {
    Asked,
    Failed(ManagerError),
}

impl Manager {
    /// Runs until `graceful` is cancelled, then shuts down within the shutdown timeout;
    /// cancelling `force` as well stops at once.
    pub async fn run_until(
        mut self,
        graceful: CancellationToken,
        force: CancellationToken,
    ) -> Result<(), ManagerError> {
        let health = HealthState::default();
        let server_cancel = CancellationToken::new();
        let mut guards = Vec::new();
        if let Some(listener) = self.listener.take() {
            let probes = Arc::new(Probes {
                state: health.clone(),
                factory: self.factory.clone(),
                elector: self.elector.clone(),
                max_failures: self.options.max_watch_failures,
            });
            let server = tokio::spawn(super::server::serve(
                listener,
                probes,
                self.registry.clone(),
                server_cancel.clone(),
            ));
            guards.push(AbortOnDrop(server.abort_handle()));
        }
        self.factory.start();
        let election_cancel = CancellationToken::new();
        let election = self.elector.clone().map(|elector| {
            let cancel = election_cancel.clone();
            tokio::spawn(async move { elector.run(cancel).await })
        });
        if let Some(election) = &election {
            guards.push(AbortOnDrop(election.abort_handle()));
        }
        let work = CancellationToken::new();
        let (mut leader_only, others): (Vec<_>, Vec<_>) =
            self.runnables.drain(..).partition(|r| r.leader_only);
        let mut tasks = JoinSet::new();
        for runnable in others {
            spawn(&mut tasks, runnable, &work, &health);
        }
        let mut leader_tasks = JoinSet::new();
        let mut leading = self.elector.as_ref().map(|e| e.leading());
        if leading.is_none() {
            for runnable in leader_only.drain(..) {
                spawn(&mut leader_tasks, runnable, &work, &health);
            }
        }
        let ending = loop {
            let became = async {
                match leading.as_mut() {
                    Some(rx) => rx.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = graceful.cancelled() => break Ending::Asked,
                changed = became => {
                    let now_leading = changed && leading.as_ref().is_some_and(|rx| *rx.borrow());
                    if now_leading && !leader_only.is_empty() {
                        for runnable in leader_only.drain(..) {
                            spawn(&mut leader_tasks, runnable, &work, &health);
                        }
                    } else if !now_leading && !leader_tasks.is_empty() {
                        // Can no longer prove leadership: stop reconciling this instant.
                        leader_tasks.abort_all();
                        break Ending::Failed(ManagerError::LeadershipLost);
                    }
                }
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    if let Some(failed) = failure(done, &health) { break Ending::Failed(failed) }
                }
                Some(done) = leader_tasks.join_next(), if !leader_tasks.is_empty() => {
                    if let Some(failed) = failure(done, &health) { break Ending::Failed(failed) }
                }
            }
        };
        health.shutting_down();
        work.cancel();
        let drained = async {
            while leader_tasks.join_next().await.is_some() {}
            while tasks.join_next().await.is_some() {}
        };
        tokio::select! {
            () = drained => {}
            () = tokio::time::sleep(self.options.shutdown_timeout) => {
                tracing::warn!("shutdown timed out; dropping what still runs");
            }
            () = force.cancelled() => tracing::warn!("second signal: stopping at once"),
        }
        leader_tasks.abort_all();
        tasks.abort_all();
        self.factory.shutdown().await;
        // Released last: no new leader while this one's reconciles drained.
        election_cancel.cancel();
        if let Some(election) = election {
            let _ = election.await;
        }
        server_cancel.cancel();
        match ending {
            Ending::Asked => Ok(()),
            Ending::Failed(err) => Err(err),
        }
    }
}

fn spawn(
    tasks: &mut JoinSet<(String, Result<(), String>)>,
    runnable: Runnable,
    work: &CancellationToken,
    health: &HealthState,
) {
    let Runnable { name, start, .. } = runnable;
    health.running(&name, true);
    let future = start(work.child_token());
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
