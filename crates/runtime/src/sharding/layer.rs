//! The sharding layer as a controller applies it: [`Shard`], the one part of sharding
//! `controller/` uses. A sharded controller reads each kind it shards through
//! [`Shard::read`] (its informer selects the shard's label, and the kind is recorded for
//! the sharder to place) and reconciles through [`Shard::reconcile`] (the shard's half of
//! the protocol around the unchanged reconcile).

use kube::{Resource, api::ApiResource};
use kube_informer::factory::{InformerSpec, SharedInformerFactory};

use super::{Placement, ShardedKind, reconcile::reconcile_sharded_with, shard_selectors};
use crate::reconcile::Reconciler;

/// One shard of one ring, as a controller is sharded
/// ([`ControllerOptions::sharded`](crate::ControllerOptions::sharded)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shard {
    ring: String,
    shard: String,
}

impl Shard {
    pub(crate) fn new(ring: String, shard: String) -> Self {
        Self { ring, shard }
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
        // Already a reconcile function: the blanket impl makes it a `Reconciler`.
        reconcile_sharded_with(
            self.ring.clone(),
            self.shard.clone(),
            client,
            dyntype,
            reconcile,
        )
    }
}
