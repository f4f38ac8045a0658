//! The sharder's loop: rounds of observe, list, plan and label, until cancelled.

use std::time::Duration;

use kube::{
    Api, Resource,
    api::{ApiResource, DynamicObject, ListParams, ObjectList, PartialObjectMeta},
};
use tokio_util::sync::CancellationToken;

use super::{Applied, Members, Placement, Sharder};

/// One sharded kind for [`Sharder::run`]: where its objects are listed, and how they are
/// placed.
#[derive(Clone)]
pub struct ShardedKind {
    api: Api<DynamicObject>,
    resource: ApiResource,
    placement: Placement,
}

impl std::fmt::Debug for ShardedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedKind")
            .field("kind", &self.resource.kind)
            .field("placement", &self.placement)
            .finish_non_exhaustive()
    }
}

impl ShardedKind {
    /// The objects of `K` in `namespace` (`None`: every namespace), placed by `placement`.
    pub fn of<K: Resource<DynamicType = ()>>(
        client: kube::Client,
        namespace: Option<&str>,
        placement: Placement,
    ) -> Self {
        let resource = ApiResource::erase::<K>(&());
        let api = match namespace {
            Some(namespace) => Api::namespaced_with(client, namespace, &resource),
            None => Api::all_with(client, &resource),
        };
        Self {
            api,
            resource,
            placement,
        }
    }

    /// The kind's name.
    pub fn kind(&self) -> &str {
        &self.resource.kind
    }

    /// How its objects are placed.
    pub fn placement(&self) -> Placement {
        self.placement
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
    pub async fn round(&self, members: &Members, kind: &ShardedKind) -> Result<Round, kube::Error> {
        let ring = members.observe().await?;
        let params = ListParams::default().match_any();
        let listed: ObjectList<PartialObjectMeta<DynamicObject>> =
            kind.api.list_metadata(&params).await?;
        let moves = self.plan(&ring, &listed.items, &kind.resource, kind.placement);
        let client = kind.api.clone().into_client();
        let applied = self
            .apply::<DynamicObject>(&client, &kind.resource, &moves)
            .await?;
        Ok(Round {
            shards: ring.len(),
            objects: listed.items.len(),
            applied,
        })
    }

    /// Runs a round for each of `kinds` every `every` until `cancel`: a new object is labelled
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
    /// let kinds = [ShardedKind::of::<Deployment>(client, None, Placement::Own)];
    /// Sharder::new("web").run(&members, &kinds, Duration::from_secs(5), CancellationToken::new()).await;
    /// # }
    /// ```
    pub async fn run(
        &self,
        members: &Members,
        kinds: &[ShardedKind],
        every: Duration,
        cancel: CancellationToken,
    ) {
        loop {
            for kind in kinds {
                self.logged_round(members, kind).await;
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    }

    async fn logged_round(&self, members: &Members, kind: &ShardedKind) {
        match self.round(members, kind).await {
            Ok(round) if round.applied != Applied::default() => {
                tracing::debug!(
                    ring = self.ring(),
                    kind = kind.kind(),
                    ?round,
                    "sharding round"
                );
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(ring = self.ring(), kind = kind.kind(), %error, "a sharding round failed; retrying at the next one");
            }
        }
    }
}
