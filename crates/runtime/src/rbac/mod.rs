//! The RBAC an operator needs, generated from what it runs: [`Manager::rbac`] collects the
//! permissions of its informers, Leases, Events, secure metrics and the writes its
//! controllers declare ([`Controller::writes`](crate::controller::Controller::writes)), and
//! [`Rbac`] renders them as a ClusterRole and Roles (objects or YAML).
//!
//! Where each permission comes from:
//!
//! | What the operator runs | Permission |
//! |---|---|
//! | every informer (own kind, `owns`, `watches`, metadata-only relations) | `list`, `watch` on its resource, in its namespaces (all: ClusterRole) |
//! | leader election, a shard's Lease | `get`, `create`, `update` on `leases` in the Lease namespace |
//! | sharding | also `list` on `leases` there; `get`, `list`, `watch`, `patch` on each sharded kind, where it is sharded |
//! | [`Manager::recorder`] (Events) | `create`, `patch` on `events.k8s.io` `events`, in the factory's namespaces (everywhere without any) |
//! | secure metrics | `create` on `tokenreviews` and `subjectaccessreviews` |
//! | [`Controller::writes`](crate::controller::Controller::writes) and friends | the verbs declared, on the resource declared |
//!
//! What the manager cannot see is the reconcile's own code: declare its writes, and add
//! what else it does with [`Rbac::allow`] (an Event about a cluster-scoped object, in a
//! namespaced operator, goes to `default`).
//!
//! Every rule is needed: `crates/e2e/tests/rbac_real.rs` runs an operator on a real API
//! server with RBAC under exactly the generated rules (no 403), and again with each rule
//! left out in turn (a 403 each time).
//!
//! ```
//! use kube_informer_runtime::rbac::{Rbac, Verb};
//!
//! let mut rbac = Rbac::default();
//! rbac.allow("", "configmaps", &["shop".to_owned()], &[Verb::List, Verb::Watch]);
//! rbac.allow("apps", "deployments", &[], &[Verb::Patch]);
//! let yaml = rbac.yaml("shop-operator");
//! assert!(yaml.contains("kind: \"ClusterRole\""));
//! assert!(yaml.contains("kind: \"Role\""));
//! assert!(yaml.contains("namespace: \"shop\""));
//! ```
//!
//! [`Manager::rbac`]: crate::manager::Manager::rbac
//! [`Manager::recorder`]: crate::manager::Manager::recorder

mod objects;
mod yaml;

use std::collections::{BTreeMap, BTreeSet};

/// A verb of an RBAC rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Verb {
    /// Read one object.
    Get,
    /// List objects (an informer's first request, and its relists).
    List,
    /// Watch objects.
    Watch,
    /// Create objects.
    Create,
    /// Replace objects (PUT).
    Update,
    /// Patch objects (merge, strategic, JSON patch or server-side apply).
    Patch,
    /// Delete one object.
    Delete,
    /// Delete a collection.
    DeleteCollection,
}

impl Verb {
    /// The verb as RBAC spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }
}

/// Where a permission holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reach {
    /// Everywhere (a ClusterRole): cluster-scoped resources, or every namespace.
    Cluster,
    /// In one namespace (a Role there).
    Namespace(String),
}

/// One rule: verbs on one resource, somewhere.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct Permission {
    /// Where it holds.
    pub reach: Reach,
    /// The API group (`""`: the core group).
    pub group: String,
    /// The resource (plural), with its subresource if any (`deployments/status`).
    pub resource: String,
    /// The objects it is limited to (RBAC's `resourceNames`); empty: all of them.
    pub names: Vec<String>,
    /// The verbs.
    pub verbs: BTreeSet<Verb>,
}

/// A rule's key: where, which group and resource, which objects (empty: all).
type RuleKey = (Reach, String, String, Vec<String>);

/// The permissions an operator needs; see the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rbac {
    rules: BTreeMap<RuleKey, BTreeSet<Verb>>,
}

impl Rbac {
    /// Allows `verbs` on `group`'s `resource` in each of `namespaces`; none: everywhere.
    pub fn allow(&mut self, group: &str, resource: &str, namespaces: &[String], verbs: &[Verb]) {
        self.allow_named(group, resource, namespaces, &[], verbs);
    }

