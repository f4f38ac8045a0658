//! Making a controller: of a Rust type (`new`, `new_with`) or of a kind known at run time
//! (`dynamic`, `dynamic_with`), each reading its shared informer (with the shard's label
//! when sharded), and the kinds a sharder must place for it.

use std::{sync::Arc, time::Duration};

use kube::{
    Resource,
    api::{ApiResource, DynamicObject},
    discovery::Scope,
};
use kube_informer::{
    factory::{FactoryScope, InformerSpec, SharedInformerFactory},
    informer::SharedIndexInformer,
    workqueue::RateLimitingQueue,
};

use super::{Controller, ControllerOptions, Expectations, Watchable, own_writes, relations};
use crate::sharding::{Placement, ShardedKind};

/// The informer of `T` a controller reads: the factory's as `spec` says, and, sharded, also
/// selecting the shard's label.
pub(super) fn informer_for<T>(
    factory: &SharedInformerFactory,
    spec: InformerSpec<T>,
    shard: Option<&(String, String)>,
) -> SharedIndexInformer<T>
where
    T: Watchable,
    T::Scope: FactoryScope,
{
    factory.informer_with::<T>(sharded_spec(spec, shard))
}

/// `spec`, and, sharded, the shard's label as well.
pub(super) fn sharded_spec<T>(
    spec: InformerSpec<T>,
    shard: Option<&(String, String)>,
) -> InformerSpec<T>
where
    T: Resource + Clone + Send + Sync + 'static,
{
    match shard {
        Some((ring, shard)) => {
            let label = crate::sharding::shard_selectors(ring, shard);
            spec.and_labels(label.label_selector().unwrap_or_default())
        }
        None => spec,
    }
}

/// What a sharder places of `resource` for a controller on `factory`: in the informer's
/// namespaces (`namespaces`, else the factory's) when it is limited to some, so that a
/// namespaced operator needs no cluster-wide access; everywhere otherwise.
pub(super) fn sharded_kinds(
    factory: &SharedInformerFactory,
    namespaces: Option<&[String]>,
    resource: &ApiResource,
    namespaced: bool,
    placement: Placement,
) -> Vec<ShardedKind> {
    let client = factory.client();
    let namespaces = namespaces
        .filter(|n| !n.is_empty())
        .or_else(|| factory.namespaces());
    match namespaces {
        Some(namespaces) if namespaced => namespaces
            .iter()
            .map(|ns| ShardedKind::dynamic(client.clone(), Some(ns), resource, placement))
            .collect(),
        _ => vec![ShardedKind::dynamic(
            client.clone(),
            None,
            resource,
            placement,
        )],
    }
}

impl<K> Controller<K>
where
    K: Watchable,
    K::Scope: FactoryScope,
{
    /// A controller of `K`, reading `factory`'s shared informer of `K`. `options` are the
    /// workers' (count, retries, drain deadline) and its name (in metrics, logs, spans).
    pub fn new(factory: &SharedInformerFactory, options: ControllerOptions) -> Self {
        Self::new_with(factory, InformerSpec::new(), options)
    }

    /// A controller of the `K` objects `spec` selects (its namespaces, label and field
    /// selectors, transform, indexes): only those are cached and reconciled, and the
    /// informer is shared with whoever asks the factory for the same spec.
    /// controller-runtime's `ByObject`, kube-runtime's `Controller::new(api, config)`.
    ///
    /// ```no_run
    /// # fn example(factory: &kube_informer::factory::SharedInformerFactory) {
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use kube_informer::{Selectors, factory::InformerSpec};
    /// use kube_informer_runtime::controller::{Controller, ControllerOptions};
    ///
    /// // Only the team's Deployments, in its two namespaces.
    /// let spec = InformerSpec::new()
    ///     .selectors(Selectors::default().in_namespaces(["shop", "checkout"]).labels("team=payments"));
    /// let controller = Controller::<Deployment>::new_with(factory, spec, ControllerOptions::default().name("payments"));
    /// # let _ = controller;
    /// # }
    /// ```
    pub fn new_with(
        factory: &SharedInformerFactory,
        spec: InformerSpec<K>,
        options: ControllerOptions,
    ) -> Self {
        let sharded = options.shard.as_ref().map(|_| {
            let namespaces = spec.current_selectors().namespaces();
            let resource = ApiResource::erase::<K>(&());
            sharded_kinds(
                factory,
                namespaces,
                &resource,
                K::Scope::NAMESPACED,
                Placement::Own,
            )
        });
        let informer = informer_for::<K>(factory, spec, options.shard.as_ref());
        Self::assemble(
            factory,
            informer,
            (),
            K::Scope::NAMESPACED,
            sharded,
            options,
        )
    }
}

