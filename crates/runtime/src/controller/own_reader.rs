//! [`OwnReader`]: the cache as the running reconcile wrote it.

use std::{collections::BTreeMap, sync::Arc};

use kube::Resource;
use kube_informer::{ReadOnlyStore, ResourceVersion};
use serde::de::DeserializeOwned;

use super::own_writes::{GroupKind, written};

/// Reads an informer's cache as the running reconcile left it: each object the reconcile
/// recorded with [`wrote`](super::wrote) stands in for the cached copy while the cache is
/// older (or lacks it), and an object it deleted is left out. The next reconcile of the key
/// reads the cache itself with the same effect (see
/// [read your own writes](super#read-your-own-writes)); this is for reads *within* the
/// reconcile that wrote, as controller-runtime's cache-backed client gives them. Outside a
/// reconcile it reads the cache as it is.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use kube::{Api, ResourceExt, api::PostParams};
/// use kube_informer::ReadOnlyStore;
/// use kube_informer_runtime::controller::{Action, Cached, OwnReader, wrote};
///
/// struct Ctx { secrets: Api<Secret>, cached: ReadOnlyStore<Secret> }
///
/// async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
///     let Cached::Present(cm) = cm else { return Ok(Action::Done) };
///     let reader = OwnReader::new(ctx.cached.clone());
///     let key = format!("{}/{}-tls", cm.namespace().unwrap_or_default(), cm.name_any());
///     if reader.get(&key).is_none() {
///         let secret = Secret::default(); // named `<cm>-tls`, owned by the ConfigMap
///         wrote(&ctx.secrets.create(&PostParams::default(), &secret).await?);
///     }
///     assert!(reader.get(&key).is_some()); // the write is seen at once
///     Ok(Action::Done)
/// }
/// ```
#[derive(Debug, Clone)]
pub struct OwnReader<K> {
    store: ReadOnlyStore<K>,
    /// Its objects' kind, when the Rust type does not tell it (dynamic objects).
    kind: Option<GroupKind>,
}

impl<K: Resource + DeserializeOwned + Send + Sync + 'static> OwnReader<K> {
    /// Reads `store` (an informer's: `SharedIndexInformer::store`).
    pub fn new(store: ReadOnlyStore<K>) -> Self {
        Self { store, kind: None }
    }

    /// Reads `store`, a cache of `resource`'s objects: for dynamic objects, whose Rust type
    /// is shared by every kind (only that kind's writes stand in for its objects).
    pub fn of_resource(store: ReadOnlyStore<K>, resource: &kube::api::ApiResource) -> Self {
        let kind = GroupKind {
            group: resource.group.clone(),
            kind: resource.kind.clone(),
        };
        Self {
            store,
            kind: Some(kind),
        }
    }

    /// The object under `key` (`namespace/name`, or `name`), with this reconcile's writes.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        let cached = self.store.get_by_key(key);
        match written::<K>(self.kind.as_ref())
            .into_iter()
            .rev()
            .find(|(k, _, _)| k.as_str() == key)
        {
            Some((_, written, version)) => newest(cached, written, version),
            None => cached,
        }
    }

    /// Every object of the cache, with this reconcile's writes (in key order).
    pub fn list(&self) -> Vec<Arc<K>> {
        let mut objects: BTreeMap<_, _> = self.store.entries().into_iter().collect();
        for (key, written, version) in written::<K>(self.kind.as_ref()) {
            match newest(objects.remove(&key), written, version) {
                Some(obj) => objects.insert(key, obj),
                None => None,
            };
        }
        objects.into_values().collect()
    }
}

/// The cached copy if it is as new as the write (a deletion's cached copy is older by
/// definition: the write's version is the object's last), the written one otherwise.
fn newest<K: Resource>(
    cached: Option<Arc<K>>,
    written: Option<Arc<K>>,
    version: ResourceVersion,
) -> Option<Arc<K>> {
    let cached_version = |obj: &Arc<K>| {
        let version = obj.meta().resource_version.as_deref();
        version.and_then(|v| v.parse::<ResourceVersion>().ok())
    };
    match (cached, written) {
        (Some(cached), Some(_)) if cached_version(&cached).is_some_and(|v| v > version) => {
            Some(cached)
        }
        (_, written) => written,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_informer::Store;

    use super::*;
    use crate::controller::{own_writes::recording, wrote};

    fn cm(name: &str, version: &str, value: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "shop", "resourceVersion": version, "uid": name},
            "data": {"v": value}
        }))
        .unwrap()
    }

    fn value(obj: &Option<Arc<ConfigMap>>) -> Option<String> {
        obj.as_ref()?.data.as_ref()?.get("v").cloned()
    }

    #[tokio::test]
    async fn a_reconcile_reads_what_it_wrote_before_the_cache_has_it() {
        let store: Store<ConfigMap> = Store::default();
        store.add(Arc::new(cm("a", "5", "cached"))).unwrap();
        store.add(Arc::new(cm("gone", "6", "cached"))).unwrap();
        let reader = OwnReader::new(store.read_only());
        recording(Arc::default(), async {
            assert_eq!(value(&reader.get("shop/a")), Some("cached".into()));
            wrote(&cm("a", "7", "written"));
            wrote(&cm("new", "8", "written"));
            // The last finalizer's removal: answered deleting, with no finalizers left.
            let mut deleted = serde_json::to_value(cm("gone", "6", "cached")).unwrap();
            deleted["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z".into();
            wrote(&serde_json::from_value::<ConfigMap>(deleted).unwrap());
            assert_eq!(value(&reader.get("shop/a")), Some("written".into()));
            assert_eq!(value(&reader.get("shop/new")), Some("written".into()));
            assert!(
                reader.get("shop/gone").is_none(),
                "deleted by this reconcile"
            );
            let names: Vec<_> = reader
                .list()
                .iter()
                .map(|o| o.metadata.name.clone().unwrap())
                .collect();
            assert_eq!(names, ["a", "new"]);
            // The cache catches up past the write: its copy wins.
            store.update(Arc::new(cm("a", "9", "newer"))).unwrap();
            assert_eq!(value(&reader.get("shop/a")), Some("newer".into()));
        })
        .await;
        // Outside the reconcile, the cache as it is.
        assert_eq!(value(&reader.get("shop/new")), None);
        assert_eq!(reader.list().len(), 2);
    }

    #[tokio::test]
    async fn a_dynamic_reader_of_one_kind_shows_only_that_kinds_writes() {
        use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
        let dynamic = |api_version: &str, kind: &str| -> DynamicObject {
            serde_json::from_value(serde_json::json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "3"}}))
            .unwrap()
        };
        let widgets = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
        let reader =
            OwnReader::of_resource(Store::<DynamicObject>::default().read_only(), &widgets);
        recording(Arc::default(), async {
            wrote(&dynamic("v1", "ConfigMap")); // named like the widget
            assert!(
                reader.get("shop/web").is_none(),
                "a ConfigMap is not a Widget"
            );
            wrote(&dynamic("example.com/v1", "Widget"));
            assert!(reader.get("shop/web").is_some());
        })
        .await;
    }
}