    /// [`allow`](Self::allow), on the objects named `names` only (RBAC's `resourceNames`;
    /// none: all). `create`, `list`, `watch` and `deletecollection` cannot be limited so
    /// (RBAC would never allow them): they are allowed on every object.
    ///
    /// ```
    /// use kube_informer_runtime::rbac::{Rbac, Verb};
    ///
    /// let mut rbac = Rbac::default();
    /// rbac.allow_named("", "namespaces", &[], &["demo".to_owned()], &[Verb::Get, Verb::Delete]);
    /// assert!(rbac.yaml("op").contains("resourceNames:\n      - \"demo\""));
    /// // A create cannot name its object: it is allowed unnamed.
    /// rbac.allow_named("", "configmaps", &["ops".to_owned()], &["a".to_owned()], &[Verb::Create]);
    /// assert!(rbac.permissions().iter().any(|p| p.resource == "configmaps" && p.names.is_empty()));
    /// ```
    pub fn allow_named(
        &mut self,
        group: &str,
        resource: &str,
        namespaces: &[String],
        names: &[String],
        verbs: &[Verb],
    ) {
        let reaches: Vec<Reach> = match namespaces {
            [] => vec![Reach::Cluster],
            some => some.iter().cloned().map(Reach::Namespace).collect(),
        };
        let unnamed = [
            Verb::Create,
            Verb::List,
            Verb::Watch,
            Verb::DeleteCollection,
        ];
        let (whole, named): (Vec<Verb>, Vec<Verb>) = verbs
            .iter()
            .partition(|v| names.is_empty() || unnamed.contains(v));
        if !whole.is_empty() && !names.is_empty() {
            self.allow_named(group, resource, namespaces, &[], &whole);
        }
        let verbs = match names.is_empty() {
            true => &whole[..],
            false => &named[..],
        };
        if verbs.is_empty() {
            return;
        }
        let mut names = names.to_vec();
        names.sort();
        names.dedup();
        for reach in reaches {
            let key = (reach, group.to_owned(), resource.to_owned(), names.clone());
            self.rules
                .entry(key)
                .or_default()
                .extend(verbs.iter().copied());
        }
    }

    /// Every rule, one per resource, reach and set of names; verbs a wider rule already
    /// grants (cluster-wide, or on every object) are left out (and a rule left with none
    /// is dropped).
    pub fn permissions(&self) -> Vec<Permission> {
        let mut out = Vec::new();
        for ((reach, group, resource, names), verbs) in &self.rules {
            // The wider rules: on every object everywhere, and on every object here.
            let own = (reach, names.is_empty());
            let covering: Vec<_> = [Reach::Cluster, reach.clone()]
                .into_iter()
                .filter(|wide| (wide, true) != own)
                .filter_map(|wide| {
                    self.rules
                        .get(&(wide, group.clone(), resource.clone(), Vec::new()))
                })
                .collect();
            let verbs: BTreeSet<Verb> = verbs
                .iter()
                .filter(|v| !covering.iter().any(|all| all.contains(v)))
                .copied()
                .collect();
            if !verbs.is_empty() {
                out.push(Permission {
                    reach: reach.clone(),
                    group: group.clone(),
                    resource: resource.clone(),
                    names: names.clone(),
                    verbs,
                });
            }
        }
        out
    }

    /// Whether nothing is needed.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

impl FromIterator<Permission> for Rbac {
    fn from_iter<I: IntoIterator<Item = Permission>>(permissions: I) -> Self {
        let mut rbac = Rbac::default();
        rbac.extend(permissions);
        rbac
    }
}

impl Extend<Permission> for Rbac {
    fn extend<I: IntoIterator<Item = Permission>>(&mut self, permissions: I) {
        for p in permissions {
            self.rules
                .entry((p.reach, p.group, p.resource, p.names))
                .or_default()
                .extend(p.verbs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_rules_leave_out_what_the_cluster_rule_grants() {
        let mut rbac = Rbac::default();
        rbac.allow(
            "",
            "secrets",
            &["a".to_owned()],
            &[Verb::List, Verb::Create],
        );
        rbac.allow("", "secrets", &[], &[Verb::List, Verb::Watch]);
        let permissions = rbac.permissions();
        assert_eq!(permissions.len(), 2);
        assert_eq!(permissions[0].reach, Reach::Cluster);
        assert_eq!(permissions[1].reach, Reach::Namespace("a".into()));
        assert_eq!(permissions[1].verbs, BTreeSet::from([Verb::Create]));
        let round_trip: Rbac = permissions.into_iter().collect();
        assert_eq!(round_trip.permissions(), rbac.permissions());
    }
}
