//! The objects related to a controller's own: children it owns and other objects it
//! watches, each read from a shared informer of its own scope ([`InformerSpec`]: namespaces,
//! label and field selectors, metadata only), as controller-runtime's
//! `Owns(obj, WithPredicates(...))` and `ByObject` cache options and kube-runtime's
//! `owns(api, watcher::Config)` allow. A relation without a spec reads the factory's
//! default informer of its type.

use std::fmt::Debug;

use kube::{Resource, api::PartialObjectMeta};
use kube_informer::{ObjectKey, factory::FactoryScope, factory::InformerSpec};

use super::{Controller, Watchable, informer_for, relations, sharded_kinds, sharded_spec};
use crate::sharding::Placement;

impl<K> Controller<K>
where
    K: Watchable,
    K::Scope: FactoryScope,
{
    /// Reconcile the controller owner of every `C` that changes (the ownerReference with
    /// `controller: true` of kind `K`), deletions and tombstones included; children without
    /// such an owner are ignored. Every `C` the factory sees is cached; see
    /// [`owns_with`](Self::owns_with) to cache fewer.
    #[must_use]
    pub fn owns<C: Watchable>(self) -> Self
    where
        C::Scope: FactoryScope,
    {
        self.owns_with::<C>(InformerSpec::new())
    }

    /// [`owns`](Self::owns), reading only the `C` objects `spec` selects: say, the children
    /// the operator labels, in its own namespaces, so that it needs no cluster-wide access
    /// to that kind and caches nothing else. The selectors are this relation's only: the
    /// primary kind and other relations keep theirs.
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager) {
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    /// use kube_informer::{Selectors, factory::InformerSpec};
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// let controller = manager
    ///     .controller::<Deployment>(ControllerOptions::default().name("web"))
    ///     // Only the ConfigMaps this operator makes, not every ConfigMap in the cluster.
    ///     .owns_with::<ConfigMap>(InformerSpec::new().selectors(
    ///         Selectors::default().labels("app.kubernetes.io/managed-by=web-operator"),
    ///     ));
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn owns_with<C: Watchable>(mut self, spec: InformerSpec<C>) -> Self
    where
        C::Scope: FactoryScope,
    {
        let handler = relations::owned::<K, C>(
            self.queue.clone(),
            K::Scope::NAMESPACED,
            self.expectations.clone(),
        );
        self.shard_children::<C>(spec.current_selectors().namespaces());
        // Sharded, children are labelled with their owner's shard: select them by it.
        let informer = informer_for::<C>(&self.factory, spec, self.options.shard.as_ref());
        self.relate(informer, handler)
    }

    /// [`owns_with`](Self::owns_with), caching only the children's metadata
    /// (`PartialObjectMeta<C>`): enough to map a child to its owner, at a fraction of the
    /// memory, for children whose content the reconcile reads from the API server or not
    /// at all (controller-runtime's `OnlyMetadata`).
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager) {
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::Secret};
    /// use kube_informer::factory::InformerSpec;
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// let controller = manager
    ///     .controller::<Deployment>(ControllerOptions::default().name("web"))
    ///     .owns_metadata::<Secret>(InformerSpec::new()); // no Secret's data in memory
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn owns_metadata<C>(mut self, spec: InformerSpec<PartialObjectMeta<C>>) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        C::Scope: FactoryScope,
    {
        let handler = relations::owned::<K, PartialObjectMeta<C>>(
            self.queue.clone(),
            K::Scope::NAMESPACED,
            self.expectations.clone(),
        );
        self.shard_children::<C>(spec.current_selectors().namespaces());
        let spec = sharded_spec(spec, self.options.shard.as_ref());
        let informer = self.factory.metadata_informer_with::<C>(spec);
        self.relate(informer, handler)
    }

    /// Sharded, the sharder places `C` by its controller's key, where `C` is read.
    fn shard_children<C>(&mut self, namespaces: Option<&[String]>)
    where
        C: Resource<DynamicType = ()>,
        C::Scope: FactoryScope,
    {
        if self.options.shard.is_some() {
            let kinds = sharded_kinds::<C>(&self.factory, namespaces, Placement::Controller);
            self.sharded_kinds.extend(kinds);
        }
    }

    /// Reconcile the keys `map` gives for every `O` that changes (old and new state of an
    /// update, and deleted objects, tombstones included). Every `O` the factory sees is
    /// cached; see [`watches_with`](Self::watches_with) to cache fewer.
    #[must_use]
    pub fn watches<O: Watchable>(
        self,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self
    where
        O::Scope: FactoryScope,
    {
        self.watches_with(InformerSpec::new(), map)
    }

    /// [`watches`](Self::watches), reading only the `O` objects `spec` selects. Watched kinds
    /// are never sharded: every replica of a sharded controller sees all of them (a key of
    /// another shard is skipped).
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager) {
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    /// use kube_informer::{ObjectKey, Selectors, factory::InformerSpec};
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// // A shared settings ConfigMap in one namespace reconciles every Deployment it names.
    /// let settings = InformerSpec::new().selectors(
    ///     Selectors::default().in_namespace("platform").labels("kind=web-settings"),
    /// );
    /// let controller = manager
    ///     .controller::<Deployment>(ControllerOptions::default().name("web"))
    ///     .watches_with(settings, |cm: &ConfigMap| {
    ///         cm.data.iter().flatten().filter_map(|(k, _)| k.parse::<ObjectKey>().ok()).collect()
    ///     });
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn watches_with<O: Watchable>(
        self,
        spec: InformerSpec<O>,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self
    where
        O::Scope: FactoryScope,
    {
        let handler = relations::mapped(self.queue.clone(), map);
        let informer = informer_for::<O>(&self.factory, spec, None);
        self.relate(informer, handler)
    }

    /// [`watches_with`](Self::watches_with), caching only the watched objects' metadata
    /// (`PartialObjectMeta<O>`): for a map that reads names, labels or annotations only.
    #[must_use]
    pub fn watches_metadata<O>(
        self,
        spec: InformerSpec<PartialObjectMeta<O>>,
        map: impl Fn(&PartialObjectMeta<O>) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self
    where
        O: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        O::Scope: FactoryScope,
    {
        let handler = relations::mapped(self.queue.clone(), map);
        let informer = self.factory.metadata_informer_with::<O>(spec);
        self.relate(informer, handler)
    }
}
