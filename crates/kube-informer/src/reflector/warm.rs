//! Starting from a snapshot: one `limit=1` read for the server's current version, the
//! snapshot's objects as the first sync, then the watch from the snapshot's version; caught
//! up once the watch reaches the version the server had.

use std::sync::Arc;

use kube::{Resource, api::ListParams};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{ListFrom, Reflector, Run, Stop, list::ListFailure};
use crate::{ReadOnlyStore, ResourceVersion, list_watch::ListerWatcher};

/// The server timeout of a warm start's watches until caught up: kube-apiserver's bookmark
/// two seconds before the deadline then comes a second after the watch opens.
pub(super) const CATCH_UP_WATCH: std::time::Duration = std::time::Duration::from_secs(3);

/// Catch-up watches before giving up on the snapshot and relisting (about a minute): a
/// server that sends no bookmarks (an aggregated API, a resource without a watch cache)
/// would otherwise keep a warm informer unsynced for as long as its collection is quiet.
const CATCH_UP_WATCHES: u32 = 20;

/// Whether a reflector's cache is as fresh as a cold start would have made it: at once for
/// a cold start, and for a warm one once its watch reached the server's version at start
/// and the cache has applied what the watch delivered up to there.
#[derive(Debug)]
pub(crate) struct CaughtUp {
    /// The version the reflector's sink was at when it caught up (empty: the first sync,
    /// whatever its version); `None` until then.
    at: Mutex<Option<String>>,
    changed: Arc<Notify>,
    /// The namespace of the reflector's watch, for a cache fed by one per namespace.
    namespace: Option<String>,
}

impl CaughtUp {
    /// Not caught up yet; `changed` is woken when the reflector (of `namespace`'s watch,
    /// for a cache fed by one per namespace) catches up.
    pub(crate) fn pending(changed: Arc<Notify>, namespace: Option<String>) -> Arc<Self> {
        Arc::new(Self {
            at: Mutex::new(None),
            changed,
            namespace,
        })
    }

    /// Whether the reflector has caught up and `store` has applied everything up to there.
    pub(crate) fn applied_in<K>(&self, store: &ReadOnlyStore<K>) -> bool {
        match self.at.lock().as_deref() {
            None => false,
            Some("") => true,
            Some(at) => {
                let cached = match &self.namespace {
                    Some(ns) => store.resource_version_in(ns).unwrap_or_default(),
                    None => store.resource_version(),
                };
                let (at, cached) = (
                    at.parse::<ResourceVersion>(),
                    cached.parse::<ResourceVersion>(),
                );
                matches!((at, cached), (Ok(at), Ok(cached)) if cached >= at)
            }
        }
    }

    fn set(&self, at: &str) {
        let mut current = self.at.lock();
        if current.is_none() {
            *current = Some(at.to_owned());
            drop(current);
            self.changed.notify_waiters();
        }
    }
}

/// A snapshot to start from.
pub(crate) struct WarmStart<K> {
    pub(crate) objects: Vec<K>,
    pub(crate) resource_version: String,
    pub(crate) caught_up: Arc<CaughtUp>,
}

/// A warm start's watch, until it reaches `target`.
pub(super) struct CatchingUp {
    target: ResourceVersion,
    signal: Arc<CaughtUp>,
    /// Watches opened while catching up.
    watches: u32,
}

impl CatchingUp {
    /// Whether a sink at `resource_version` has reached the target.
    pub(super) fn reaches(&self, resource_version: &str) -> bool {
        resource_version
            .parse::<ResourceVersion>()
            .is_ok_and(|at| at >= self.target)
    }

