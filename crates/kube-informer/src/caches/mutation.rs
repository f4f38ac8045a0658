//! [`MutationCache`]: the cache, overlaid with the objects this process just wrote, until
//! the informer catches up (client-go's `MutationCache`).
//!
//! A reconcile that writes an object and reads the cache right after (its next reconcile,
//! triggered by something else) may see the old version and act on it again: the classic
//! duplicate-create. Record each object the API server returned for your writes with
//! [`MutationCache::mutation`]; reads then return whichever is newer, the cached object or
//! the written one, by resourceVersion. An entry goes away once the cache has caught up, or
//! after its time to live (the informer may never see it, e.g. outside its selectors).

use std::{sync::Arc, time::Duration};

use kube::Resource;
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::{
    FastMap, IndexError, ObjectKey, ReadOnlyStore, meta_namespace_key, resource_version::of_object,
};

/// The cache overlaid with recent writes. Cheap to share (wrap it in an `Arc`).
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer::{Store, caches::mutation::MutationCache};
///
/// let store: Store<ConfigMap> = Store::default();
/// let cache = MutationCache::new(store.read_only(), Duration::from_secs(60));
/// let mut written = ConfigMap::default(); // what the API server returned for our create
/// written.metadata.name = Some("settings".into());
/// written.metadata.resource_version = Some("42".into());
/// cache.mutation(written);
/// assert!(cache.get_by_key("settings").is_some(), "seen before the informer has it");
/// ```
pub struct MutationCache<K> {
    cache: ReadOnlyStore<K>,
    written: Mutex<FastMap<ObjectKey, (Arc<K>, Instant)>>,
    ttl: Duration,
}

impl<K> std::fmt::Debug for MutationCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutationCache")
            .field("written", &self.written.lock().len())
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// Whether `written` is newer than `cached` (when their versions cannot be compared, the
/// write is taken as newer: it is what this process knows it did).
fn newer<K: Resource>(written: &K, cached: &K) -> bool {
    match (of_object(written), of_object(cached)) {
        (Some(w), Some(c)) => w > c,
        _ => true,
    }
}

impl<K: Resource> MutationCache<K> {
    /// The cache `cache`, with writes kept at most `ttl` (client-go keeps them 10 minutes).
    pub fn new(cache: ReadOnlyStore<K>, ttl: Duration) -> Self {
        Self {
            cache,
            written: Mutex::new(FastMap::default()),
            ttl,
        }
    }

    /// Records `obj` as just written (the object the API server answered with).
    pub fn mutation(&self, obj: impl Into<Arc<K>>) {
        let obj = obj.into();
        if let Ok(key) = meta_namespace_key(obj.as_ref()) {
            self.written.lock().insert(key, (obj, Instant::now()));
        }
    }

    /// The written object for `key` if it is newer than the cached one and still fresh;
    /// forgets it otherwise.
    fn overlay(&self, key: &str, cached: Option<&Arc<K>>) -> Option<Arc<K>> {
        let mut written = self.written.lock();
        let (obj, at) = written.get(key)?;
        let fresh = at.elapsed() < self.ttl;
        if fresh && cached.is_none_or(|c| newer(obj.as_ref(), c.as_ref())) {
            return Some(obj.clone());
        }
        written.remove(key);
        None
    }

    /// The newer of the cached and the written object under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        let cached = self.cache.get_by_key(key);
        self.overlay(key, cached.as_ref()).or(cached)
    }

    /// Every object: the cache's, each replaced by a newer write, plus written objects the
    /// cache does not have yet.
    pub fn list(&self) -> Vec<Arc<K>> {
        let mut out = Vec::new();
        let mut keys = Vec::new();
        for (key, cached) in self.cache.entries() {
            out.push(self.overlay(key.as_str(), Some(&cached)).unwrap_or(cached));
            keys.push(key);
        }
        out.extend(self.only_written(&keys));
        out
    }

    /// The objects whose index `index_name` has `value`, with writes overlaid (a written
    /// object joins or leaves the bucket by its own index values).
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let mut out = Vec::new();
        let mut keys = Vec::new();
        for cached in self.cache.by_index(index_name, value)? {
            let Ok(key) = meta_namespace_key(cached.as_ref()) else {
                continue;
            };
            let current = self.overlay(key.as_str(), Some(&cached)).unwrap_or(cached);
            if self
                .cache
                .index_values(index_name, &current)?
                .iter()
                .any(|v| v == value)
            {
                out.push(current);
            }
            keys.push(key);
        }
        for written in self.only_written(&keys) {
            if self
                .cache
                .index_values(index_name, &written)?
                .iter()
                .any(|v| v == value)
            {
                out.push(written);
            }
        }
        Ok(out)
    }

    /// Fresh written objects whose keys are not in `seen` and not cached at least as new.
    fn only_written(&self, seen: &[ObjectKey]) -> Vec<Arc<K>> {
        let keys: Vec<ObjectKey> = {
            let written = self.written.lock();
            written
                .keys()
                .filter(|k| !seen.contains(k))
                .cloned()
                .collect()
        };
        keys.iter()
            .filter_map(|key| {
                let cached = self.cache.get_by_key(key.as_str());
                self.overlay(key.as_str(), cached.as_ref())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::{Indexers, Store};

    fn cm(name: &str, rv: &str, app: &str) -> Arc<ConfigMap> {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.resource_version = Some(rv.into());
        cm.metadata.labels = Some([("app".to_owned(), app.to_owned())].into());
        Arc::new(cm)
    }

    fn by_app(cm: &ConfigMap) -> Vec<String> {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .cloned()
            .into_iter()
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn writes_show_until_the_cache_catches_up_or_they_expire() {
        let store = Store::new(Indexers::new().index("app", by_app));
        store.add(cm("a", "5", "web")).unwrap();
        let cache = MutationCache::new(store.read_only(), Duration::from_secs(60));
        cache.mutation(cm("a", "7", "db"));
        cache.mutation(cm("new", "8", "web"));
        let rv = |o: Option<Arc<ConfigMap>>| o.unwrap().metadata.resource_version.clone().unwrap();
        assert_eq!(rv(cache.get_by_key("a")), "7", "the write is newer");
        assert_eq!(cache.list().len(), 2);
        let web: Vec<_> = cache
            .by_index("app", "web")
            .unwrap()
            .iter()
            .map(|o| o.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            web,
            ["new"],
            "a left the web bucket with its write; new joined it"
        );
        // The informer catches up: the cache's own object wins and the write is forgotten.
        store.add(cm("a", "9", "db")).unwrap();
        assert_eq!(rv(cache.get_by_key("a")), "9");
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(
            cache.get_by_key("new").is_none(),
            "expired: the informer may never see it"
        );
    }
}
