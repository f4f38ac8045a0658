//! The rules as RBAC objects: one ClusterRole for what holds everywhere, one Role per
//! namespace, and the bindings that give them to a subject.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::ObjectMeta;

use super::{Permission, Rbac, Reach};

fn rule(p: &Permission) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![p.group.clone()]),
        resources: Some(vec![p.resource.clone()]),
        resource_names: (!p.names.is_empty()).then(|| p.names.clone()),
        verbs: p.verbs.iter().map(|v| v.as_str().to_owned()).collect(),
        ..PolicyRule::default()
    }
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: Some("rbac.authorization.k8s.io".to_owned()),
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

impl Rbac {
    /// The rules by reach.
    fn by_reach(&self) -> BTreeMap<Reach, Vec<PolicyRule>> {
        let mut out: BTreeMap<Reach, Vec<PolicyRule>> = BTreeMap::new();
        for p in self.permissions() {
            out.entry(p.reach.clone()).or_default().push(rule(&p));
        }
        out
    }

    /// The ClusterRole `name` of what holds everywhere, if anything does.
    pub fn cluster_role(&self, name: &str) -> Option<ClusterRole> {
        let rules = self.by_reach().remove(&Reach::Cluster)?;
        Some(ClusterRole {
            metadata: meta(name, None),
            rules: Some(rules),
            ..ClusterRole::default()
        })
    }

    /// A Role `name` in each namespace with rules of its own.
    pub fn roles(&self, name: &str) -> Vec<Role> {
        self.by_reach()
            .into_iter()
            .filter_map(|(reach, rules)| match reach {
                Reach::Namespace(namespace) => Some(Role {
                    metadata: meta(name, Some(&namespace)),
                    rules: Some(rules),
                }),
                Reach::Cluster => None,
            })
            .collect()
    }

    /// Binds [`cluster_role`](Self::cluster_role) `name` to `subject`, if there is one.
    pub fn cluster_role_binding(
        &self,
        name: &str,
        subject: &Subject,
    ) -> Option<ClusterRoleBinding> {
        self.cluster_role(name)?;
        Some(ClusterRoleBinding {
            metadata: meta(name, None),
            role_ref: role_ref("ClusterRole", name),
            subjects: Some(vec![subject.clone()]),
        })
    }

    /// Binds each of [`roles`](Self::roles) `name` to `subject`, in its namespace.
    pub fn role_bindings(&self, name: &str, subject: &Subject) -> Vec<RoleBinding> {
        self.roles(name)
            .into_iter()
            .map(|role| RoleBinding {
                metadata: meta(name, role.metadata.namespace.as_deref()),
                role_ref: role_ref("Role", name),
                subjects: Some(vec![subject.clone()]),
            })
            .collect()
    }

    /// The ServiceAccount `namespace/name` as a binding's subject.
    pub fn service_account(namespace: &str, name: &str) -> Subject {
        Subject {
            kind: "ServiceAccount".to_owned(),
            name: name.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }
    }
}
