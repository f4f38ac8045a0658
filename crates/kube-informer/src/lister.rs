//! Listers: typed, read-only views of an informer's cache (client-go's `GenericLister`).
//!
//! Controllers read the cache through listers, never the API server. Reads hand out the
//! cached `Arc<K>`s: no copies.

use std::{collections::BTreeMap, sync::Arc};

use kube::{
    Resource,
    core::{Selector, SelectorExt},
};

use crate::{NAMESPACE_INDEX, ObjectKey, ReadOnlyStore};

fn labels_match<K: Resource>(obj: &K, selector: &Selector) -> bool {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    selector.matches(obj.meta().labels.as_ref().unwrap_or(&EMPTY))
}

/// Lists and gets objects of one type from the cache. Cheap to clone.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::core::{ObjectMeta, Selector};
/// use kube_informer::{Indexers, Lister, Store};
///
/// let store = Store::new(Indexers::new().namespace());
/// let cm = |ns: &str, name: &str, app: &str| Arc::new(ConfigMap {
///     metadata: ObjectMeta {
///         namespace: Some(ns.into()), name: Some(name.into()),
///         labels: Some([("app".to_owned(), app.to_owned())].into()),
///         ..Default::default()
///     },
///     ..Default::default()
/// });
/// store.add(cm("shop", "a", "web"))?;
/// store.add(cm("shop", "b", "db"))?;
/// store.add(cm("ops", "c", "web"))?;
///
/// let lister = Lister::new(store);
/// let web = Selector::from_iter([("app", "web")]);
/// assert_eq!(lister.list(&web).len(), 2);
/// assert_eq!(lister.namespaced("shop").list(&web).len(), 1);
/// assert!(lister.namespaced("shop").get("b").is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "GenericLister")]
pub struct Lister<K> {
    store: ReadOnlyStore<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
        }
    }
}

impl<K> std::fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lister")
            .field("store", &self.store)
            .finish()
    }
}

impl<K: Resource> Lister<K> {
    /// A lister over `store` (an informer's cache, or any [`Store`](crate::Store)).
    pub fn new(store: impl Into<ReadOnlyStore<K>>) -> Self {
        Self {
            store: store.into(),
        }
    }

    /// Every cached object whose labels match `selector` (`Selector::default()`: all).
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        let mut all = self.store.list();
        all.retain(|obj| labels_match(obj.as_ref(), selector));
        all
    }

    /// The cluster-scoped object `name`.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.store.get_by_key(name)
    }

    /// A lister for one namespace.
    pub fn namespaced(&self, namespace: &str) -> NamespaceLister<K> {
        NamespaceLister {
            store: self.store.clone(),
            namespace: namespace.to_owned(),
        }
    }
}

/// Lists and gets the objects of one namespace. Uses the namespace index when the store has
/// it (see [`Indexers::namespace`](crate::Indexers::namespace)), a scan otherwise. Made by
/// [`Lister::namespaced`] (its example shows both).
pub struct NamespaceLister<K> {
    store: ReadOnlyStore<K>,
    namespace: String,
}

impl<K> Clone for NamespaceLister<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

impl<K> std::fmt::Debug for NamespaceLister<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceLister")
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl<K: Resource> NamespaceLister<K> {
    /// The objects of this namespace whose labels match `selector`.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        let mut objects = match self.store.by_index(NAMESPACE_INDEX, &self.namespace) {
            Ok(objects) => objects,
            Err(_) => {
                let mut all = self.store.list();
                let ns = Some(self.namespace.as_str());
                all.retain(|obj| obj.meta().namespace.as_deref() == ns);
                all
            }
        };
        objects.retain(|obj| labels_match(obj.as_ref(), selector));
        objects
    }

    /// The object `name` in this namespace.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        let key = ObjectKey::new(Some(&self.namespace), name);
        self.store.get_by_key(key.as_str())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::{Expression, ObjectMeta};

    use super::*;
    use crate::{Indexers, Store};

    fn cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> Arc<ConfigMap> {
        let labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                labels: Some(labels.collect()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn names(objs: Vec<Arc<ConfigMap>>) -> Vec<String> {
        let mut names: Vec<String> = objs
            .iter()
            .map(|o| o.metadata.name.clone().unwrap())
            .collect();
        names.sort();
        names
    }

    fn fill(store: &Store<ConfigMap>) {
        store
            .add(cm("a", "web", &[("app", "web"), ("tier", "front")]))
            .unwrap();
        store.add(cm("a", "db", &[("app", "db")])).unwrap();
        store.add(cm("b", "web2", &[("app", "web")])).unwrap();
        store.add(cm("b", "bare", &[])).unwrap();
    }

    #[test]
    fn selectors_filter_by_labels() {
        let store = Store::new(Indexers::new().namespace());
        fill(&store);
        let lister = Lister::new(store);
        assert_eq!(names(lister.list(&Selector::default())).len(), 4);
        assert_eq!(
            names(lister.list(&Selector::from_iter([("app", "web")]))),
            ["web", "web2"]
        );
        let not_db = Selector::from(Expression::NotIn("app".into(), ["db".to_owned()].into()));
        assert_eq!(names(lister.list(&not_db)), ["bare", "web", "web2"]);
        let has_tier = Selector::from(Expression::Exists("tier".into()));
        assert_eq!(names(lister.list(&has_tier)), ["web"]);
    }

    #[test]
    fn namespaced_listers_use_the_index_or_scan_without_it() {
        for store in [Store::new(Indexers::new().namespace()), Store::default()] {
            fill(&store);
            let ns = Lister::new(store).namespaced("b");
            assert_eq!(names(ns.list(&Selector::default())), ["bare", "web2"]);
            assert_eq!(
                names(ns.list(&Selector::from_iter([("app", "web")]))),
                ["web2"]
            );
            assert!(ns.get("web2").is_some());
            assert!(ns.get("web").is_none(), "web lives in namespace a");
        }
    }

    #[test]
    fn reads_share_the_cached_objects() {
        let store = Store::default();
        let obj = cm("a", "x", &[]);
        store.add(obj.clone()).unwrap();
        let got = Lister::new(store).namespaced("a").get("x").unwrap();
        assert!(Arc::ptr_eq(&got, &obj));
    }
}
