//! The sharder's loop: rounds of observe, list, plan and label, until cancelled.

use std::time::Duration;

use kube::{
    Api, Resource,
    api::{ListParams, ObjectList, PartialObjectMeta},
};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::{Applied, Members, Placement, Sharder};

/// One sharded kind for [`Sharder::run`]: where its objects are listed, and how they are
/// placed.
pub struct ShardedKind<K: Resource> {
    api: Api<K>,
    placement: Placement,
}

impl<K: Resource> ShardedKind<K> {
    /// The objects of `api` (`Api::all` for every namespace), placed by `placement`.
    pub fn new(api: Api<K>, placement: Placement) -> Self {
        Self { api, placement }
    }
}

/// What one round did, for logs and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Round {
    /// Live shards seen.
    pub shards: usize,
    /// Objects looked at.
    pub objects: usize,
    /// Labels written, and objects that changed under the plan.
    pub applied: Applied,
}

impl Sharder {
    /// One round for `kind`: the live shards from `members`, every object's metadata (one
    /// LIST, served from the API server's cache), and the labels they need.
    pub async fn round<K>(
        &self,
        members: &Members,
        kind: &ShardedKind<K>,
    ) -> Result<Round, kube::Error>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let ring = members.observe().await?;
        let params = ListParams::default().match_any();
        let listed: ObjectList<PartialObjectMeta<K>> = kind.api.list_metadata(&params).await?;
        let moves = self.plan(&ring, &listed.items, &(), kind.placement);
        let client = kind.api.clone().into_client();
        let applied = self.apply::<K>(&client, &(), &moves).await?;
        Ok(Round {
            shards: ring.len(),
            objects: listed.items.len(),
            applied,
        })
    }

    /// Runs a round for `kind` every `every` until `cancel`: a new object is labelled
    /// within `every` (plus one LIST), a dead shard's objects within its Lease's duration
    /// plus `every`. A failed round is logged and retried at the next tick. Run one sharder
    /// per ring, under leader election (its writes are guarded, so a second one during a
    /// handover only repeats work).
    ///
    /// ```no_run
    /// # async fn run(client: kube::Client) {
    /// use std::time::Duration;
    /// use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease};
    /// use kube_informer_runtime::{CancellationToken, sharding::{Members, Placement, ShardedKind, Sharder}};
    ///
    /// let members = Members::new(kube::Api::<Lease>::namespaced(client.clone(), "operators"), "web");
    /// let kind = ShardedKind::new(kube::Api::<Deployment>::all(client), Placement::Own);
    /// Sharder::new("web").run(&members, &kind, Duration::from_secs(5), CancellationToken::new()).await;
    /// # }
    /// ```
    pub async fn run<K>(
        &self,
        members: &Members,
        kind: &ShardedKind<K>,
        every: Duration,
        cancel: CancellationToken,
    ) where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    {
        loop {
            match self.round(members, kind).await {
                Ok(round) if round.applied != Applied::default() => {
                    tracing::debug!(ring = self.ring(), ?round, "sharding round");
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(ring = self.ring(), %error, "a sharding round failed; retrying at the next one");
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    }
}
