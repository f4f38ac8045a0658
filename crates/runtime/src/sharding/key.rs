//! The key an object is sharded by: its own, or its controller's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

/// What the ring hashes to place an object: `group/kind/namespace/name`, without the
/// version, so an object keeps its shard when its API version changes.
///
/// An object a controller reconciles is placed by its own key ([`ShardKey::of`]); the
/// children it owns are placed by their controller's key ([`ShardKey::of_controller`]), so
/// an owner and its children always land on the same shard and one replica sees a whole
/// family. The format is the kubernetes-controller-sharding project's, so both place an
/// object alike.
///
/// ```
/// use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
/// use kube_informer_runtime::sharding::ShardKey;
///
/// let mut web = Deployment::default();
/// web.metadata.namespace = Some("shop".into());
/// web.metadata.name = Some("web".into());
/// let key = ShardKey::of(&web, &()).unwrap();
/// assert_eq!(key.as_str(), "apps/Deployment/shop/web");
///
/// let mut child = ReplicaSet::default();
/// child.metadata.namespace = Some("shop".into());
/// child.metadata.name = Some("web-5d8f".into());
/// child.metadata.owner_references = Some(vec![OwnerReference {
///     api_version: "apps/v1".into(),
///     kind: "Deployment".into(),
///     name: "web".into(),
///     uid: "1".into(),
///     controller: Some(true),
///     ..Default::default()
/// }]);
/// assert_eq!(ShardKey::of_controller(&child.metadata), Some(key));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardKey(String);

impl ShardKey {
    /// The key of `object` itself; `None` when it has no name yet (an object created with
    /// `generateName` is placed once the API server has named it).
    pub fn of<K: Resource>(object: &K, dynamic_type: &K::DynamicType) -> Option<Self> {
        let meta = object.meta();
        let name = meta.name.as_deref().filter(|n| !n.is_empty())?;
        Some(Self::from_parts(
            &K::group(dynamic_type),
            &K::kind(dynamic_type),
            meta.namespace.as_deref().unwrap_or_default(),
            name,
        ))
    }

    /// The key of the object's controller (the owner reference with `controller: true`),
    /// which is the controller's own [`ShardKey::of`]; `None` when it has none.
    pub fn of_controller(meta: &ObjectMeta) -> Option<Self> {
        let owner = controller_of(meta)?;
        let group = owner
            .api_version
            .rsplit_once('/')
            .map_or("", |(group, _version)| group);
        Some(Self::from_parts(
            group,
            &owner.kind,
            meta.namespace.as_deref().unwrap_or_default(),
            &owner.name,
        ))
    }

    /// A key from its parts (`group` is empty for the core group).
    fn from_parts(group: &str, kind: &str, namespace: &str, name: &str) -> Self {
        Self(format!("{group}/{kind}/{namespace}/{name}"))
    }

    /// The key of this object in fleet member `cluster`: `cluster:key`, so that the
    /// `(cluster, object)` pairs of a fleet spread over the ring; or, `pinned`, the member's
    /// name alone, so that every object of the member lands on one shard.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube_informer_runtime::sharding::ShardKey;
    ///
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.namespace = Some("shop".into());
    /// cm.metadata.name = Some("web".into());
    /// let key = ShardKey::of(&cm, &()).unwrap();
    /// assert_eq!(key.clone().in_member("east", false).as_str(), "east:/ConfigMap/shop/web");
    /// assert_eq!(key.in_member("east", true).as_str(), "east");
    /// ```
    #[must_use]
    pub fn in_member(self, cluster: &str, pinned: bool) -> Self {
        if pinned {
            Self(cluster.to_owned())
        } else {
            Self(format!("{cluster}:{}", self.0))
        }
    }

    /// The key as the ring hashes it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ShardKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|owner| owner.controller == Some(true))
}

/// How an object's [`ShardKey`] is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// By its own key: the objects a controller reconciles.
    Own,
    /// By its controller owner's key, so it lands with its owner: the children a
    /// controller owns. An object without a controller is not placed.
    Controller,
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    use super::*;

    fn owner(
        api_version: &str,
        kind: &str,
        name: &str,
        controller: Option<bool>,
    ) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            controller,
            ..Default::default()
        }
    }

    #[test]
    fn core_cluster_scoped_and_unnamed_objects() {
        let mut cm = ConfigMap::default();
        assert_eq!(ShardKey::of(&cm, &()), None, "no name yet");
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.name = Some("c".into());
        assert_eq!(ShardKey::of(&cm, &()).unwrap().as_str(), "/ConfigMap/ns/c");
        let mut ns = Namespace::default();
        ns.metadata.name = Some("team".into());
        assert_eq!(ShardKey::of(&ns, &()).unwrap().as_str(), "/Namespace//team");
    }

    #[test]
    fn only_the_controller_reference_counts_and_the_version_does_not() {
        let mut meta = ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("child".into()),
            owner_references: Some(vec![
                owner("v1", "ConfigMap", "not-a-controller", None),
                owner("example.com/v1", "Widget", "also-not", Some(false)),
            ]),
            ..Default::default()
        };
        assert_eq!(ShardKey::of_controller(&meta), None);
        meta.owner_references.as_mut().unwrap().push(owner(
            "example.com/v2beta1",
            "Widget",
            "w",
            Some(true),
        ));
        let v2 = ShardKey::of_controller(&meta).unwrap();
        assert_eq!(v2.as_str(), "example.com/Widget/ns/w");
        meta.owner_references.as_mut().unwrap()[2].api_version = "example.com/v1".into();
        assert_eq!(ShardKey::of_controller(&meta), Some(v2));
        meta.owner_references.as_mut().unwrap()[2] = owner("v1", "Service", "s", Some(true));
        assert_eq!(
            ShardKey::of_controller(&meta).unwrap().as_str(),
            "/Service/ns/s"
        );
    }
}
