//! How a controller reads a kind: the one path from an [`InformerSpec`] to an informer
//! that its own kind and every relation take. It applies the sharding layer where it
//! applies (the kinds placed with the controller's objects: its own and its children) and
//! records what the sharder must place, so no relation can leave sharding out: there is no
//! other way to an informer.

use std::fmt::Debug;

use kube::{
    Resource,
    api::{ApiResource, DynamicObject, PartialObjectMeta},
    discovery::Scope,
};
use kube_informer::{
    factory::{FactoryScope, InformerSpec, SharedInformerFactory},
    informer::SharedIndexInformer,
};

use super::Watchable;
use crate::sharding::{Placement, Shard, ShardedKind};

/// A flavour of object a controller reads `T` as, and how the factory makes its informer.
pub(super) trait Flavour<T> {
    /// The resource, as the sharder places it.
    fn resource(&self) -> ApiResource;
    /// Whether its objects live in namespaces.
    fn namespaced(&self) -> bool;
    /// The factory's shared informer for `spec`.
    fn informer(
        &self,
        factory: &SharedInformerFactory,
        spec: InformerSpec<T>,
    ) -> SharedIndexInformer<T>;
}

/// Whole objects of a Rust type.
pub(super) struct Typed;

impl<T: Watchable> Flavour<T> for Typed {
    fn resource(&self) -> ApiResource {
        ApiResource::erase::<T>(&())
    }

    fn namespaced(&self) -> bool {
        T::Scope::NAMESPACED
    }

    fn informer(
        &self,
        factory: &SharedInformerFactory,
        spec: InformerSpec<T>,
    ) -> SharedIndexInformer<T> {
        factory.informer_with(spec)
    }
}

/// The metadata of a Rust type's objects.
pub(super) struct Metadata;

impl<C> Flavour<PartialObjectMeta<C>> for Metadata
where
    C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    C::Scope: FactoryScope,
{
    fn resource(&self) -> ApiResource {
        ApiResource::erase::<C>(&())
    }

    fn namespaced(&self) -> bool {
        C::Scope::NAMESPACED
    }

    fn informer(
        &self,
        factory: &SharedInformerFactory,
        spec: InformerSpec<PartialObjectMeta<C>>,
    ) -> SharedIndexInformer<PartialObjectMeta<C>> {
        factory.metadata_informer_with::<C>(spec)
    }
}

/// Objects of a resource known at run time.
pub(super) struct Dynamic<'a>(pub(super) &'a ApiResource, pub(super) Scope);

impl Flavour<DynamicObject> for Dynamic<'_> {
    fn resource(&self) -> ApiResource {
        self.0.clone()
    }

    fn namespaced(&self) -> bool {
        matches!(self.1, Scope::Namespaced)
    }

    fn informer(
        &self,
        factory: &SharedInformerFactory,
        spec: InformerSpec<DynamicObject>,
    ) -> SharedIndexInformer<DynamicObject> {
        factory.dynamic_informer_with(self.0, self.1.clone(), spec)
    }
}

/// The informer of the `T` objects `spec` selects, read as `flavour` says. Sharded
/// (`shard`), a kind the controller's objects place (`placement`: its own kind, its
/// children) selects the shard's label, and what the sharder must place of it is
/// returned; kinds it only watches (`None`) are read whole on every shard.
pub(super) fn read<T, F>(
    factory: &SharedInformerFactory,
    shard: Option<&Shard>,
    flavour: F,
    spec: InformerSpec<T>,
    placement: Option<Placement>,
) -> (SharedIndexInformer<T>, Vec<ShardedKind>)
where
    T: Resource + Clone + Send + Sync + 'static,
    F: Flavour<T>,
{
    let (spec, placed) = match (shard, placement) {
        (Some(shard), Some(placement)) => {
            let (resource, namespaced) = (flavour.resource(), flavour.namespaced());
            shard.read(factory, spec, &resource, namespaced, placement)
        }
        _ => (spec, Vec::new()),
    };
    (flavour.informer(factory, spec), placed)
}
