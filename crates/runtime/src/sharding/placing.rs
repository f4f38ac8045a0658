//! The sharder's loop: a metadata cache per sharded kind, each object placed as its event
//! arrives, and every object planned again each tick against the live shards.
//!
//! The caches hold a slim copy of each object's metadata ([`Placed`]: name, namespace,
//! version, the ring's labels and the controller reference), so a sharder of 100k objects
//! holds tens of megabytes and reads nothing but the changes from the API server. A round
//! that listed everything each tick would ask the server for every object's full metadata
//! every few seconds.

use std::{collections::HashSet, sync::Arc, time::Duration};

use futures_util::{StreamExt, future::join_all};
use kube::api::DynamicObject;
use kube_informer::{
    ObjectKey,
    informer::{
        HandlerFuncs, HandlerOptions, HandlerRegistration, InformerOptions, SharedIndexInformer,
    },
    list_watch::ClientListerWatcher,
    meta_namespace_key,
};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{LiveShards, Ring, ShardedKind, Sharder, reads::Shards, slim::Placed};

/// Labels written at once, at most: a rebalance of tens of thousands of objects takes
/// seconds, not minutes, without flooding the API server.
pub(super) const PARALLEL_WRITES: usize = 16;

/// How long one label write may wait for its answer.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the shard Leases are read (one small LIST): a shard's death is seen at most
/// this long after its Lease expired, and a join this long after its Lease appeared.
pub(crate) const OBSERVE_EVERY: Duration = Duration::from_secs(1);

type Meta = Placed;

/// One kind's slim metadata cache, and the keys that changed since they were placed.
struct Watched<'a> {
    kind: &'a ShardedKind,
    informer: SharedIndexInformer<Meta>,
    changed: Arc<Changed>,
    registration: HandlerRegistration<Meta>,
}

/// Dropped with the sharder's future (an election lost, a manager killed): the handler's
/// delivery task is told to end. The informer's own `run` would stop it only when
/// cancelled, and a dropped future is never cancelled.
impl Drop for Watched<'_> {
    fn drop(&mut self) {
        self.registration.close();
    }
}

#[derive(Default)]
struct Changed {
    keys: Mutex<HashSet<ObjectKey>>,
    notify: Notify,
}

impl<'a> Watched<'a> {
    fn new(sharder: &Sharder, kind: &'a ShardedKind) -> Self {
        let lister =
            ClientListerWatcher::<Meta>::new(kind.client(), kind.namespace(), kind.resource())
                .metadata_only();
        let name = format!("sharder-{}-{}", sharder.ring(), kind.kind());
        let informer = SharedIndexInformer::new(lister, InformerOptions::default().name(name));
        let changed = Arc::new(Changed::default());
        let (on_add, on_update) = (changed.clone(), changed.clone());
        // The handler only notes the key: it never waits, so it never holds the informer up.
        let handler = HandlerFuncs::new()
            .on_add(move |meta: Arc<Meta>, _| on_add.note(meta.as_ref()))
            .on_update(move |_, meta: Arc<Meta>| on_update.note(meta.as_ref()));
        let registration = informer.add_event_handler(handler, HandlerOptions::default());
        Self {
            kind,
            informer,
            changed,
            registration,
        }
    }
}

impl Changed {
    fn note(&self, meta: &Meta) {
        if let Ok(key) = meta_namespace_key(meta) {
            self.keys.lock().insert(key);
            self.notify.notify_one();
        }
    }

    fn take(&self) -> HashSet<ObjectKey> {
        std::mem::take(&mut *self.keys.lock())
    }
}

impl Sharder {
    /// Places the objects of `kinds` on the live shards `live` observes until `cancel`:
    /// each object as soon as its event reaches the sharder's metadata cache (a new object
    /// is labelled within a request's time); every object again as soon as the live shards
    /// change (the Leases are read every second, so a dead shard's objects move
    /// within its Lease's duration plus a second), and each `every` in any case. A failed
    /// round is logged and retried at the next one. Run one sharder per ring, under leader
    /// election (its writes are guarded by resourceVersion, so a second one during a
    /// handover only repeats work), with a `live` that has been observing the Leases
    /// before (see [`LiveShards::observe`]) if it can. Given no kinds, it places nothing and
    /// waits for `cancel`.
    ///
    /// ```no_run
    /// # async fn run(client: kube::Client) {
    /// use std::time::Duration;
    /// use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease};
    /// use kube_informer_runtime::{CancellationToken, sharding::{LiveShards, Placement, ShardedKind, Sharder}};
    ///
    /// let live = LiveShards::new(kube::Api::<Lease>::namespaced(client.clone(), "operators"), "web");
    /// let kinds = [ShardedKind::of::<Deployment>(client, None, Placement::Own)];
    /// Sharder::new("web").run(&live, &kinds, Duration::from_secs(5), CancellationToken::new()).await;
    /// # }
    /// ```
    pub async fn run(
        &self,
        live: &LiveShards,
        kinds: &[ShardedKind],
        every: Duration,
        cancel: CancellationToken,
    ) {
        self.run_on(Shards::Observe(live), kinds, every, cancel)
            .await;
    }

