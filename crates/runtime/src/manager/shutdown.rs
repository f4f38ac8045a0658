//! The manager's shutdown, in order and within one deadline: reconciles drain (then what
//! they stand on, a fleet's members, is asked to stop), then what still runs is cancelled
//! and awaited, informers stop, and the Lease is released last — only once every reconcile
//! has stopped, so a new leader never overlaps one.

use std::time::Duration;

use kube_informer::factory::SharedInformerFactory;
use tokio::{sync::watch, task::JoinSet, time::Instant};
use tokio_util::sync::CancellationToken;

use super::ManagerError;

/// Why the main loop ended.
pub(super) enum Ending {
    /// A signal, or `graceful`.
    Asked,
    /// This replica could no longer prove it leads; its controllers are being halted.
    LeadershipLost,
    /// A task failed.
    Failed(ManagerError),
}

type Tasks = JoinSet<(String, Result<(), String>)>;

/// What the shutdown needs.
pub(super) struct Shutdown {
    pub(super) timeout: Duration,
    pub(super) graceful_work: CancellationToken,
    /// Asked of what the work stands on, once the work has drained.
    pub(super) graceful_support: CancellationToken,
    pub(super) halt: CancellationToken,
    pub(super) force: CancellationToken,
    /// Leadership, while this replica leads (a loss during the drain halts at once).
    pub(super) leading: Option<watch::Receiver<bool>>,
    pub(super) factory: SharedInformerFactory,
    pub(super) election_cancel: CancellationToken,
}

/// The share of the shutdown timeout kept for what follows the drain (at most 5 s).
fn reserve(timeout: Duration) -> Duration {
    (timeout / 5).min(Duration::from_secs(5))
}

async fn join_all(groups: &mut [&mut Tasks]) {
    for tasks in groups {
        while tasks.join_next().await.is_some() {}
    }
}

impl Shutdown {
    pub(super) async fn run(
        mut self,
        ending: Ending,
        tasks: [&mut Tasks; 3],
        election: &mut JoinSet<()>,
    ) -> Result<(), ManagerError> {
        let [leader_tasks, tasks, support] = tasks;
        let mut all = [leader_tasks, tasks, support];
        let end = Instant::now() + self.timeout;
        let drain_until = end - reserve(self.timeout);
        self.graceful_work.cancel();
        // 1. Drain, until the drain deadline, a second signal, or a loss of leadership:
        //    the work first, then what it stands on.
        let drain = async {
            join_all(&mut all[..2]).await;
            self.graceful_support.cancel();
            join_all(&mut all[2..]).await;
        };
        let drained = tokio::select! {
            () = drain => true,
            () = tokio::time::sleep_until(drain_until) => {
                tracing::warn!("shutdown: the drain ran out of time; cancelling what still runs");
                false
            }
            () = self.force.cancelled() => {
                tracing::warn!("shutdown: second signal; stopping at once");
                false
            }
            () = lost(&mut self.leading) => {
                tracing::warn!("shutdown: leadership lost during the drain; cancelling the reconciles");
                false
            }
        };
        // 2. Cancel what still runs, and wait until it has stopped (bounded).
        let stopped = drained || {
            self.halt.cancel();
            tokio::select! {
                () = join_all(&mut all) => true,
                () = tokio::time::sleep_until(end) => false,
                () = self.force.cancelled() => false,
            }
        };
        if !stopped {
            for tasks in &mut all {
                tasks.abort_all();
            }
            if !self.force.is_cancelled() {
                tracing::error!(
                    "shutdown: work still running at the deadline (blocking code?); \
                     the Lease is left to expire instead of being released"
                );
            }
        }
        // 3. Informers.
        let in_time = !self.force.is_cancelled()
            && tokio::time::timeout_at(end, self.factory.shutdown())
                .await
                .is_ok();
        if !in_time {
            self.factory.shutdown_now();
        }
        // 4. The Lease, last, and only once nothing reconciles any more.
        if stopped && !self.force.is_cancelled() {
            self.election_cancel.cancel();
            let released = async { while election.join_next().await.is_some() {} };
            tokio::select! {
                () = released => {}
                () = tokio::time::sleep_until(end) => {
                    tracing::warn!("shutdown: releasing the Lease did not finish by the deadline");
                }
                () = self.force.cancelled() => {}
            }
        }
        election.abort_all();
        while election.join_next().await.is_some() {}
        match ending {
            Ending::Asked => Ok(()),
            Ending::LeadershipLost => Err(ManagerError::LeadershipLost),
            Ending::Failed(err) => Err(err),
        }
    }
}

/// Whether leadership is lost (the receiver says `false`, or the election is gone).
async fn lost(leading: &mut Option<watch::Receiver<bool>>) {
    match leading {
        Some(rx) => {
            let _ = rx.wait_for(|leads| !*leads).await;
        }
        None => std::future::pending().await,
    }
}