    /// Caught up, with the sink at `resource_version` (or past it: a relist).
    pub(super) fn signal(self, resource_version: &str) {
        tracing::debug!(at = resource_version, target = %self.target, "caught up with the server");
        self.signal.set(resource_version);
    }
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// Hands `warm` to the sink as the first sync, when the server can resume from it.
    /// `Ok(true)`: watch from it now; `Ok(false)`: refused, sync cold.
    pub(super) async fn warm_start(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
        warm: WarmStart<K>,
    ) -> Result<bool, Stop> {
        let server = loop {
            let read = tokio::select! {
                () = cancel.cancelled() => return Err(Stop::Cancelled),
                read = self.server_version() => read,
            };
            match read {
                Ok(version) => break version,
                Err(failure) => {
                    let reaction = self.report_list_failure(failure);
                    if let Stop::Cancelled = self.wait_for(cancel, run, reaction).await {
                        return Err(Stop::Cancelled);
                    }
                }
            }
        };
        self.heard.heard(&server, true);
        let refused = match (
            warm.resource_version.parse::<ResourceVersion>(),
            server.parse::<ResourceVersion>(),
        ) {
            (Ok(snapshot), Ok(now)) if snapshot <= now => None,
            (Ok(_), Ok(_)) => Some(format!(
                "its resourceVersion {} is ahead of the server's {server}: another server, or \
                 its etcd restored from a backup",
                warm.resource_version
            )),
            _ => Some(format!(
                "resourceVersions {:?} (snapshot) and {server:?} (server) are not comparable",
                warm.resource_version
            )),
        };
        if let Some(why) = refused {
            tracing::warn!(reflector = %self.name, "snapshot refused, starting cold: {why}");
            warm.caught_up.set("");
            return Ok(false);
        }
        let objects = self.keyed(warm.objects);
        self.replace(objects, &warm.resource_version);
        self.set_synced(run, warm.resource_version);
        run.list_from = ListFrom::LastSynced;
        self.shared.health.lock().synced();
        let catching_up = CatchingUp {
            target: server.parse().expect("checked above"),
            signal: warm.caught_up,
            watches: 0,
        };
        // The replace sets the cache's version: nothing to queue behind it.
        match catching_up.reaches(&run.resource_version) {
            true => catching_up.signal(&run.resource_version),
            false => run.catching_up = Some(catching_up),
        }
        Ok(true)
    }

    /// Before each catch-up watch after the first: one more `limit=1` read. A bookmark
    /// tells a watch it has caught up only once the server's cache of this resource has
    /// moved past the newest change of the resource (in any namespace); a consistent read
    /// makes the cache ask etcd for its progress when etcd is ahead (any write anywhere:
    /// leases renew every few seconds in a cluster), which moves it. Without it, a quiet
    /// resource's cache may not move for minutes. A failed read is only logged: the watch
    /// is what matters.
    pub(super) async fn nudge_catching_up(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
    ) -> Result<(), Stop> {
        let Some(catching_up) = run.catching_up.as_mut() else {
            return Ok(());
        };
        catching_up.watches += 1;
        if catching_up.watches == 1 {
            return Ok(()); // the read before the warm start did this
        }
        if catching_up.watches > CATCH_UP_WATCHES {
            tracing::warn!(
                reflector = %self.name,
                "no event or bookmark reached the server's version {} in {CATCH_UP_WATCHES} \
                 watches: relisting instead of resuming from the snapshot",
                catching_up.target
            );
            return Err(Stop::Resync);
        }
        tokio::select! {
            () = cancel.cancelled() => Err(Stop::Cancelled),
            read = self.server_version() => {
                match read {
                    Ok(version) => self.heard.heard(&version, true),
                    Err(ListFailure::Client(err)) => {
                        tracing::debug!(reflector = %self.name, "a read while catching up failed: {err}");
                    }
                    Err(ListFailure::TimedOut(_)) => {}
                }
                Ok(())
            }
        }
    }

    /// The server's current version of this collection: a consistent read of one object.
    pub(super) async fn server_version(&self) -> Result<String, ListFailure> {
        let params = ListParams {
            limit: Some(1),
            ..self.selectors_list()
        };
        let page = self.list_page(&params, None).await?;
        Ok(page.metadata.resource_version.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests;
