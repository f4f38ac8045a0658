//! [`ShardedKind`]: a kind a sharder places, where its objects are and how they are
//! placed ([`Sharder::run`](super::Sharder::run) keeps a metadata cache of each).

use super::Placement;
use kube::{
    Api, Resource,
    api::{ApiResource, DynamicObject},
};

/// One sharded kind for [`Sharder::run`](super::Sharder::run): where its objects are
/// listed, and how they are placed.
#[derive(Clone)]
pub struct ShardedKind {
    api: Api<DynamicObject>,
    namespace: Option<String>,
    resource: ApiResource,
    placement: Placement,
    /// The fleet member its objects are in, and whether the member is pinned to one shard.
    member: Option<(String, bool)>,
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
            member: None,
        }
    }

    /// These objects are in fleet member `cluster` (its client is the one given): each is
    /// placed by [`ShardKey::in_member`](super::ShardKey::in_member), so a ring splits a
    /// fleet's `(cluster, object)` pairs, or with `pinned` gives each member whole to one
    /// shard.
    #[must_use]
    pub(crate) fn in_member(mut self, cluster: &str, pinned: bool) -> Self {
        self.member = Some((cluster.to_owned(), pinned));
        self
    }

    /// The fleet member its objects are in, and whether pinned (see
    /// [`in_member`](Self::in_member)).
    pub(crate) fn member(&self) -> Option<(&str, bool)> {
        self.member.as_ref().map(|(c, p)| (c.as_str(), *p))
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
    pub(crate) fn resource(&self) -> &ApiResource {
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
