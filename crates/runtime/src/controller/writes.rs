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
    /// Declares that its reconciles write `T` objects with `verbs` (in the factory's
    /// namespaces when `T` is namespaced), for [`Manager::rbac`](crate::manager::Manager::rbac).
    /// Reads need no declaration: every informer's `list` and `watch` are counted.
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager) {
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    /// use kube_informer_runtime::{controller::ControllerOptions, rbac::Verb};
    ///
    /// let controller = manager
    ///     .controller::<Deployment>(ControllerOptions::default().name("web"))
    ///     .writes::<ConfigMap>(&[Verb::Create, Verb::Update, Verb::Delete]);
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn writes<T: Watchable>(mut self, verbs: &[Verb]) -> Self {
        let namespaces = match T::Scope::NAMESPACED {
            true => self.factory.namespaces().unwrap_or_default().to_vec(),
            false => Vec::new(),
        };
        let (group, resource) = (T::group(&()), T::plural(&()));
        self.writes.allow(&group, &resource, &namespaces, verbs);
        self
    }

    /// Declares writes to its own kind (a finalizer is a [`Verb::Patch`]), where its
    /// informer reads it.
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
        // Its own informer's namespaces (none: everywhere).
        let watched = self.factory.watched();
        let own: Vec<_> = watched
            .iter()
            .filter(|w| w.group == group && w.resource == plural)
            .collect();
        let namespaces = match own.iter().any(|w| w.namespaces.is_empty()) {
            true => Vec::new(),
            false => own.iter().flat_map(|w| w.namespaces.clone()).collect(),
        };
        let resource = format!("{plural}{subresource}");
        self.writes.allow(&group, &resource, &namespaces, verbs);
        self
    }

    /// What it declared with [`writes`](Self::writes) and the `writes_own` methods.
    pub fn declared_writes(&self) -> &Rbac {
        &self.writes
    }
}
