//! Object keys: how the store, the FIFOs and the work queue name an object.
//!
//! A key is `namespace/name` for a namespaced object and `name` for a cluster-scoped one,
//! exactly as client-go's `MetaNamespaceKeyFunc` makes them, so keys logged or queued by a Go
//! controller and by a Rust one read the same.
//!
//! [`ObjectKey`] is an `Arc<str>`: cloning it is one atomic increment, and the store keeps one
//! copy of each key string, shared by its map and every index bucket that names the object.

use std::{borrow::Borrow, fmt, str::FromStr, sync::Arc};

use kube::Resource;

/// The key of an object in the cache: `namespace/name`, or `name` when cluster-scoped.
///
/// Cheap to clone (an `Arc<str>`), hashes and compares like the `&str` it holds, so maps keyed
/// by `ObjectKey` can be queried with a plain `&str`.
///
/// ```
/// use kube_informer::ObjectKey;
///
/// let key = ObjectKey::new(Some("kube-system"), "coredns");
/// assert_eq!(key.as_str(), "kube-system/coredns");
/// assert_eq!(key.namespace(), Some("kube-system"));
/// assert_eq!(key.name(), "coredns");
///
/// let node: ObjectKey = "node-1".parse().unwrap();
/// assert_eq!(node.namespace(), None);
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(pub(crate) Arc<str>);

impl ObjectKey {
    /// Builds the key of the object `name` in `namespace` (`None` or `""` for cluster-scoped).
    ///
    /// No validation is done: use [`ObjectKey::from_str`] (or `str::parse`) for untrusted text.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        match namespace {
            Some(ns) if !ns.is_empty() => {
                let mut s = String::with_capacity(ns.len() + 1 + name.len());
                s.push_str(ns);
                s.push('/');
                s.push_str(name);
                Self(Arc::from(s))
            }
            _ => Self(Arc::from(name)),
        }
    }

    /// The key as text: `namespace/name` or `name`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The namespace part, `None` for a cluster-scoped key.
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name part.
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, name)| name)
    }
}

impl FromStr for ObjectKey {
    type Err = KeyError;

    /// Parses and validates a key, with the rules of [`split_meta_namespace_key`].
    fn from_str(s: &str) -> Result<Self, KeyError> {
        split_meta_namespace_key(s)?;
        Ok(Self(Arc::from(s)))
    }
}

impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl PartialEq<str> for ObjectKey {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for ObjectKey {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

/// Why an object or a string could not be turned into an [`ObjectKey`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The object has no `metadata.name` (or an empty one), so it has no key.
    #[error("object{} has no metadata.name, so it has no cache key", .namespace.as_deref().map(|ns| format!(" in namespace {ns:?}")).unwrap_or_default())]
    MissingName {
        /// The object's namespace, if it had one.
        namespace: Option<String>,
    },
    /// A key given with an object is not the object's own key.
    #[error("object key {given:?} does not match the object, whose key is {actual:?}")]
    Mismatch {
        /// The key that was given.
        given: String,
        /// The object's key.
        actual: String,
    },
    /// A key string that is not `namespace/name` or `name`.
    #[error("malformed object key {key:?}: {reason}")]
    Malformed {
        /// The text that was given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The key of a Kubernetes object: `namespace/name`, or `name` when it has no namespace.
///
/// Fails only when the object has no name.
#[doc(alias = "MetaNamespaceKeyFunc")]
pub fn meta_namespace_key<K: Resource>(obj: &K) -> Result<ObjectKey, KeyError> {
    let meta = obj.meta();
    let namespace = meta.namespace.as_deref().filter(|ns| !ns.is_empty());
    match meta.name.as_deref() {
        Some(name) if !name.is_empty() => Ok(ObjectKey::new(namespace, name)),
        _ => Err(KeyError::MissingName {
            namespace: namespace.map(str::to_owned),
        }),
    }
}

/// Keys every object of a relist; the first object without a key fails the whole list.
pub(crate) fn key_all<K: Resource>(
    objects: Vec<Arc<K>>,
) -> Result<Vec<(ObjectKey, Arc<K>)>, KeyError> {
    objects
        .into_iter()
        .map(|obj| Ok((meta_namespace_key(obj.as_ref())?, obj)))
        .collect()
}

/// Splits a key into its namespace (`None` for cluster-scoped) and name.
///
/// Stricter than client-go, which accepts `ns/` and `/name`: here both halves must be
/// non-empty, and a key has at most one `/`.
///
/// ```
/// use kube_informer::split_meta_namespace_key;
///
/// assert_eq!(split_meta_namespace_key("default/web").unwrap(), (Some("default"), "web"));
/// assert_eq!(split_meta_namespace_key("node-1").unwrap(), (None, "node-1"));
/// assert!(split_meta_namespace_key("a/b/c").is_err());
/// ```
#[doc(alias = "SplitMetaNamespaceKey")]
pub fn split_meta_namespace_key(key: &str) -> Result<(Option<&str>, &str), KeyError> {
    let malformed = |reason| KeyError::Malformed {
        key: key.to_owned(),
        reason,
    };
    match key.split_once('/') {
        None if key.is_empty() => Err(malformed("the key is empty")),
        None => Ok((None, key)),
        Some((_, name)) if name.contains('/') => {
            Err(malformed("a key has at most one '/' (namespace/name)"))
        }
        Some(("", _)) => Err(malformed("the namespace before '/' is empty")),
        Some((_, "")) => Err(malformed("the name after '/' is empty")),
        Some((ns, name)) => Ok((Some(ns), name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Node};
    use kube::core::ObjectMeta;

    fn cm(ns: Option<&str>, name: Option<&str>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: ns.map(Into::into),
                name: name.map(Into::into),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn namespaced_objects_are_keyed_namespace_slash_name() {
        let key = meta_namespace_key(&cm(Some("default"), Some("web"))).unwrap();
        assert_eq!(key, "default/web");
        assert_eq!(key.namespace(), Some("default"));
        assert_eq!(key.name(), "web");
    }

    #[test]
    fn cluster_scoped_objects_are_keyed_by_name_alone() {
        let node = Node {
            metadata: ObjectMeta {
                name: Some("node-1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(meta_namespace_key(&node).unwrap(), "node-1");
        // An empty namespace is the same as none.
        assert_eq!(meta_namespace_key(&cm(Some(""), Some("x"))).unwrap(), "x");
    }

    #[test]
    fn an_object_without_name_has_no_key_and_the_error_says_so() {
        let err = meta_namespace_key(&cm(Some("prod"), None)).unwrap_err();
        assert_eq!(
            err,
            KeyError::MissingName {
                namespace: Some("prod".into())
            }
        );
        assert!(err.to_string().contains("metadata.name"), "{err}");
        assert!(err.to_string().contains("prod"), "{err}");
        assert!(meta_namespace_key(&cm(None, Some(""))).is_err());
    }

    #[test]
    fn split_rejects_malformed_keys_with_a_reason() {
        for bad in ["", "a/b/c", "/name", "ns/", "/"] {
            let err = split_meta_namespace_key(bad).unwrap_err();
            assert!(matches!(err, KeyError::Malformed { .. }), "{bad:?}: {err}");
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
            assert!(bad.parse::<ObjectKey>().is_err());
        }
    }

    #[test]
    fn split_inverts_new() {
        for (ns, name) in [(Some("a"), "b"), (None, "c")] {
            let key = ObjectKey::new(ns, name);
            assert_eq!(split_meta_namespace_key(key.as_str()).unwrap(), (ns, name));
        }
    }

    #[test]
    fn keys_can_be_looked_up_by_str_in_hash_maps() {
        let mut map = std::collections::HashMap::new();
        map.insert(ObjectKey::new(Some("a"), "b"), 1);
        assert_eq!(map.get("a/b"), Some(&1));
    }
}
