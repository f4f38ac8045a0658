//! The objects related to a controller's own: children it owns and other objects it
//! watches, each read from a shared informer of its own scope ([`InformerSpec`]: namespaces,
//! label and field selectors, metadata only), as controller-runtime's
//! `Owns(obj, WithPredicates(...))` and `ByObject` cache options and kube-runtime's
//! `owns(api, watcher::Config)` allow. A relation without a spec reads the factory's
//! default informer of its type.

use std::fmt::Debug;

use kube::{
    Resource,
    api::{ApiResource, DynamicObject, PartialObjectMeta},
    discovery::Scope,
};
use kube_informer::{ObjectKey, factory::FactoryScope, factory::InformerSpec};

use super::{
    Change, Controller, Watchable, handlers,
    predicate::Predicate,
    read::{Dynamic, Metadata, Typed},
    trigger,
};
use crate::sharding::Placement;

/// How a controller reads a related kind `T`: the informer's [`InformerSpec`] (which
/// objects are cached), and a [`Predicate`] (which of their updates reconcile;
/// controller-runtime's `WithPredicates`). An `InformerSpec` alone converts into one.
///
/// ```no_run
/// # fn example(manager: &kube_informer_runtime::manager::Manager) {
/// use k8s_openapi::api::{apps::v1::{Deployment, ReplicaSet}};
/// use kube_informer::{Selectors, factory::InformerSpec};
/// use kube_informer_runtime::controller::{ControllerOptions, Relation, predicate};
///
/// let replicas = Relation::new()
///     .spec(InformerSpec::new().selectors(Selectors::default().labels("app=web")))
///     .predicate(predicate::generation()); // a ReplicaSet's status alone reconciles nothing
/// let controller = manager
///     .controller::<Deployment>(ControllerOptions::default().name("web"))
///     .owns_with::<ReplicaSet>(replicas);
/// # let _ = controller;
/// # }
/// ```
pub struct Relation<T> {
    spec: InformerSpec<T>,
    predicate: Option<Predicate<T>>,
}

impl<T> std::fmt::Debug for Relation<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relation")
            .field("spec", &self.spec)
            .field("predicate", &self.predicate.is_some())
            .finish()
    }
}

impl<T: Resource + Clone + Send + Sync + 'static> Default for Relation<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Resource + Clone + Send + Sync + 'static> Relation<T> {
    /// The factory's informer of `T`, every update.
    pub fn new() -> Self {
        Self {
            spec: InformerSpec::new(),
            predicate: None,
        }
    }

    /// Read the objects `spec` selects.
    #[must_use]
    pub fn spec(mut self, spec: InformerSpec<T>) -> Self {
        self.spec = spec;
        self
    }

    /// Reconcile on the updates `predicate` passes only (adds, deletes and resyncs always
    /// do). Called again, the predicates combine: an update must pass both.
    #[must_use]
    pub fn predicate(mut self, predicate: Predicate<T>) -> Self {
        self.predicate = Some(match self.predicate.take() {
            Some(earlier) => earlier.and(predicate),
            None => predicate,
        });
        self
    }
}

impl<T: Resource + Clone + Send + Sync + 'static> From<InformerSpec<T>> for Relation<T> {
    fn from(spec: InformerSpec<T>) -> Self {
        Self::new().spec(spec)
    }
}

