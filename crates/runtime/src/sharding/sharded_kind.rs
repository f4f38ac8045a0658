//! The kinds a sharder places, and one round over a kind from a LIST (for a ring run by
//! hand; [`Sharder::run`] keeps a cache instead, see `placing.rs`).

use super::{Applied, Members, Placement, Sharder};
use kube::{
    Api, Resource,
    api::{ApiResource, DynamicObject, ListParams, ObjectList, PartialObjectMeta},
};

/// One sharded kind for [`Sharder::run`]: where its objects are listed, and how they are
/// placed.
#[derive(Clone)]
pub struct ShardedKind {
    api: Api<DynamicObject>,
    namespace: Option<String>,
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
        Self::dynamic(client, namespace, &ApiResource::erase::<K>(&()), placement)
    }

    /// [`of`](Self::of) for a kind known at run time.
    pub fn dynamic(
        client: kube::Client,
        namespace: Option<&str>,
        resource: &ApiResource,
        placement: Placement,
    ) -> Self {
        let api = match namespace {
            Some(namespace) => Api::namespaced_with(client, namespace, resource),
            None => Api::all_with(client, resource),
        };
        Self {
            api,
            namespace: namespace.map(str::to_owned),
            resource: resource.clone(),
            placement,
        }
    }

    /// The client its objects are read and labelled through.
    pub(super) fn client(&self) -> kube::Client {
        self.api.clone().into_client()
    }

    /// The namespace its objects are placed in (`None`: all).
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The API resource.
    pub(super) fn resource(&self) -> &ApiResource {
        &self.resource
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
}
