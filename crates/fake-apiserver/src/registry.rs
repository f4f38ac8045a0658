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
    /// The categories it belongs to, e.g. `all` (what `kubectl get all` lists).
    pub categories: Vec<String>,
    /// Whether `status` is a subresource: writes to the object keep its status, and only
    /// writes to `.../status` change it (as for pods and deployments; not for configmaps).
    pub status_subresource: bool,
    /// Whether `scale` is a subresource (`autoscaling/v1` `Scale` over `spec.replicas`, as
    /// for Deployments, ReplicaSets and StatefulSets).
    pub scale_subresource: bool,
    /// The columns `kubectl get` shows after the name (a CRD's `additionalPrinterColumns`);
    /// empty: the built-in kind's own, or Age alone.
    pub printer_columns: Vec<PrinterColumn>,
}

/// One of a CRD's `additionalPrinterColumns`: a cell read from each object at a JSONPath
/// of plain fields (`.spec.size`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    /// The header, e.g. `Size`.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date` (shown as an age).
    pub type_: String,
    /// The format, if any.
    pub format: String,
    /// 0: always shown; 1 and more: with `-o wide` only.
    pub priority: i64,
    /// Where the cell is read, e.g. `.spec.size`.
    pub json_path: String,
}

impl ResourceType {
    /// A namespaced type.
    pub fn namespaced(gvr: Gvr, kind: &str) -> Self {
        Self {
            gvr,
            kind: kind.to_owned(),
            namespaced: true,
            short_names: Vec::new(),
            categories: Vec::new(),
            status_subresource: false,
            scale_subresource: false,
            printer_columns: Vec::new(),
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

    /// Puts it in categories, e.g. `all`, which `kubectl get all` lists.
    ///
    /// ```
    /// use fake_apiserver::{Gvr, ResourceType};
    ///
    /// let widgets = ResourceType::namespaced(Gvr::new("example.com", "v1", "widgets"), "Widget")
    ///     .categories(&["all"]);
    /// assert_eq!(widgets.categories, ["all"]);
    /// ```
    #[must_use]
    pub fn categories(mut self, categories: &[&str]) -> Self {
        self.categories = categories.iter().map(|s| (*s).to_owned()).collect();
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

/// The types every server starts with: the built-in kinds of kube-apiserver 1.36 that
/// clients and `kubectl create` write, with the real server's short names, categories and
/// subresources (one served version each). Objects are stored as written: no built-in
/// controller or defaulting acts on them.
pub(crate) fn builtins() -> Vec<ResourceType> {
    let core = Gvr::core;
    let apps = |resource| Gvr::new("apps", "v1", resource);
    let batch = |resource| Gvr::new("batch", "v1", resource);
    let networking = |resource| Gvr::new("networking.k8s.io", "v1", resource);
    let rbac = |resource| Gvr::new("rbac.authorization.k8s.io", "v1", resource);
    let storage = |resource| Gvr::new("storage.k8s.io", "v1", resource);
    let ns = ResourceType::namespaced;
    let cluster = ResourceType::cluster_scoped;
    let all = ["all"];
    vec![
        ns(core("pods"), "Pod")
            .short_names(&["po"])
            .categories(&all)
            .with_status_subresource(),
        ns(core("configmaps"), "ConfigMap").short_names(&["cm"]),
        ns(core("secrets"), "Secret"),
        ns(core("serviceaccounts"), "ServiceAccount").short_names(&["sa"]),
        ns(core("services"), "Service")
            .short_names(&["svc"])
            .categories(&all)
            .with_status_subresource(),
        ns(core("endpoints"), "Endpoints").short_names(&["ep"]),
        ns(core("events"), "Event").short_names(&["ev"]),
        ns(core("limitranges"), "LimitRange").short_names(&["limits"]),
        ns(core("persistentvolumeclaims"), "PersistentVolumeClaim")
            .short_names(&["pvc"])
            .with_status_subresource(),
        ns(core("podtemplates"), "PodTemplate"),
        ns(core("replicationcontrollers"), "ReplicationController")
            .short_names(&["rc"])
            .categories(&all)
            .with_status_subresource()
            .with_scale_subresource(),
        ns(core("resourcequotas"), "ResourceQuota")
            .short_names(&["quota"])
            .with_status_subresource(),
        cluster(core("namespaces"), "Namespace")
            .short_names(&["ns"])
            .with_status_subresource(),
        cluster(core("nodes"), "Node")
            .short_names(&["no"])
            .with_status_subresource(),
        cluster(core("persistentvolumes"), "PersistentVolume")
            .short_names(&["pv"])
            .with_status_subresource(),
        ns(apps("controllerrevisions"), "ControllerRevision"),
        ns(apps("daemonsets"), "DaemonSet")
            .short_names(&["ds"])
            .categories(&all)
            .with_status_subresource(),
        ns(apps("deployments"), "Deployment")
            .short_names(&["deploy"])
            .categories(&all)
            .with_status_subresource()
            .with_scale_subresource(),
        ns(apps("replicasets"), "ReplicaSet")
            .short_names(&["rs"])
            .categories(&all)
            .with_status_subresource()
            .with_scale_subresource(),
        ns(apps("statefulsets"), "StatefulSet")
            .short_names(&["sts"])
            .categories(&all)
            .with_status_subresource()
            .with_scale_subresource(),
        ns(batch("cronjobs"), "CronJob")
            .short_names(&["cj"])
            .categories(&all)
            .with_status_subresource(),
        ns(batch("jobs"), "Job")
            .categories(&all)
            .with_status_subresource(),
        // autoscaling/v2 only: the fake keeps one stored version per resource, and kubectl
        // (`autoscale`) and controllers use v2.
        ns(
            Gvr::new("autoscaling", "v2", "horizontalpodautoscalers"),
            "HorizontalPodAutoscaler",
        )
        .short_names(&["hpa"])
        .categories(&all)
        .with_status_subresource(),
        // What calls an operator's webhooks (fake-apiserver stores them; it calls no
        // webhook), for the manager's CA injection.
        cluster(
            Gvr::new(
                "admissionregistration.k8s.io",
                "v1",
                "mutatingwebhookconfigurations",
            ),
            "MutatingWebhookConfiguration",
        )
        .categories(&["api-extensions"]),
        cluster(
            Gvr::new(
                "admissionregistration.k8s.io",
                "v1",
                "validatingwebhookconfigurations",
            ),
            "ValidatingWebhookConfiguration",
        )
        .categories(&["api-extensions"]),
        // A CRD written here serves its custom resources (`crate::crds`).
        cluster(
            Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
            "CustomResourceDefinition",
        )
        .short_names(&["crd", "crds"])
        .categories(&["api-extensions"])
        .with_status_subresource(),
        ns(Gvr::new("coordination.k8s.io", "v1", "leases"), "Lease"),
        ns(
            Gvr::new("discovery.k8s.io", "v1", "endpointslices"),
            "EndpointSlice",
        ),
        ns(Gvr::new("events.k8s.io", "v1", "events"), "Event"),
        cluster(networking("ingressclasses"), "IngressClass"),
        ns(networking("ingresses"), "Ingress")
            .short_names(&["ing"])
            .with_status_subresource(),
        ns(networking("networkpolicies"), "NetworkPolicy").short_names(&["netpol"]),
        ns(
            Gvr::new("policy", "v1", "poddisruptionbudgets"),
            "PodDisruptionBudget",
        )
        .short_names(&["pdb"])
        .with_status_subresource(),
        cluster(rbac("clusterrolebindings"), "ClusterRoleBinding"),
        cluster(rbac("clusterroles"), "ClusterRole"),
        ns(rbac("rolebindings"), "RoleBinding"),
        ns(rbac("roles"), "Role"),
        cluster(
            Gvr::new("scheduling.k8s.io", "v1", "priorityclasses"),
            "PriorityClass",
        )
        .short_names(&["pc"]),
        cluster(storage("storageclasses"), "StorageClass").short_names(&["sc"]),
    ]
}
