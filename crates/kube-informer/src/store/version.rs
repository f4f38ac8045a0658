//! The resourceVersion a cache has reached, and waiting for one (read-your-writes).
//!
//! The rules, per informer shape, are tabled in the [`store`](crate::store) module docs.

use std::collections::BTreeMap;

use super::{ReadOnlyStore, Store, VersionError};

/// A resourceVersion's place in the order (KEP-5504), if it has one.
fn numeric_version(resource_version: &str) -> Option<crate::ResourceVersion> {
    resource_version.parse().ok()
}

/// The versions a cache has reached.
#[derive(Debug, Default, Clone)]
pub(super) struct Versions {
    /// What [`Store::resource_version`](crate::ReadOnlyStore::resource_version) returns.
    current: String,
    /// Per namespace, when the cache is fed by one watch per namespace ("" = none yet).
    namespaces: Option<BTreeMap<String, String>>,
    /// A namespace's version that is not comparable, which leaves the several watches
    /// without a minimum: waits refuse with it instead of waiting forever.
    opaque: Option<String>,
}

impl Versions {
    pub(super) fn current(&self) -> &str {
        &self.current
    }

    /// What a wait for the whole cache compares with: the cache's version, or the opaque
    /// version that keeps several watches from having one.
    fn comparable(&self) -> &str {
        self.opaque.as_deref().unwrap_or(&self.current)
    }

    /// The version `namespace` has reached (the cache's, for a single watch).
    fn of(&self, namespace: &str) -> Option<&str> {
        match &self.namespaces {
            Some(map) => map.get(namespace).map(String::as_str),
            None => Some(&self.current),
        }
    }

    /// Keep one version per namespace from now on.
    fn track(&mut self, namespaces: impl IntoIterator<Item = String>) {
        let map = namespaces
            .into_iter()
            .map(|ns| (ns, String::new()))
            .collect();
        self.namespaces = Some(map);
        self.current.clear();
        self.opaque = None;
    }

    /// `namespace` (`None`: everything this cache holds) has reached `resource_version`;
    /// whether any version changed: the cache's, or only one namespace's (a wait for that
    /// namespace must wake although the minimum stayed where it was).
    pub(super) fn reach(&mut self, namespace: Option<&str>, resource_version: &str) -> bool {
        if resource_version.is_empty() {
            return false;
        }
        let Some(map) = &mut self.namespaces else {
            if self.current == resource_version {
                return false;
            }
            resource_version.clone_into(&mut self.current);
            return true;
        };
        let mut moved = false;
        let mut set = |reached: &mut String| {
            if reached != resource_version {
                resource_version.clone_into(reached);
                moved = true;
            }
        };
        match namespace {
            Some(ns) => match map.get_mut(ns) {
                Some(reached) => set(reached),
                // Not a namespace this cache watches: nothing to say about its sequence.
                None => return false,
            },
            None => map.values_mut().for_each(set),
        }
        let (minimum, opaque) = match minimum(map.values()) {
            Ok(minimum) => (minimum, None),
            Err(opaque) => (String::new(), Some(opaque)),
        };
        self.opaque = opaque;
        if minimum != self.current {
            self.current = minimum;
            moved = true;
        }
        moved
    }
}

/// The smallest of `versions` (empty while one is empty), or the first that is not
/// comparable.
fn minimum<'a>(versions: impl Iterator<Item = &'a String>) -> Result<String, String> {
    let mut least: Option<crate::ResourceVersion> = None;
    let mut unreached = false;
    for version in versions {
        if version.is_empty() {
            unreached = true;
            continue;
        }
        let n = numeric_version(version).ok_or_else(|| version.clone())?;
        least = Some(least.map_or(n, |l| l.min(n)));
    }
    Ok(match least {
        Some(n) if !unreached => n.to_string(),
        _ => String::new(),
    })
}

impl<K> Store<K> {
    /// Makes this cache keep one resourceVersion per namespace in `namespaces`, for a cache
    /// fed by one watch per namespace (the informer does this for several namespaces): its
    /// [`resource_version`](ReadOnlyStore::resource_version) is then their minimum, empty until
    /// each has one. See the table in the [module docs](crate::store).
    pub fn track_namespaces(&self, namespaces: impl IntoIterator<Item = String>) {
        self.inner.state.write().versions.track(namespaces);
        self.inner.version_changed.notify_waiters();
    }

    /// Records that the cache has reached `resource_version` without any object changing
    /// (a watch bookmark), waking those waiting for it.
    #[doc(alias = "Bookmark")]
    pub fn bookmark(&self, resource_version: &str) {
        self.reach(None, resource_version);
    }

    /// [`bookmark`](Self::bookmark) for the watch of one namespace.
    pub fn bookmark_in_namespace(&self, namespace: &str, resource_version: &str) {
        self.reach(Some(namespace), resource_version);
    }

