//! What a controller's reconciles write, declared for the manager's generated RBAC
//! ([`Manager::rbac`](crate::manager::Manager::rbac)): the reads come from its informers, the
//! writes only from what it says here.

use kube::Resource;
use kube_informer::factory::FactoryScope;

use super::{Controller, Watchable};
use crate::rbac::{Rbac, Verb};

impl<K> Controller<K>
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
{
    /// Declares that its reconciles write `T` objects with `verbs`, for
    /// [`Manager::rbac`](crate::manager::Manager::rbac): when `T` is namespaced, in the
    /// namespaces the controller reads its own objects in (a controller of one namespace
    /// gets a Role there, not a ClusterRole; a controller of a cluster-scoped kind, in the
    /// factory's namespaces). [`writes_in`](Self::writes_in) names other namespaces.
    /// Reads need no declaration: every informer's `list` and `watch` are counted.
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager) {
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    /// use kube_informer::{InformerSpec, Selectors};
    /// use kube_informer_runtime::{controller::ControllerOptions, rbac::Verb};
    ///
    /// let shop = InformerSpec::new().selectors(Selectors::default().in_namespace("shop"));
    /// let controller = manager
    ///     .controller_with::<Deployment>(shop, ControllerOptions::default().name("web"))
    ///     .writes::<ConfigMap>(&[Verb::Create, Verb::Update, Verb::Delete]); // a Role in `shop`
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn writes<T: Watchable>(self, verbs: &[Verb]) -> Self {
        let namespaces = match &self.scope {
            Some(own) => own.clone(),
            None => self.factory.namespaces().unwrap_or_default().to_vec(),
        };
        self.writes_in::<T>(&namespaces, verbs)
    }

    /// [`writes`](Self::writes) in `namespaces` (empty: every namespace, a ClusterRole),
    /// for a controller that writes outside the namespaces it reads.
    #[must_use]
    pub fn writes_in<T: Watchable>(mut self, namespaces: &[String], verbs: &[Verb]) -> Self {
        let namespaces = match T::Scope::NAMESPACED {
            true => namespaces,
            false => &[],
        };
        let (group, resource) = (T::group(&()), T::plural(&()));
        self.writes.allow(&group, &resource, namespaces, verbs);
        self
    }

    /// Declares writes to its own objects (a finalizer or an annotation is a
    /// [`Verb::Patch`], a replace [`Verb::Update`]), in the namespaces it reads them in.
    #[must_use]
    pub fn writes_own(self, verbs: &[Verb]) -> Self {
        self.writes_own_part("", verbs)
    }

    /// Declares writes to its own kind's `status` subresource
    /// (`replace_status`: [`Verb::Update`]; `patch_status`: [`Verb::Patch`]).
    #[must_use]
    pub fn writes_own_status(self, verbs: &[Verb]) -> Self {
        self.writes_own_part("/status", verbs)
    }

    fn writes_own_part(mut self, subresource: &str, verbs: &[Verb]) -> Self {
        let (group, plural) = (K::group(&self.dyntype), K::plural(&self.dyntype));
        // Its own informer's namespaces (none: everywhere, or a cluster-scoped kind).
        let namespaces = self.scope.clone().unwrap_or_default();
        let resource = format!("{plural}{subresource}");
        self.writes.allow(&group, &resource, &namespaces, verbs);
        self
    }

    /// What it declared with [`writes`](Self::writes) and the `writes_own` methods.
    pub(crate) fn declared_writes(&self) -> &Rbac {
        &self.writes
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, Namespace},
    };
    use kube_informer::{FactoryOptions, InformerSpec, Selectors, SharedInformerFactory};

    use crate::{
        controller::{Controller, ControllerOptions},
        rbac::Verb,
    };

    fn factory() -> SharedInformerFactory {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        SharedInformerFactory::new(
            kube::Client::try_from(config).unwrap(),
            FactoryOptions::default(),
        )
    }

    #[tokio::test]
    async fn a_namespaced_controllers_writes_are_a_role_in_its_namespace() {
        let factory = factory();
        let _everywhere = factory.informer::<Deployment>(); // another reader, cluster-wide
        let shop = InformerSpec::new().selectors(Selectors::default().in_namespace("shop"));
        let options = ControllerOptions::default().name("web");
        let controller = Controller::<Deployment>::new_with(&factory, shop, options)
            .writes::<ConfigMap>(&[Verb::Create])
            .writes_own(&[Verb::Patch]);
        let rbac = controller.declared_writes();
        assert!(rbac.cluster_role("x").is_none(), "{}", rbac.yaml("x"));
        let roles = rbac.roles("x");
        assert_eq!(roles.len(), 1);
        assert_eq!(roles[0].metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(
            roles[0].rules.as_ref().unwrap().len(),
            2,
            "{}",
            rbac.yaml("x")
        );

        // Asked for, a write elsewhere; a cluster-scoped controller writes where the
        // factory reads.
        let options = ControllerOptions::default().name("summaries");
        let summaries = Controller::<Namespace>::new(&factory, options)
            .writes::<ConfigMap>(&[Verb::Create])
            .writes_in::<ConfigMap>(&["audit".to_owned()], &[Verb::Delete]);
        let rbac = summaries.declared_writes();
        assert!(
            rbac.cluster_role("x").is_some(),
            "the factory reads everywhere"
        );
        assert_eq!(rbac.roles("x").len(), 1, "and the audit namespace");
    }
}
