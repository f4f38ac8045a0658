//! The resource types the server knows: group, version, plural, kind, scope.

use std::fmt;

/// A group/version/resource, e.g. `apps/v1 deployments` (the core group is `""`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvr {
    /// The API group; `""` for the core group.
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
    /// The plural resource name, e.g. `pods`.
    pub resource: String,
}

impl Gvr {
    /// `group`/`version` `resource`.
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
        }
    }

    /// A core (`v1`) resource, e.g. `Gvr::core("pods")`.
    pub fn core(resource: &str) -> Self {
        Self::new("", "v1", resource)
    }

    /// `v1` or `group/version`, as `apiVersion` fields spell it.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for Gvr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version(), self.resource)
    }
}

/// A registered resource type.
#[derive(Clone, Debug)]
pub struct ResourceType {
    /// Where it is served.
    pub gvr: Gvr,
    /// Its kind, e.g. `Pod`.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// `kubectl` short names, e.g. `po`.
    pub short_names: Vec<String>,
    /// Whether `status` is a subresource: writes to the object keep its status, and only
    /// writes to `.../status` change it (as for pods and deployments; not for configmaps).
    pub status_subresource: bool,
    /// Whether `scale` is a subresource (`autoscaling/v1` `Scale` over `spec.replicas`, as
    /// for Deployments, ReplicaSets and StatefulSets).
    pub scale_subresource: bool,
}

impl ResourceType {
    /// A namespaced type.
    pub fn namespaced(gvr: Gvr, kind: &str) -> Self {
        Self {
            gvr,
            kind: kind.to_owned(),
            namespaced: true,
            short_names: Vec::new(),
            status_subresource: false,
            scale_subresource: false,
        }
    }

    /// A cluster-scoped type.
    pub fn cluster_scoped(gvr: Gvr, kind: &str) -> Self {
        Self {
            namespaced: false,
            ..Self::namespaced(gvr, kind)
        }
    }

    /// Adds `kubectl` short names.
    #[must_use]
    pub fn short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Serves `status` as a subresource (see [`ResourceType::status_subresource`]).
    ///
    /// ```
    /// use fake_apiserver::{Gvr, ResourceType};
    ///
    /// let widgets = ResourceType::namespaced(Gvr::new("example.com", "v1", "widgets"), "Widget")
    ///     .with_status_subresource();
    /// assert!(widgets.status_subresource);
    /// ```
    #[must_use]
    pub fn with_status_subresource(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    /// Serves `scale` as a subresource (see [`ResourceType::scale_subresource`]); the
    /// object's `spec.replicas` is what it scales.
    #[must_use]
    pub fn with_scale_subresource(mut self) -> Self {
        self.scale_subresource = true;
        self
    }

    /// The list kind, e.g. `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The singular name kubectl shows, e.g. `pod`.
    pub fn singular(&self) -> String {
        self.kind.to_lowercase()
    }
}

/// The types every server starts with.
pub(crate) fn builtins() -> Vec<ResourceType> {
    let core = Gvr::core;
    vec![
        ResourceType::namespaced(core("pods"), "Pod")
            .short_names(&["po"])
            .with_status_subresource(),
        ResourceType::namespaced(core("configmaps"), "ConfigMap").short_names(&["cm"]),
        ResourceType::namespaced(core("secrets"), "Secret"),
        ResourceType::namespaced(core("serviceaccounts"), "ServiceAccount").short_names(&["sa"]),
        ResourceType::namespaced(core("services"), "Service")
            .short_names(&["svc"])
            .with_status_subresource(),
        ResourceType::namespaced(core("events"), "Event").short_names(&["ev"]),
        ResourceType::cluster_scoped(core("namespaces"), "Namespace")
            .short_names(&["ns"])
            .with_status_subresource(),
        ResourceType::cluster_scoped(core("nodes"), "Node")
            .short_names(&["no"])
            .with_status_subresource(),
        ResourceType::namespaced(Gvr::new("apps", "v1", "deployments"), "Deployment")
            .short_names(&["deploy"])
            .with_status_subresource()
            .with_scale_subresource(),
        ResourceType::namespaced(Gvr::new("apps", "v1", "replicasets"), "ReplicaSet")
            .short_names(&["rs"])
            .with_status_subresource()
            .with_scale_subresource(),
        ResourceType::namespaced(Gvr::new("apps", "v1", "statefulsets"), "StatefulSet")
            .short_names(&["sts"])
            .with_status_subresource()
            .with_scale_subresource(),
        ResourceType::namespaced(Gvr::new("coordination.k8s.io", "v1", "leases"), "Lease"),
        ResourceType::namespaced(Gvr::new("events.k8s.io", "v1", "events"), "Event"),
    ]
}