    fn reach(&self, namespace: Option<&str>, resource_version: &str) {
        let changed = self
            .inner
            .state
            .write()
            .versions
            .reach(namespace, resource_version);
        if changed {
            self.inner.version_changed.notify_waiters();
        }
    }
}

impl<K> ReadOnlyStore<K> {
    /// The resourceVersion the cache has reached: the newest write's (an object's own, a
    /// relist's, a bookmark's; empty before any), or, for a cache fed by one watch per
    /// namespace, the minimum every namespace has reached.
    #[doc(alias = "LastStoreSyncResourceVersion")]
    pub fn resource_version(&self) -> String {
        self.inner.state.read().versions.current().to_owned()
    }

    /// [`objects_at_version`](Self::objects_at_version) of one namespace: its objects and
    /// the version its watch has reached (empty for a namespace this cache does not watch).
    pub(crate) fn namespace_at_version(&self, namespace: &str) -> (Vec<std::sync::Arc<K>>, String) {
        let state = self.inner.state.read();
        let objects = state.slab.iter();
        let objects = objects.filter(|(_, key, _)| key.namespace() == Some(namespace));
        let objects = objects.map(|(_, _, obj)| obj.clone()).collect();
        let version = state.versions.of(namespace).unwrap_or_default();
        (objects, version.to_owned())
    }

    /// The resourceVersion `namespace` has reached: its own for a cache fed by one watch
    /// per namespace, the cache's otherwise. `None` for a namespace this cache does not
    /// watch.
    pub fn resource_version_in(&self, namespace: &str) -> Option<String> {
        self.inner
            .state
            .read()
            .versions
            .of(namespace)
            .map(str::to_owned)
    }

    /// Waits until the cache's resourceVersion is at least `resource_version`: every change
    /// the server made up to it has been applied (in every namespace, for a cache fed by
    /// one watch per namespace: prefer [`wait_for_resource_version_in`](Self::wait_for_resource_version_in)
    /// there). With the version a write returned, a reconcile can read its own write from
    /// the cache. Wrap it in a timeout: a version the server never sends (an object outside
    /// the informer's selectors, on a server without bookmarks) is waited for until the
    /// next event.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube_informer::Store;
    ///
    /// let store: Store<ConfigMap> = Store::default();
    /// let waiting = tokio::spawn({
    ///     let store = store.clone();
    ///     async move { store.wait_for_resource_version("42").await }
    /// });
    /// store.bookmark("41");
    /// store.bookmark("42");
    /// waiting.await.unwrap().unwrap();
    /// # }
    /// ```
    pub async fn wait_for_resource_version(
        &self,
        resource_version: &str,
    ) -> Result<(), VersionError> {
        self.wait_until(resource_version, |versions| {
            Some(versions.comparable().to_owned())
        })
        .await
        .map(|_| ())
    }

    /// Waits until the watch of `namespace` has reached `resource_version`: for
    /// read-your-writes on a cache fed by one watch per namespace (a write in namespace b
    /// is in the cache once b's watch reached the write's version, whatever the other
    /// namespaces' watches did). On a cache fed by one watch, the same as
    /// [`wait_for_resource_version`](Self::wait_for_resource_version).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube_informer::Store;
    ///
    /// let store: Store<ConfigMap> = Store::default();
    /// store.track_namespaces(["a".to_owned(), "b".to_owned()]);
    /// store.bookmark_in_namespace("a", "100");
    /// store.bookmark_in_namespace("b", "95");
    /// assert_eq!(store.resource_version(), "95"); // what every namespace has reached
    /// store.wait_for_resource_version_in("b", "95").await.unwrap();
    /// # }
    /// ```
    pub async fn wait_for_resource_version_in(
        &self,
        namespace: &str,
        resource_version: &str,
    ) -> Result<(), VersionError> {
        let reached = self
            .wait_until(resource_version, |versions| {
                versions.of(namespace).map(str::to_owned)
            })
            .await?;
        reached.ok_or_else(|| VersionError::NotWatched(namespace.to_owned()))
    }