impl<K> Controller<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
{
    /// Reconcile the controller owner of every `C` that changes (the ownerReference with
    /// `controller: true` of kind `K`), deletions and tombstones included; children without
    /// such an owner are ignored. Every `C` the factory sees is cached; see
    /// [`owns_with`](Self::owns_with) to cache fewer.
    #[must_use]
    pub fn owns<C: Watchable>(self) -> Self {
        self.owns_with::<C>(Relation::new())
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
    pub fn owns_with<C: Watchable>(self, relation: impl Into<Relation<C>>) -> Self {
        let Relation { spec, predicate } = relation.into();
        let handler = handlers::owned::<C>(
            self.enqueue.via("owns", trigger::short_type_name::<C>()),
            self.owner.clone(),
            self.expectations.clone(),
            self.updates(predicate),
        );
        // Sharded, children are labelled with their owner's shard: select them by it.
        self.relate(Typed, spec, Some(Placement::Controller), handler)
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
    pub fn owns_metadata<C>(self, relation: impl Into<Relation<PartialObjectMeta<C>>>) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        C::Scope: FactoryScope,
    {
        let Relation { spec, predicate } = relation.into();
        let handler = handlers::owned::<PartialObjectMeta<C>>(
            self.enqueue.via("owns", trigger::short_type_name::<C>()),
            self.owner.clone(),
            self.expectations.clone(),
            self.updates(predicate),
        );
        self.relate(Metadata, spec, Some(Placement::Controller), handler)
    }

    /// A relation's update filter: its predicate and the controller's event filter.
    fn updates<T>(&self, predicate: Option<Predicate<T>>) -> handlers::Updates<T> {
        handlers::Updates {
            predicate,
            filter: self.event_filter.clone(),
        }
    }

    /// Reconcile the keys `map` gives for every `O` that changes (old and new state of an
    /// update, and deleted objects, tombstones included). Every `O` the factory sees is
    /// cached; see [`watches_with`](Self::watches_with) to cache fewer.
    #[must_use]
    pub fn watches<O: Watchable>(
        self,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        self.watches_with(Relation::new(), map)
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
        relation: impl Into<Relation<O>>,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let Relation { spec, predicate } = relation.into();
        let handler = handlers::mapped(
            self.enqueue.via("watches", trigger::short_type_name::<O>()),
            map,
            self.updates(predicate),
        );
        self.relate(Typed, spec, None, handler)
    }

    /// [`watches_with`](Self::watches_with), caching only the watched objects' metadata
    /// (`PartialObjectMeta<O>`): for a map that reads names, labels or annotations only.
    #[must_use]
    pub fn watches_metadata<O>(
        self,
        relation: impl Into<Relation<PartialObjectMeta<O>>>,
        map: impl Fn(&PartialObjectMeta<O>) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self
    where
        O: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        O::Scope: FactoryScope,
    {
        let Relation { spec, predicate } = relation.into();
        let handler = handlers::mapped(
            self.enqueue.via("watches", trigger::short_type_name::<O>()),
            map,
            self.updates(predicate),
        );
        self.relate(Metadata, spec, None, handler)
    }

    /// [`owns_with`](Self::owns_with) for children known only at run time (`resource`,
    /// `scope` from discovery): every `DynamicObject` of it that changes reconciles its
    /// controller owner.
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager) {
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use kube::{api::{ApiResource, GroupVersionKind}, discovery::Scope};
    /// use kube_informer_runtime::controller::{ControllerOptions, Relation};
    ///
    /// let backups = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Backup"));
    /// let controller = manager
    ///     .controller::<Deployment>(ControllerOptions::default().name("web"))
    ///     .owns_dynamic(&backups, Scope::Namespaced, Relation::new());
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn owns_dynamic(
        self,
        resource: &ApiResource,
        scope: Scope,
        relation: impl Into<Relation<DynamicObject>>,
    ) -> Self {
        let Relation { spec, predicate } = relation.into();
        let handler = handlers::owned::<DynamicObject>(
            self.enqueue.via("owns", resource.kind.as_str().into()),
            self.owner.clone(),
            self.expectations.clone(),
            self.updates(predicate),
        );
        let children = Dynamic(resource, scope);
        self.relate(children, spec, Some(Placement::Controller), handler)
    }

    /// [`watches_with`](Self::watches_with) for objects known only at run time (`resource`,
    /// `scope` from discovery).
    #[must_use]
    pub fn watches_dynamic(
        self,
        resource: &ApiResource,
        scope: Scope,
        relation: impl Into<Relation<DynamicObject>>,
        map: impl Fn(&DynamicObject) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let Relation { spec, predicate } = relation.into();
        let handler = handlers::mapped(
            self.enqueue.via("watches", resource.kind.as_str().into()),
            map,
            self.updates(predicate),
        );
        self.relate(Dynamic(resource, scope), spec, None, handler)
    }

    /// [`watches_with`](Self::watches_with), with a map that sees each change whole: the
    /// old and the new object of an update at once (controller-runtime's
    /// `handler.Funcs{UpdateFunc}`), say to reconcile only the targets a change added or
    /// removed.
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager) {
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    /// use kube_informer::ObjectKey;
    /// use kube_informer_runtime::controller::{Change, ControllerOptions, Relation};
    ///
    /// let targets = |cm: &ConfigMap| -> Vec<ObjectKey> {
    ///     cm.data.iter().flatten().filter_map(|(k, _)| k.parse().ok()).collect()
    /// };
    /// let controller = manager
    ///     .controller::<Deployment>(ControllerOptions::default().name("web"))
    ///     .watches_changes(Relation::new(), move |change: Change<'_, ConfigMap>| match change {
    ///         Change::Added(cm) | Change::Deleted(cm) => targets(cm),
    ///         // Only the Deployments a change added or dropped, not every one it names.
    ///         Change::Updated { old, new } => {
    ///             let (before, after) = (targets(old), targets(new));
    ///             let added = after.iter().filter(|k| !before.contains(k));
    ///             let dropped = before.iter().filter(|k| !after.contains(k));
    ///             added.chain(dropped).cloned().collect()
    ///         }
    ///     });
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn watches_changes<O: Watchable>(
        self,
        relation: impl Into<Relation<O>>,
        map: impl Fn(Change<'_, O>) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let Relation { spec, predicate } = relation.into();
        let handler = handlers::mapped_changes(
            self.enqueue.via("watches", trigger::short_type_name::<O>()),
            map,
            self.updates(predicate),
        );
        self.relate(Typed, spec, None, handler)
    }
}