    /// [`run`](Self::run), the live shards read from `shards`.
    pub(crate) async fn run_on(
        &self,
        shards: Shards<'_>,
        kinds: &[ShardedKind],
        every: Duration,
        cancel: CancellationToken,
    ) {
        if kinds.is_empty() {
            // Nothing to place yet (a fleet's members not followed yet): still a sharder
            // until `cancel`, not one that returns at once (its caller would take that for
            // the end and give up its election).
            cancel.cancelled().await;
            return;
        }
        let watched: Vec<Watched<'_>> = kinds.iter().map(|k| Watched::new(self, k)).collect();
        // The caches live in this future: dropping it (the sharder lost its election)
        // stops them.
        let caches = join_all(watched.iter().map(|w| w.informer.run(cancel.clone())));
        tokio::select! {
            _ = caches => {}
            () = self.place(shards, &watched, every, &cancel) => {}
        }
    }

    async fn place(
        &self,
        shards: Shards<'_>,
        watched: &[Watched<'_>],
        every: Duration,
        cancel: &CancellationToken,
    ) {
        for w in watched {
            while let Err(error) = w
                .informer
                .wait_for_sync(every.max(Duration::from_secs(10)))
                .await
            {
                tracing::warn!(ring = self.ring(), kind = w.kind.kind(), %error, "the sharder's cache is not synced yet");
            }
        }
        let mut ring: Option<Ring> = None;
        let mut observe = tokio::time::interval(OBSERVE_EVERY.min(every));
        observe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut planned_at = tokio::time::Instant::now();
        let changed = futures_util::stream::select_all(watched.iter().enumerate().map(|(i, w)| {
            let changed = w.changed.clone();
            futures_util::stream::unfold(changed, move |c| async move {
                c.notify.notified().await;
                Some((i, c))
            })
            .boxed()
        }));
        let mut changed = std::pin::pin!(changed);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = observe.tick() => {
                    let observed = match shards.now().await {
                        Ok(observed) => observed,
                        Err(error) => {
                            tracing::warn!(ring = self.ring(), %error, "cannot read the shard Leases; retrying");
                            continue;
                        }
                    };
                    let changed = ring.as_ref() != Some(&observed);
                    if changed {
                        tracing::info!(ring = self.ring(), shards = ?observed.shards().collect::<Vec<_>>(), "live shards");
                    }
                    ring = Some(observed);
                    if !changed && planned_at.elapsed() < every {
                        continue;
                    }
                    planned_at = tokio::time::Instant::now();
                    for w in watched {
                        w.changed.take();
                        let objects = w.informer.store().list();
                        self.place_objects(ring.as_ref(), w, &objects).await;
                    }
                }
                Some(i) = changed.next() => {
                    let w = &watched[i];
                    let store = w.informer.store();
                    let objects: Vec<Arc<Meta>> = w
                        .changed
                        .take()
                        .into_iter()
                        .filter_map(|key| store.get_by_key(key.as_str()))
                        .collect();
                    self.place_objects(ring.as_ref(), w, &objects).await;
                }
            }
        }
    }

    async fn place_objects(&self, ring: Option<&Ring>, w: &Watched<'_>, objects: &[Arc<Meta>]) {
        // Before the first ring is observed, nothing is placed.
        let Some(ring) = ring else { return };
        let kind = w.kind;
        let moves = self.plan_in(
            ring,
            objects.iter().map(|o| &**o),
            kind.resource(),
            kind.placement(),
            kind.member(),
        );
        if moves.is_empty() {
            return;
        }
        match self
            .apply::<DynamicObject>(&kind.client(), kind.resource(), &moves)
            .await
        {
            Ok(applied) => {
                tracing::debug!(ring = self.ring(), kind = kind.kind(), ?applied, "placed");
            }
            Err(error) => {
                tracing::warn!(ring = self.ring(), kind = kind.kind(), %error, "placing objects failed; retrying at the next round");
            }
        }
    }
}