    /// Waits until the version `read` picks (`None`: not watched, returned at once) is at
    /// least `resource_version`.
    async fn wait_until(
        &self,
        resource_version: &str,
        read: impl Fn(&Versions) -> Option<String>,
    ) -> Result<Option<()>, VersionError> {
        let wanted = numeric_version(resource_version)
            .ok_or_else(|| VersionError::NotComparable(resource_version.to_owned()))?;
        loop {
            let changed = self.inner.version_changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            let Some(current) = read(&self.inner.state.read().versions) else {
                return Ok(None);
            };
            if numeric_version(&current).is_some_and(|have| have >= wanted) {
                return Ok(Some(()));
            }
            if !current.is_empty() && numeric_version(&current).is_none() {
                return Err(VersionError::NotComparable(current));
            }
            changed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_watch_follows_the_newest_version() {
        let mut v = Versions::default();
        assert!(v.reach(Some("a"), "5"));
        assert!(v.reach(Some("b"), "3"), "one sequence: the newest applied");
        assert_eq!(v.current(), "3");
        assert_eq!(v.of("anything"), Some("3"));
        assert!(!v.reach(None, ""), "an empty version is ignored");
    }

    #[test]
    fn several_watches_report_the_minimum_once_each_has_one() {
        let mut v = Versions::default();
        v.track(["a".to_owned(), "b".to_owned()]);
        assert!(v.reach(Some("a"), "100"), "a moved (its waiters wake)");
        assert!(!v.reach(Some("a"), "100"), "nothing moved");
        assert_eq!(v.current(), "", "b has reached nothing yet");
        assert!(v.reach(Some("b"), "95"));
        assert_eq!(v.current(), "95");
        assert!(!v.reach(Some("c"), "1"), "not watched: no say");
        assert_eq!(v.of("c"), None);
        assert!(v.reach(Some("b"), "120"));
        assert_eq!(v.current(), "100");
        assert!(v.reach(None, "130"), "a whole relist: every namespace");
        assert_eq!(
            (v.current(), v.of("a"), v.of("b")),
            ("130", Some("130"), Some("130"))
        );
        v.reach(Some("a"), "opaque");
        assert_eq!(v.current(), "", "opaque versions have no minimum");
        assert_eq!(v.comparable(), "opaque", "and a wait says why");
        v.reach(Some("a"), "140");
        assert_eq!((v.current(), v.comparable()), ("130", "130"));
    }

    #[tokio::test]
    async fn a_wait_over_several_watches_with_an_opaque_version_refuses() {
        let store: Store<k8s_openapi::api::core::v1::ConfigMap> = Store::default();
        store.track_namespaces(["a".to_owned(), "b".to_owned()]);
        store.bookmark_in_namespace("a", "100");
        store.bookmark_in_namespace("b", "opaque-b");
        let refused = store.wait_for_resource_version("90").await;
        assert!(
            matches!(&refused, Err(VersionError::NotComparable(v)) if v == "opaque-b"),
            "{refused:?}"
        );
    }

    /// KEP-5504 allows versions up to 128 bits: past `u64` they still order (they were
    /// refused as not comparable), the minimum over namespaces is the smaller number though
    /// longer text sorts after, and a leading zero is not comparable.
    #[tokio::test]
    async fn versions_past_64_bits_are_waited_for_and_leading_zeros_refused() {
        use futures_util::FutureExt as _;
        let store: Store<k8s_openapi::api::core::v1::ConfigMap> = Store::default();
        store.track_namespaces(["a".to_owned(), "b".to_owned()]);
        store.bookmark_in_namespace("a", "99999999999999999999"); // 20 digits, past u64
        store.bookmark_in_namespace("b", "100000000000000000000"); // 21 digits
        assert_eq!(store.resource_version(), "99999999999999999999");
        let wait = store.wait_for_resource_version("100000000000000000000");
        let mut wait = std::pin::pin!(wait);
        assert!(wait.as_mut().now_or_never().is_none(), "a is one short");
        store.bookmark_in_namespace("a", "100000000000000000001");
        assert!(matches!(wait.as_mut().now_or_never(), Some(Ok(()))));

        let refused = store.wait_for_resource_version("0100").await;
        assert!(
            matches!(&refused, Err(VersionError::NotComparable(v)) if v == "0100"),
            "{refused:?}"
        );
    }

    /// The watch of one namespace moves while another holds the minimum back: a wait for
    /// that namespace wakes. (It slept until the next bookmark, a minute on a real server,
    /// when only the minimum's moves woke waiters.)
    #[tokio::test]
    async fn a_wait_for_one_namespace_wakes_when_only_that_namespace_moves() {
        use futures_util::FutureExt as _;
        let store: Store<k8s_openapi::api::core::v1::ConfigMap> = Store::default();
        store.track_namespaces(["a".to_owned(), "b".to_owned()]);
        store.bookmark_in_namespace("a", "13");
        store.bookmark_in_namespace("b", "13");
        let wait = store.wait_for_resource_version_in("b", "14");
        let mut wait = std::pin::pin!(wait);
        assert!(wait.as_mut().now_or_never().is_none(), "b is at 13");
        store.bookmark_in_namespace("b", "14");
        assert_eq!(store.resource_version(), "13", "a holds the minimum back");
        let woken = wait.as_mut().now_or_never();
        assert!(
            matches!(woken, Some(Ok(()))),
            "b reached 14; the wait returns: {woken:?}"
        );
    }
}
