//! Making a controller: of a Rust type (`new`, `new_with`) or of a kind known at run time
//! (`dynamic`, `dynamic_with`), each reading its shared informer through
//! [`read`](super::read::read), as its relations do.

use std::{borrow::Cow, sync::Arc, time::Duration};

use kube::{
    Resource,
    api::{ApiResource, DynamicObject},
    discovery::Scope,
};
use kube_informer::{
    ObjectKey,
    factory::{FactoryScope as _, InformerSpec, SharedInformerFactory},
    workqueue::{QueueConfig, RateLimitingQueue},
};

use super::{
    Controller, ControllerOptions, Expectations, Fairness, Watchable, enqueue, handlers,
    own_writes,
    read::{Dynamic, Read, Typed, read},
    sink::{KeySink, Sink},
};
use crate::sharding::Placement;

/// A controller's own kind is placed by each object's own key.
const OWN: Option<Placement> = Some(Placement::Own);

impl<K: Watchable> Controller<K> {
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
        let read = read(factory, options.shard.as_ref(), Typed, spec, OWN);
        Self::assemble(factory, read, (), K::Scope::NAMESPACED, options, None)
    }

    /// A fleet member's controller: its handlers put keys into `sink` (the fleet's queue),
    /// and the fleet's workers call it once started ([`Controller::start_member`]). Sharded,
    /// it reads and places the member's objects as a plain sharded controller does its
    /// cluster's.
    pub(crate) fn for_fleet_member(
        factory: &SharedInformerFactory,
        spec: InformerSpec<K>,
        options: ControllerOptions,
        sink: Arc<dyn KeySink>,
    ) -> Self {
        let read = read(factory, options.shard.as_ref(), Typed, spec, OWN);
        Self::assemble(factory, read, (), K::Scope::NAMESPACED, options, Some(sink))
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
        let shard = options.shard.as_ref();
        let flavour = Dynamic(resource, scope);
        let read = read(factory, shard, flavour, spec, OWN);
        Self::assemble(factory, read, resource.clone(), namespaced, options, None)
    }
}

impl<K> Controller<K>
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
{
    fn assemble(
        factory: &SharedInformerFactory,
        read: Read<K>,
        dyntype: K::DynamicType,
        namespaced: bool,
        options: ControllerOptions,
        shared: Option<Arc<dyn KeySink>>,
    ) -> Self {
        let (metrics, name) = (options.metrics.clone(), options.name.clone());
        let (informer, sharded_kinds) = (read.informer.clone(), read.placed.clone());
        let read_your_writes = options.read_your_writes;
        let (queue, sink) = match shared {
            None => {
                let queue = own_queue(&options);
                (queue.clone(), Sink::Own(queue))
            }
            // A member's keys go to the fleet's queue: its own stays empty, unnamed and
            // unmeasured (it reports nothing under the fleet controller's name).
            Some(sink) => (
                RateLimitingQueue::new(QueueConfig::default()),
                Sink::Shared(sink),
            ),
        };
        let enqueue = enqueue::Enqueue {
            queue: sink,
            debounce: options
                .debounce
                .map(|period| Arc::new(enqueue::Debounce::new(period))),
            prioritize: options.prioritize,
            triggers: Arc::default(),
            relation: "primary",
            kind: K::kind(&dyntype).as_ref().into(),
        };
        let owner = Arc::new(handlers::OwnerKind::of::<K>(&dyntype, namespaced));
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
            event_filter: handlers::EventFilter::default(),
            resync: None,
            cache_sync_timeout: Duration::from_secs(120),
            metrics,
            expectations: Expectations::default(),
            syncs: Vec::new(),
            relations: Vec::new(),
            feeds: Vec::new(),
            sharded_kinds,
            own_writes: Arc::new(own_writes::OwnWrites::new(read_your_writes)),
            writes: crate::rbac::Rbac::default(),
            scope: read.namespaces(),
        };
        controller.wait_for(controller.informer.clone());
        controller.own_writes.cache(read.cache());
        controller.own_writes.primary(controller.owner.clone());
        controller
    }
}

/// A controller's own queue, as its options say.
fn own_queue(options: &ControllerOptions) -> RateLimitingQueue<ObjectKey> {
    let mut config = QueueConfig::default()
        .name(options.name.clone())
        .max_in_flight_per_group(options.group_limit);
    if let Some(metrics) = &options.metrics {
        config = config.metrics(metrics.core());
    }
    if let Some(make) = &options.rate_limiter {
        config = config.rate_limiter(make.make());
    }
    config = match &options.fairness {
        Fairness::ByNamespace => {
            config.fair_by(|key: &ObjectKey| Cow::Borrowed(key.namespace().unwrap_or("")))
        }
        Fairness::By(group_of) => {
            let group_of = group_of.clone();
            config.fair_by(move |key: &ObjectKey| group_of(key))
        }
        Fairness::Off => config,
    };
    RateLimitingQueue::new(config)
}
