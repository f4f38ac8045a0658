//! The manager's RBAC: what it and its controllers need, from what they were built with.

use super::Manager;
use crate::rbac::{Rbac, Verb};

impl Manager {
    /// The permissions this manager needs to run what it has been given so far: call it
    /// after adding every controller (and after [`recorder`](Self::recorder), if the
    /// operator records Events). See [`rbac`](crate::rbac) for what each part needs, and
    /// [`Rbac::yaml`] for the ClusterRole and Roles.
    ///
    /// ```no_run
    /// # async fn example(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    /// use kube_informer_runtime::{Action, controller::ControllerOptions, manager::{Manager, ManagerOptions}, rbac::Verb};
    ///
    /// let mut manager = Manager::new(client, ManagerOptions::default()).await?;
    /// let controller = manager
    ///     .controller::<Deployment>(ControllerOptions::default().name("web"))
    ///     .owns::<ConfigMap>()
    ///     .writes::<ConfigMap>(&[Verb::Create, Verb::Update])
    ///     .writes_own(&[Verb::Patch]);
    /// manager.add_controller(controller, |_, _| async { Ok::<_, kube::Error>(Action::Done) }, |_, _, _| Action::Retry, Arc::new(()));
    /// if std::env::args().any(|a| a == "--print-rbac") {
    ///     print!("{}", manager.rbac().yaml("web-operator"));
    ///     return Ok(());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn rbac(&self) -> Rbac {
        let mut rbac = self.declared.clone();
        for watched in self.factory.watched() {
            let (group, resource) = (&watched.group, &watched.resource);
            rbac.allow(
                group,
                resource,
                &watched.namespaces,
                &[Verb::List, Verb::Watch],
            );
        }
        if let Some(namespace) = &self.lease_namespace {
            let mut verbs = vec![Verb::Get, Verb::Create, Verb::Update];
            if self.options.sharding.is_some() {
                verbs.push(Verb::List); // the ring's live shards
            }
            rbac.allow(
                "coordination.k8s.io",
                "leases",
                std::slice::from_ref(namespace),
                &verbs,
            );
        }
        // A fleet member's kinds are written in the member, not under this manager's account.
        for kind in self
            .sharded_kinds
            .all()
            .iter()
            .filter(|k| k.member().is_none())
        {
            let namespaces: Vec<String> = kind.namespace().map(str::to_owned).into_iter().collect();
            // The sharder's labels; `get`: whether a drained object still exists.
            let verbs = [Verb::Get, Verb::List, Verb::Watch, Verb::Patch];
            rbac.allow(
                &kind.resource().group,
                &kind.resource().plural,
                &namespaces,
                &verbs,
            );
        }
        if self.recorder.get().is_some() {
            let namespaces = self.factory.namespaces().unwrap_or_default();
            let verbs = [Verb::Create, Verb::Patch];
            rbac.allow("events.k8s.io", "events", namespaces, &verbs);
        }
        #[cfg(feature = "tls")]
        if self.options.secure_metrics.is_some() {
            rbac.allow(
                "authentication.k8s.io",
                "tokenreviews",
                &[],
                &[Verb::Create],
            );
            rbac.allow(
                "authorization.k8s.io",
                "subjectaccessreviews",
                &[],
                &[Verb::Create],
            );
        }
        rbac
    }
}
