//! What else a manager runs beside its controllers, on every replica: webhook servers,
//! their certificates, and a fleet of clusters.

use std::sync::Arc;

use super::Manager;

impl Manager {
    /// Serves `webhooks` with the manager, on every replica (leader or not: the API server
    /// calls whichever the Service picks), until shutdown, when open requests finish.
    /// See [`webhook`](crate::webhook).
    #[cfg(feature = "webhook")]
    pub fn add_webhooks(&mut self, webhooks: crate::webhook::BoundWebhookServer) {
        self.add("webhooks", false, move |cancel| async move {
            webhooks.run(cancel).await;
            Ok(())
        });
    }

    /// Runs `fleet` from `source` on every replica (members' caches warm on standbys too),
    /// with its per-cluster metrics (`fleet_cluster_*`) on `/metrics` and a `/readyz` check
    /// that fails only when members are read from and none of them is ready: one member down
    /// does not take the operator out of service, losing every member does. Build `source`
    /// on [`factory`](Self::factory): its informers then start with the manager's, count in
    /// `/readyz`, and are in [`rbac`](Self::rbac). See
    /// [`fleet`](crate::fleet).
    pub fn add_fleet<S>(&mut self, fleet: &crate::fleet::Fleet, source: S)
    where
        S: futures_util::Stream<Item = crate::fleet::ClusterEvent> + Send + 'static,
    {
        fleet.register_metrics(&mut self.registry.lock());
        let checked = fleet.clone();
        self.add_readyz_check("fleet", move || {
            let health = checked.health();
            // Members nothing reads from (no controller follows them) are idle, not down.
            let engaged: Vec<_> = health.iter().filter(|h| h.engaged && h.read).collect();
            if engaged.is_empty() || engaged.iter().any(|h| h.ready) {
                return Ok(());
            }
            let names: Vec<&str> = engaged.iter().map(|h| h.name.as_str()).collect();
            Err(format!("no member cluster is ready: {}", names.join(", ")))
        });
        // One line per member, shown with `?verbose` (and with a failure) but not deciding
        // the answer: a member down is that member's problem, not the replica's.
        let detailed = fleet.clone();
        self.readyz_details.push(Arc::new(move || {
            let members = detailed.health().into_iter();
            members
                .map(|h| (format!("fleet cluster {}", h.name), h.verdict()))
                .collect()
        }));
        let fleet = fleet.clone();
        // Members stay engaged until the fleet controllers have drained.
        self.add_support("fleet", move |cancel| async move {
            fleet.run(source, cancel).await;
            Ok(())
        });
    }

    /// Runs `controller` over its fleet (only while leading, when elected, unless it
    /// [runs on every replica](crate::controller::ControllerOptions::runs_on_every_replica)),
    /// with the manager's controller metrics. Every replica keeps the informers it reads in
    /// each member synced — a standby's `/readyz` reflects its members, and a new leader
    /// starts reconciling with warm caches, no relist. On shutdown it drains within its
    /// [`drain_timeout`](crate::controller::ControllerOptions::drain_timeout); on a
    /// leadership loss its reconciles are cancelled at once. Under a sharded manager
    /// ([`ManagerOptions::sharded`](crate::ManagerOptions::sharded)) each replica reconciles
    /// its share of the fleet's `(cluster, object)` pairs — or of whole members, with
    /// [`pin_clusters`](crate::fleet::FleetController::pin_clusters) — placed by the ring's
    /// sharder in each member with the drain protocol of a sharded controller (see
    /// [`sharding`](crate::sharding)). Add the fleet itself with
    /// [`add_fleet`](Self::add_fleet).
    ///
    /// ```no_run
    /// # async fn demo(mut manager: kube_informer_runtime::Manager, fleet: kube_informer_runtime::fleet::Fleet) {
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube_informer_runtime::{controller::{Action, Cached, ControllerOptions}, fleet::FleetController};
    ///
    /// async fn reconcile(_: Cached<ConfigMap>, _: Arc<kube::Client>) -> Result<Action, kube::Error> {
    ///     Ok(Action::Done)
    /// }
    ///
    /// let controller = FleetController::<ConfigMap>::new(&fleet, ControllerOptions::default().name("cms"));
    /// manager.add_fleet_controller(
    ///     controller,
    ///     |cluster| Arc::new(cluster.client().clone()),
    ///     reconcile,
    ///     |_, _, _| Action::Retry,
    /// );
    /// # }
    /// ```
    pub fn add_fleet_controller<K, Ctx, R, P>(
        &mut self,
        controller: crate::fleet::FleetController<K>,
        make_ctx: impl Fn(&crate::fleet::Cluster) -> Arc<Ctx> + Send + Sync + 'static,
        reconcile: R,
        error_policy: P,
    ) where
        K: crate::controller::Watchable,
        Ctx: Send + Sync + 'static,
        R: crate::reconcile::Reconciler<K, Ctx>,
        P: Fn(&crate::reconcile::Cached<K>, &R::Error, &Ctx) -> crate::reconcile::Action
            + Send
            + Sync
            + 'static,
    {
        let sharded = self.options.sharding.is_some();
        let kinds = sharded.then(|| self.sharded_kinds.clone());
        // Placed by labels in each member, also under a range-mode manager.
        let controller = controller.managed(|o| self.sharded_options(o, false), kinds);
        if sharded {
            self.start_sharder();
        }
        let name = controller.name().to_owned();
        let leader_only = !controller.runs_on_every_replica();
        self.register_name(&name);
        if leader_only {
            // Every replica keeps the members' informers warm; the leader reconciles.
            let warm = controller.warm();
            self.add(
                format!("{name}-member-caches"),
                false,
                move |cancel| async move {
                    warm(cancel).await;
                    Ok(())
                },
            );
        }
        self.runnables.push(super::Runnable {
            name,
            leader_only,
            support: false,
            start: Box::new(move |stop: super::Stop| {
                Box::pin(async move {
                    controller
                        .run_until(make_ctx, reconcile, error_policy, stop.graceful, stop.halt)
                        .await;
                    Ok(())
                })
            }),
        });
    }

    /// Keeps `certs` made and rotated, on every replica (see
    /// [`webhook::certs`](crate::webhook::certs)); call
    /// [`provision`](crate::webhook::certs::WebhookCerts::provision) first, before the
    /// webhook server binds.
    #[cfg(feature = "webhook")]
    pub fn add_webhook_certs(&mut self, certs: crate::webhook::certs::WebhookCerts) {
        self.declared.extend(certs.permissions().permissions());
        self.add("webhook-certs", false, move |cancel| async move {
            certs.run(cancel).await;
            Ok(())
        });
    }
}
