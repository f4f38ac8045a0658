//! The manager's controllers: made on its factory with its metrics (and sharding), run
//! while it leads, their kinds handed to the sharder.

use std::sync::Arc;

use kube::{
    api::{ApiResource, DynamicObject},
    discovery::Scope,
};
use kube_informer::factory::InformerSpec;

use super::{Manager, Runnable, Stop, sharding};
use crate::controller::{Controller, ControllerOptions, ErrorPolicy, Reconciler, Watchable};

impl Manager {
    /// A controller of `K` on the manager's factory, recording reconcile metrics.
    pub fn controller<K>(&self, options: ControllerOptions) -> Controller<K>
    where
        K: Watchable,
    {
        self.controller_with(InformerSpec::new(), options)
    }

    /// A controller of the `K` objects `spec` selects (see [`Controller::new_with`]).
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager) {
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use kube_informer::{Selectors, factory::InformerSpec};
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// let spec = InformerSpec::new().selectors(Selectors::default().labels("team=payments"));
    /// let controller = manager.controller_with::<Deployment>(spec, ControllerOptions::default().name("payments"));
    /// # let _ = controller;
    /// # }
    /// ```
    pub fn controller_with<K>(
        &self,
        spec: InformerSpec<K>,
        options: ControllerOptions,
    ) -> Controller<K>
    where
        K: Watchable,
    {
        Controller::new_with(&self.factory, spec, self.controller_options(options))
    }

    /// A controller of objects known only at run time (see [`Controller::dynamic`]) on the
    /// manager's factory, recording reconcile metrics (and sharded, when the manager is).
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager) {
    /// use kube::{api::{ApiResource, GroupVersionKind}, discovery::Scope};
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// let widgets = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    /// let controller = manager.dynamic_controller(&widgets, Scope::Namespaced, ControllerOptions::default().name("widgets"));
    /// # let _ = controller;
    /// # }
    /// ```
    pub fn dynamic_controller(
        &self,
        resource: &ApiResource,
        scope: Scope,
        options: ControllerOptions,
    ) -> Controller<DynamicObject> {
        self.dynamic_controller_with(resource, scope, InformerSpec::new(), options)
    }

    /// [`dynamic_controller`](Self::dynamic_controller) for the objects `spec` selects.
    pub fn dynamic_controller_with(
        &self,
        resource: &ApiResource,
        scope: Scope,
        spec: InformerSpec<DynamicObject>,
        options: ControllerOptions,
    ) -> Controller<DynamicObject> {
        let options = self.controller_options(options);
        Controller::dynamic_with(&self.factory, resource, scope, spec, options)
    }

    /// The manager's metrics and sharding, added to a controller's options.
    pub(super) fn controller_options(&self, options: ControllerOptions) -> ControllerOptions {
        self.sharded_options(options, true)
    }

    /// [`controller_options`](Self::controller_options), in range mode only if `ranges`
    /// (a fleet's controllers are placed by labels, in each member, in either mode).
    pub(super) fn sharded_options(
        &self,
        options: ControllerOptions,
        ranges: bool,
    ) -> ControllerOptions {
        let mut options = options.metrics(&self.controller_metrics);
        if let Some(sharding) = &self.options.sharding {
            let (ring, shard) = (sharding.ring.clone(), sharding.shard.clone());
            options.shard = Some(match self.range_share.as_ref().filter(|_| ranges) {
                Some(share) => crate::sharding::Shard::in_ranges(ring, shard, share.clone()),
                None => crate::sharding::Shard::new(ring, shard),
            });
        }
        options
    }

    /// Range mode: the coordinator on every replica (it plans while elected) and the
    /// replica's slots while it holds its shard Lease.
    pub(super) fn start_ranges(&mut self) {
        let (Some(sharding), Some(share), Some(elector), Some(leases)) = (
            &self.options.sharding,
            &self.range_share,
            &self.elector,
            &self.leases,
        ) else {
            return;
        };
        let (sharding, share, lease, leases) = (
            sharding.clone(),
            share.clone(),
            elector.config().clone(),
            leases.clone(),
        );
        let (coordinating, slot_leases) = (sharding.clone(), leases.clone());
        self.add("slot coordinator", false, move |cancel| {
            sharding::run_coordinator(coordinating, lease, leases, cancel)
        });
        self.add("slots", true, move |cancel| {
            sharding::run_slots(sharding, slot_leases, share, cancel)
        });
    }

    /// Runs `controller` with `reconcile`, `error_policy` and `ctx` (only while leading,
    /// when elected, unless it
    /// [runs on every replica](crate::controller::ControllerOptions::runs_on_every_replica)).
    /// Each controller needs its own name
    /// ([`ControllerOptions::name`]): a second one of a name makes
    /// [`run_until`](Manager::run_until) refuse to start with
    /// [`ManagerError::DuplicateController`](super::ManagerError::DuplicateController).
    pub fn add_controller<K, Ctx, R, P>(
        &mut self,
        controller: Controller<K>,
        reconcile: R,
        error_policy: P,
        ctx: Arc<Ctx>,
    ) where
        K: kube::Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Send + Sync + 'static,
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
        P: ErrorPolicy<K, R::Error, Ctx>,
    {
        let name = controller.name().to_owned();
        let leader_only = !controller.runs_on_every_replica();
        self.register_name(&name);
        self.add_sharded_kinds(controller.sharded_kinds());
        self.declared
            .extend(controller.declared_writes().permissions());
        self.attribution.add(controller.own_writes());
        self.runnables.push(Runnable {
            name,
            leader_only,
            support: false,
            start: Box::new(move |stop: Stop| {
                Box::pin(async move {
                    controller
                        .run_until(reconcile, error_policy, ctx, stop.graceful, stop.halt)
                        .await
                        .map_err(|e| e.to_string())
                })
            }),
        });
    }

    /// Notes a controller's name; a second one of a name makes the manager refuse to run.
    pub(super) fn register_name(&mut self, name: &str) {
        if !self.controller_names.insert(name.to_owned()) {
            tracing::error!(controller = %name, "a second controller of this name: the manager will refuse to run");
            self.duplicate_controller
                .get_or_insert_with(|| name.to_owned());
        }
    }

    /// Registers a sharded controller's kinds with the sharder, started with the first.
    fn add_sharded_kinds(&mut self, kinds: &[crate::sharding::ShardedKind]) {
        if kinds.is_empty() || self.options.sharding.is_none() {
            return;
        }
        self.sharded_kinds.extend("", kinds);
        self.start_sharder();
    }

    /// Runs the ring's sharder (once), placing the kinds in `sharded_kinds` as they change.
    pub(super) fn start_sharder(&mut self) {
        let (Some(sharding), Some(elector), Some(leases)) =
            (&self.options.sharding, &self.elector, &self.leases)
        else {
            return;
        };
        if self.sharder_started {
            return;
        }
        self.sharder_started = true;
        let (sharding, lease, leases, kinds) = (
            sharding.clone(),
            elector.config().clone(),
            leases.clone(),
            self.sharded_kinds.clone(),
        );
        self.add("sharder", false, move |cancel| {
            sharding::run_sharder(sharding, lease, leases, kinds, cancel)
        });
    }
}
