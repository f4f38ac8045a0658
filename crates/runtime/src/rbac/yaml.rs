//! The roles as YAML, for `kubectl apply -f`. Written here rather than with a YAML crate:
//! the documents are maps, lists and strings, and every string is written JSON-quoted
//! (which YAML reads as the same string), so no value can change meaning.

use serde::Serialize;
use serde_json::Value;

use super::Rbac;

impl Rbac {
    /// The ClusterRole and Roles named `name`, as YAML documents.
    ///
    /// ```
    /// use kube_informer_runtime::rbac::{Rbac, Verb};
    ///
    /// let mut rbac = Rbac::default();
    /// rbac.allow("coordination.k8s.io", "leases", &["ops".to_owned()], &[Verb::Get]);
    /// assert_eq!(rbac.yaml("op"), "\
    /// apiVersion: \"rbac.authorization.k8s.io/v1\"
    /// kind: \"Role\"
    /// metadata:
    ///   name: \"op\"
    ///   namespace: \"ops\"
    /// rules:
    ///   - apiGroups:
    ///       - \"coordination.k8s.io\"
    ///     resources:
    ///       - \"leases\"
    ///     verbs:
    ///       - \"get\"
    /// ");
    /// ```
    pub fn yaml(&self, name: &str) -> String {
        let mut docs = Vec::new();
        docs.extend(self.cluster_role(name).map(|r| document(&r)));
        docs.extend(self.roles(name).iter().map(document));
        docs.join("---\n")
    }

    /// [`yaml`](Self::yaml) and the bindings that give the roles to the ServiceAccount
    /// `namespace/service_account`.
    pub fn yaml_bound_to(&self, name: &str, namespace: &str, service_account: &str) -> String {
        let subject = Rbac::service_account(namespace, service_account);
        let mut docs = vec![self.yaml(name)];
        docs.extend(
            self.cluster_role_binding(name, &subject)
                .map(|b| document(&b)),
        );
        docs.extend(self.role_bindings(name, &subject).iter().map(document));
        docs.retain(|d| !d.is_empty());
        docs.join("---\n")
    }
}

impl Rbac {
    /// Everything to `kubectl apply -f` for an operator running as the ServiceAccount
    /// `namespace/service_account`, in the order it must be applied: the Namespace
    /// `namespace`, the ServiceAccount, the roles ([`yaml`](Self::yaml)) and their bindings
    /// ([`yaml_bound_to`](Self::yaml_bound_to)). The other namespaces its Roles live in
    /// must exist (they are the ones it reads or writes).
    ///
    /// ```
    /// use kube_informer_runtime::rbac::{Rbac, Verb};
    ///
    /// let mut rbac = Rbac::default();
    /// rbac.allow("coordination.k8s.io", "leases", &["ops".to_owned()], &[Verb::Get]);
    /// let manifest = rbac.manifest("op", "ops", "op");
    /// let kinds: Vec<&str> = manifest
    ///     .lines()
    ///     .filter_map(|l| l.strip_prefix("kind: "))
    ///     .collect();
    /// assert_eq!(kinds, ["\"Namespace\"", "\"ServiceAccount\"", "\"Role\"", "\"RoleBinding\""]);
    /// ```
    pub fn manifest(&self, name: &str, namespace: &str, service_account: &str) -> String {
        use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(namespace.to_owned()),
                ..Default::default()
            },
            ..Namespace::default()
        };
        let account = ServiceAccount {
            metadata: kube::api::ObjectMeta {
                name: Some(service_account.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            ..ServiceAccount::default()
        };
        let bound = self.yaml_bound_to(name, namespace, service_account);
        let mut docs = vec![document(&ns), document(&account)];
        docs.extend((!bound.is_empty()).then_some(bound));
        docs.join("---\n")
    }
}

/// One object as a YAML document, `apiVersion` and `kind` first.
fn document<T: Serialize + kube::Resource<DynamicType = ()>>(object: &T) -> String {
    let mut value = serde_json::to_value(object).expect("RBAC objects serialize");
    let mut out = String::new();
    out.push_str(&format!("apiVersion: {}\n", quoted(&T::api_version(&()))));
    out.push_str(&format!("kind: {}\n", quoted(&T::kind(&()))));
    if let Some(map) = value.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
    }
    write_map(&value, 0, &mut out);
    out
}

fn quoted(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

fn write_map(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    for (key, item) in value.as_object().into_iter().flatten() {
        match item {
            Value::Object(map) if !map.is_empty() => {
                out.push_str(&format!("{pad}{key}:\n"));
                write_map(item, indent + 2, out);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push_str(&format!("{pad}{key}:\n"));
                write_list(items, indent + 2, out);
            }
            other => out.push_str(&format!("{pad}{key}: {}\n", scalar(other))),
        }
    }
}

fn write_list(items: &[Value], indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    for item in items {
        match item {
            Value::Object(map) if !map.is_empty() => {
                // The first key goes on the dash's line, the rest under it.
                let mut first = String::new();
                write_map(item, indent + 2, &mut first);
                out.push_str(&format!("{pad}- {}", &first[indent + 2..]));
            }
            other => out.push_str(&format!("{pad}- {}\n", scalar(other))),
        }
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => quoted(s),
        Value::Object(_) => "{}".to_owned(),
        Value::Array(_) => "[]".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use serde_json::Value;

    use crate::rbac::{Rbac, Verb};

    #[test]
    fn the_yaml_reads_back_as_the_objects() {
        let mut rbac = Rbac::default();
        let shop = ["shop".to_owned(), "it's: \"quoted\"".to_owned()];
        rbac.allow(
            "",
            "configmaps",
            &shop,
            &[Verb::List, Verb::Watch, Verb::Patch],
        );
        rbac.allow("apps", "deployments/status", &shop[..1], &[Verb::Update]);
        rbac.allow("", "namespaces", &[], &[Verb::Get]);
        let yaml = rbac.yaml_bound_to("op", "ops", "operator");
        let documents: Vec<Value> = yaml
            .split("---\n")
            .map(|doc| serde_saphyr::from_str(doc).expect("valid YAML"))
            .collect();
        let subject = Rbac::service_account("ops", "operator");
        let mut expected = vec![serde_json::to_value(rbac.cluster_role("op").unwrap()).unwrap()];
        expected.extend(
            rbac.roles("op")
                .iter()
                .map(|r| serde_json::to_value(r).unwrap()),
        );
        expected.push(
            serde_json::to_value(rbac.cluster_role_binding("op", &subject).unwrap()).unwrap(),
        );
        expected.extend(
            rbac.role_bindings("op", &subject)
                .iter()
                .map(|b| serde_json::to_value(b).unwrap()),
        );
        assert_eq!(documents, expected);
        let kinds: Vec<&str> = documents
            .iter()
            .map(|d| d["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "ClusterRole",
                "Role",
                "Role",
                "ClusterRoleBinding",
                "RoleBinding",
                "RoleBinding"
            ]
        );
        // And as the typed objects kubectl would send.
        let _: ClusterRole = serde_json::from_value(documents[0].clone()).unwrap();
        let _: Role = serde_json::from_value(documents[1].clone()).unwrap();
        let _: ClusterRoleBinding = serde_json::from_value(documents[3].clone()).unwrap();
        let _: RoleBinding = serde_json::from_value(documents[4].clone()).unwrap();
    }
}