impl Controller<DynamicObject> {
    /// A controller of objects known only at run time (a custom resource without a Rust
    /// type): `resource` names them (from discovery, or
    /// [`ApiResource::from_gvk`]), `scope` says whether they live in namespaces. The
    /// reconcile gets [`DynamicObject`]s; relations, predicates, sharding and the rest work
    /// as for a typed controller. kube-runtime's `Controller::new_with(api, config, dyntype)`.
    ///
    /// ```no_run
    /// # fn example(factory: &kube_informer::factory::SharedInformerFactory) {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::{api::{ApiResource, GroupVersionKind}, discovery::Scope};
    /// use kube_informer_runtime::controller::{Controller, ControllerOptions};
    ///
    /// let widgets = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    /// let controller = Controller::dynamic(factory, &widgets, Scope::Namespaced, ControllerOptions::default().name("widgets"))
    ///     .owns::<ConfigMap>(); // ConfigMaps whose controller owner is a Widget
    /// # let _ = controller;
    /// # }
    /// ```
    pub fn dynamic(
        factory: &SharedInformerFactory,
        resource: &ApiResource,
        scope: Scope,
        options: ControllerOptions,
    ) -> Self {
        Self::dynamic_with(factory, resource, scope, InformerSpec::new(), options)
    }

    /// [`dynamic`](Self::dynamic), for the objects `spec` selects (see
    /// [`new_with`](Controller::new_with)).
    pub fn dynamic_with(
        factory: &SharedInformerFactory,
        resource: &ApiResource,
        scope: Scope,
        spec: InformerSpec<DynamicObject>,
        options: ControllerOptions,
    ) -> Self {
        let namespaced = matches!(scope, Scope::Namespaced);
        let sharded = options.shard.as_ref().map(|_| {
            let namespaces = spec.current_selectors().namespaces();
            sharded_kinds(factory, namespaces, resource, namespaced, Placement::Own)
        });
        let spec = sharded_spec(spec, options.shard.as_ref());
        let informer = factory.dynamic_informer_with(resource, scope, spec);
        Self::assemble(
            factory,
            informer,
            resource.clone(),
            namespaced,
            sharded,
            options,
        )
    }
}

impl<K> Controller<K>
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
{
    fn assemble(
        factory: &SharedInformerFactory,
        informer: SharedIndexInformer<K>,
        dyntype: K::DynamicType,
        namespaced: bool,
        sharded_kinds: Option<Vec<ShardedKind>>,
        options: ControllerOptions,
    ) -> Self {
        let metrics = options.metrics.clone();
        let name = options.name.clone();
        let read_your_writes = options.read_your_writes;
        let mut config = kube_informer::workqueue::QueueConfig::default().name(name.clone());
        if let Some(metrics) = &metrics {
            config = config.metrics(metrics.core());
        }
        let queue = RateLimitingQueue::new(config);
        let enqueue = relations::Enqueue {
            queue: queue.clone(),
            debounce: options
                .debounce
                .map(|period| Arc::new(relations::Debounce::new(period))),
            prioritize: options.prioritize,
        };
        let owner = Arc::new(relations::OwnerKind::of::<K>(&dyntype, namespaced));
        let mut controller = Self {
            factory: factory.clone(),
            informer,
            dyntype,
            owner,
            queue,
            enqueue,
            options,
            name,
            predicate: None,
            event_filter: relations::EventFilter::default(),
            resync: None,
            cache_sync_timeout: Duration::from_secs(120),
            metrics,
            expectations: Expectations::default(),
            syncs: Vec::new(),
            relations: Vec::new(),
            triggers: Vec::new(),
            sharded_kinds: sharded_kinds.unwrap_or_default(),
            own_writes: Arc::new(own_writes::OwnWrites::new(read_your_writes)),
        };
        controller.wait_for(controller.informer.clone());
        let store = controller.informer.store();
        (controller.own_writes).cache(std::any::TypeId::of::<K>(), store, true);
        controller
    }
}
