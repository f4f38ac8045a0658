//! A replica's half: check in, serve the slots the table names it holder of, narrow and
//! hand over the slots moving away.

use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{SlotSet, TableStore};

/// How long a round waits for the reconciles of slots moving away before it goes on.
const NARROW_WAIT: Duration = Duration::from_secs(10);

/// What serving slots means to a replica: its sharded informers select them, its reconciles
/// run for their keys.
pub(crate) trait SlotServer: Send + Sync {
    /// Starts serving `slots` as well.
    fn widen(&self, slots: SlotSet) -> BoxFuture<'_, ()>;
    /// Stops serving `slots`; returns once no reconcile of their keys runs or can start.
    fn narrow(&self, slots: SlotSet) -> BoxFuture<'_, ()>;
    /// Stops serving everything, at once (the shard Lease is lost, or the replica stops).
    fn halt(&self);
}

/// Serves `replica`'s slots through `server`, reading the table each `period`, for as long
/// as the future runs: run it only while the replica holds its shard Lease, and call
/// [`SlotServer::halt`] when it is dropped. Serves nothing before its check-in has been
/// written. A failed request is retried at the next period; what is served stays served
/// meanwhile (no one else can take it while this replica's Lease lives).
pub(crate) async fn serve_slots(
    tables: &TableStore,
    replica: &str,
    server: &dyn SlotServer,
    period: Duration,
) {
    let mut serving = SlotSet::EMPTY;
    let mut checked_in = false;
    loop {
        if let Err(error) = round(tables, replica, server, &mut serving, &mut checked_in).await {
            tracing::debug!(%error, replica, "slot table round failed; again next period");
        }
        tokio::time::sleep(period).await;
    }
}

async fn round(
    tables: &TableStore,
    replica: &str,
    server: &dyn SlotServer,
    serving: &mut SlotSet,
    checked_in: &mut bool,
) -> Result<(), kube::Error> {
    if !*checked_in {
        let table = tables.check_in(replica).await?;
        *checked_in = true;
        let mine = table.serving(replica);
        server.widen(mine).await;
        *serving = mine;
        return Ok(());
    }
    let read = tables.read().await?;
    let mine = read.table.serving(replica);
    // Gained slots first: a reconcile that hangs where a slot leaves must not keep a dead
    // replica's slots unserved.
    let new = mine.minus(*serving);
    if !new.is_empty() {
        server.widen(new).await;
        *serving = serving.union(new);
    }
    let away = serving.minus(mine);
    if !away.is_empty() {
        // Bounded: the rest of the round goes on, and the next round waits again.
        if tokio::time::timeout(NARROW_WAIT, server.narrow(away))
            .await
            .is_err()
        {
            tracing::warn!(
                replica,
                "reconciles of slots moving away still run; handing over later"
            );
            return Ok(());
        }
        *serving = serving.minus(away);
    }
    let leaving = read.table.leaving(replica).minus(*serving);
    if !leaving.is_empty() {
        // Not served (narrowed above, or never widened): given to their next holders.
        tables.hand_over(&read, replica, leaving).await?;
    }
    Ok(())
}
