//! A [`Controller`] as one member of a [fleet](crate::fleet): its handlers feed the fleet's
//! queue (through a [`KeySink`](super::sink::KeySink)), and the fleet's workers call its
//! worker — so a fleet reconcile gets everything a plain one does (relations, predicates,
//! read-your-writes, deadlines, metrics, triggers in its span, and the shard's half of the
//! sharding protocol when sharded).

use std::sync::Arc;

use futures_util::{FutureExt as _, future::BoxFuture};
use kube::Resource;
use kube_informer::{ObjectKey, workqueue::Requeue};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{Cached, Controller, Reconciler, attachments::Attachments, worker};

/// One reconcile of a key (its attempt given), as the member's worker runs it.
type Call = Box<dyn Fn(ObjectKey, u32) -> BoxFuture<'static, Requeue> + Send + Sync>;

/// A member's controller, started: its handlers attached, its feeds running, its worker
/// ready. Dropped, its handlers close and its feeds are aborted.
pub(crate) struct Running {
    call: Call,
    attached: Attachments,
    feeds: JoinSet<()>,
}

/// A reconcile shared by every member (the sharding wrapper takes one by value).
struct Shared<R>(Arc<R>);

impl<K, Ctx, R: Reconciler<K, Ctx>> Reconciler<K, Ctx> for Shared<R> {
    type Error = R::Error;
    type Future = R::Future;

    fn reconcile(&self, object: Cached<K>, ctx: Arc<Ctx>) -> Self::Future {
        self.0.reconcile(object, ctx)
    }
}

impl<K> Controller<K>
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
{
    /// Attaches its handlers, starts its factory and feeds, and waits for its caches
    /// until `disengaged`; each time a cache misses the deadline, it says so and waits on
    /// (the member stays out of the fleet's queue meanwhile). `None`: disengaged first.
    pub(crate) async fn start_member<Ctx, R>(
        mut self,
        reconcile: Arc<R>,
        error_policy: worker::SharedPolicy<K, R::Error, Ctx>,
        ctx: Arc<Ctx>,
        cluster: Arc<str>,
        disengaged: &CancellationToken,
    ) -> Option<Running>
    where
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
    {
        let attached = self.attach();
        let feeds = self.start_feeds();
        self.factory.start();
        for wait in &self.syncs {
            loop {
                tokio::select! {
                    () = disengaged.cancelled() => return None,
                    synced = wait(self.cache_sync_timeout) => match synced {
                        Ok(()) => break,
                        Err(error) => tracing::warn!(
                            controller = %self.name, %cluster, %error,
                            "a member's cache has not synced; its keys wait"
                        ),
                    },
                }
            }
        }
        let cluster = Some(cluster);
        let call: Call = match self.options.shard.clone() {
            Some(shard) => {
                let client = self.factory.client().clone();
                let sharded = shard.reconcile(client, self.dyntype.clone(), Shared(reconcile));
                let worker = self.worker(Arc::new(sharded), error_policy, ctx, cluster);
                Box::new(move |key, attempt| worker.call(key, attempt).boxed())
            }
            None => {
                let worker = self.worker(reconcile, error_policy, ctx, cluster);
                Box::new(move |key, attempt| worker.call(key, attempt).boxed())
            }
        };
        Some(Running {
            call,
            attached,
            feeds,
        })
    }
}

impl Running {
    /// One reconcile of `key` in this member, as a plain controller's worker runs it.
    pub(crate) fn reconcile(&self, key: ObjectKey, attempt: u32) -> BoxFuture<'static, Requeue> {
        (self.call)(key, attempt)
    }

    /// Detaches its handlers (waiting until none runs) and stops its feeds.
    pub(crate) async fn stop(mut self) {
        self.feeds.abort_all();
        while self.feeds.join_next().await.is_some() {}
        self.attached.remove().await;
    }
}
