//! [`ExpirationCache`]: objects that expire after a time to live (client-go's
//! `ExpirationCache`), on tokio's clock so that tests can pause and advance it.

use std::{sync::Arc, time::Duration};

use kube::Resource;
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::{FastMap, KeyError, ObjectKey, meta_namespace_key};

/// A keyed cache whose entries expire: each has a time to live (the cache's default, or its
/// own). Reads never return an expired entry, and remove it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer::caches::expiration::ExpirationCache;
///
/// let cache = ExpirationCache::new(Duration::from_secs(30));
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("token".into());
/// cache.add(cm).unwrap();
/// assert!(cache.get_by_key("token").is_some());
/// tokio::time::advance(Duration::from_secs(31)).await;
/// assert!(cache.get_by_key("token").is_none());
/// # }
/// ```
pub struct ExpirationCache<K> {
    entries: Mutex<FastMap<ObjectKey, (Arc<K>, Instant)>>,
    ttl: Duration,
}

impl<K> std::fmt::Debug for ExpirationCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpirationCache")
            .field("entries", &self.entries.lock().len())
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl<K: Resource> ExpirationCache<K> {
    /// An empty cache whose entries live `ttl` unless given their own.
    pub fn new(ttl: Duration) -> Self {
        Self {
            entries: Mutex::new(FastMap::default()),
            ttl,
        }
    }

    /// Adds (or replaces) `obj`, living the default time to live.
    pub fn add(&self, obj: impl Into<Arc<K>>) -> Result<(), KeyError> {
        self.add_with_ttl(obj, self.ttl)
    }

    /// Adds (or replaces) `obj`, living `ttl`.
    pub fn add_with_ttl(&self, obj: impl Into<Arc<K>>, ttl: Duration) -> Result<(), KeyError> {
        let obj = obj.into();
        let key = meta_namespace_key(obj.as_ref())?;
        self.entries.lock().insert(key, (obj, Instant::now() + ttl));
        Ok(())
    }

    /// The live object under `key` (an expired one is removed).
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        let mut entries = self.entries.lock();
        match entries.get(key) {
            Some((obj, until)) if Instant::now() < *until => Some(obj.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Removes the object under `key`.
    pub fn delete_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.entries.lock().remove(key).map(|(obj, _)| obj)
    }

    /// Every live object (expired ones are removed).
    pub fn list(&self) -> Vec<Arc<K>> {
        let now = Instant::now();
        let mut entries = self.entries.lock();
        entries.retain(|_, (_, until)| now < *until);
        entries.values().map(|(obj, _)| obj.clone()).collect()
    }

    /// How many live objects.
    pub fn len(&self) -> usize {
        self.list().len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn cm(name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm
    }

    #[tokio::test(start_paused = true)]
    async fn each_entry_lives_its_own_time() {
        let cache = ExpirationCache::new(Duration::from_secs(10));
        cache.add(cm("default")).unwrap();
        cache
            .add_with_ttl(cm("short"), Duration::from_secs(2))
            .unwrap();
        cache
            .add_with_ttl(cm("long"), Duration::from_secs(60))
            .unwrap();
        assert_eq!(cache.len(), 3);
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(cache.get_by_key("short").is_none());
        assert_eq!(cache.len(), 2);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(cache.list().len(), 1, "only the long-lived one");
        cache.add(cm("default")).unwrap();
        assert!(cache.get_by_key("default").is_some(), "re-adding renews it");
        assert!(cache.delete_by_key("long").is_some());
    }
}
