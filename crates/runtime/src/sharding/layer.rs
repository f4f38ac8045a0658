//! The sharding layer as a controller applies it: [`Shard`], the one part of sharding
//! `controller/` uses. A sharded controller reads each kind it shards through
//! [`Shard::read`] (its informer selects the shard's label, and the kind is recorded for
//! the sharder to place) and reconciles through [`Shard::reconcile`] (the shard's half of
//! the protocol around the unchanged reconcile).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use kube::{Resource, api::ApiResource};
use kube_informer::{
    factory::{InformerSpec, SharedInformerFactory},
    list_watch::ShardField,
};

use super::{
    Placement, ShardedKind,
    reconcile::reconcile_sharded_with,
    shard_selectors,
    slots::{RangeShare, reconcile_in_slots},
};
use crate::reconcile::{Action, Cached, Reconciler};

/// One shard of one ring, as a controller is sharded
/// ([`ControllerOptions::sharded`](crate::ControllerOptions::sharded)).
#[derive(Debug, Clone)]
pub(crate) struct Shard {
    ring: String,
    shard: String,
    /// Range mode: the replica's slots (else label mode).
    ranges: Option<Arc<RangeShare>>,
}

impl PartialEq for Shard {
    fn eq(&self, other: &Self) -> bool {
        let same_ranges = match (&self.ranges, &other.ranges) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        self.ring == other.ring && self.shard == other.shard && same_ranges
    }
}

impl Eq for Shard {}

impl Shard {
    /// Label mode.
    pub(crate) fn new(ring: String, shard: String) -> Self {
        Self {
            ring,
            shard,
            ranges: None,
        }
    }

    /// Range mode, serving `ranges`' slots.
    pub(crate) fn in_ranges(ring: String, shard: String, ranges: Arc<RangeShare>) -> Self {
        Self {
            ring,
            shard,
            ranges: Some(ranges),
        }
    }

    /// A kind `T` read sharded, placed as `placement` says: `spec` also selecting the
    /// shard's label, and what the sharder must place of it — in the spec's namespaces
    /// (else the factory's) when limited to some, so that a namespaced operator needs no
    /// cluster-wide access; everywhere otherwise.
    pub(crate) fn read<T>(
        &self,
        factory: &SharedInformerFactory,
        spec: InformerSpec<T>,
        resource: &ApiResource,
        namespaced: bool,
        placement: Placement,
    ) -> (InformerSpec<T>, Vec<ShardedKind>)
    where
        T: Resource + Clone + Send + Sync + 'static,
    {
        if let Some(ranges) = &self.ranges {
            // The server lists each replica's share; nothing is written, nothing placed.
            // Children follow their owner only when namespaces are hashed (a namespace's
            // objects share a slot); with uids they are read whole.
            let follows = match placement {
                Placement::Own => true,
                Placement::Controller => ranges.field() == ShardField::Namespace,
            };
            let spec = match follows {
                true => {
                    let selectors = spec.current_selectors().clone();
                    spec.selectors(selectors.live_shards(ranges.informers().clone()))
                }
                false => spec,
            };
            return (spec, Vec::new());
        }
        let client = factory.client();
        let namespaces = spec
            .current_selectors()
            .namespaces()
            .filter(|n| !n.is_empty())
            .or_else(|| factory.namespaces());
        let kinds = match namespaces {
            Some(namespaces) if namespaced => namespaces
                .iter()
                .map(|ns| ShardedKind::dynamic(client.clone(), Some(ns), resource, placement))
                .collect(),
            _ => vec![ShardedKind::dynamic(
                client.clone(),
                None,
                resource,
                placement,
            )],
        };
        let label = shard_selectors(&self.ring, &self.shard);
        let spec = spec.and_labels(label.label_selector().unwrap_or_default());
        (spec, kinds)
    }

    /// `reconcile`, wrapped in the shard's half of the protocol (see
    /// [`reconcile_sharded`](super::reconcile_sharded)).
    pub(crate) fn reconcile<K, Ctx, R>(
        &self,
        client: kube::Client,
        dyntype: K::DynamicType,
        reconcile: R,
    ) -> impl Reconciler<K, Ctx, Error = R::Error>
    where
        K: Resource + Clone + Send + Sync + 'static,
        K::DynamicType: Clone + Send + Sync + 'static,
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
    {
        type Call<K, Ctx, E> =
            Arc<dyn Fn(Cached<K>, Arc<Ctx>) -> BoxFuture<'static, Result<Action, E>> + Send + Sync>;
        // Already reconcile functions: the blanket impl makes them `Reconciler`s.
        let call: Call<K, Ctx, R::Error> = match &self.ranges {
            Some(ranges) => {
                let resource = ApiResource::erase::<K>(&dyntype);
                Arc::new(reconcile_in_slots(
                    ranges.clone(),
                    client,
                    resource,
                    reconcile,
                ))
            }
            None => Arc::new(reconcile_sharded_with(
                self.ring.clone(),
                self.shard.clone(),
                client,
                dyntype,
                reconcile,
            )),
        };
        move |cached: Cached<K>, ctx: Arc<Ctx>| call(cached, ctx)
    }
}
