//! How a controller reads a kind: the one path from an [`InformerSpec`] to an informer
//! that its own kind and every relation take. It applies the sharding layer where it
//! applies (the kinds placed with the controller's objects: its own and its children) and
//! records what the sharder must place, so no relation can leave sharding out: there is no
//! other way to an informer.

use std::{any::TypeId, fmt::Debug};

use kube::{
    Resource,
    api::{ApiResource, DynamicObject, PartialObjectMeta},
    discovery::Scope,
};
use kube_informer::{
    Selectors,
    factory::{FactoryScope, InformerSpec, SharedInformerFactory},
    informer::SharedIndexInformer,
};

use super::{
    Watchable,
    own_writes::{CacheOf, GroupKind},
};
use crate::sharding::{Placement, Shard, ShardedKind};

/// A flavour of object a controller reads `T` as, and how the factory makes its informer.
pub(super) trait Flavour<T> {
    /// The resource, as the sharder places it.
    fn resource(&self) -> ApiResource;
    /// Whether its objects live in namespaces.
    fn namespaced(&self) -> bool;
    /// The Rust types a reconcile may record its writes of these objects as (with
    /// [`wrote`](super::wrote)): none for dynamic objects, which say their kind.
    fn written_as(&self) -> Vec<TypeId>;
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

    fn written_as(&self) -> Vec<TypeId> {
        vec![TypeId::of::<T>()]
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

    fn written_as(&self) -> Vec<TypeId> {
        // A metadata cache waits for the object written whole, too.
        vec![TypeId::of::<PartialObjectMeta<C>>(), TypeId::of::<C>()]
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

    fn written_as(&self) -> Vec<TypeId> {
        Vec::new()
    }

    fn informer(
        &self,
        factory: &SharedInformerFactory,
        spec: InformerSpec<DynamicObject>,
    ) -> SharedIndexInformer<DynamicObject> {
        factory.dynamic_informer_with(self.0, self.1.clone(), spec)
    }
}

/// What [`read`] made: the informer, what the sharder must place of it, and what its
/// cache holds (for waiting on the controller's own writes).
pub(super) struct Read<T> {
    pub(super) informer: SharedIndexInformer<T>,
    pub(super) placed: Vec<ShardedKind>,
    kind: GroupKind,
    plural: String,
    written_as: Vec<TypeId>,
    selectors: Selectors,
    namespaced: bool,
}

impl<T: Resource + Clone + Send + Sync + 'static> Read<T> {
    /// The namespaces it reads (empty: all of them), or `None` for a cluster-scoped kind.
    pub(super) fn namespaces(&self) -> Option<Vec<String>> {
        let namespaces = self.selectors.namespaces().unwrap_or_default();
        self.namespaced.then(|| namespaces.to_vec())
    }

    /// The informer's cache, as [`OwnWrites::cache`](super::own_writes::OwnWrites::cache)
    /// waits for writes in it.
    pub(super) fn cache(&self) -> CacheOf<'_, T> {
        CacheOf {
            kind: self.kind.clone(),
            plural: self.plural.clone(),
            types: self.written_as.clone(),
            selectors: &self.selectors,
            namespaced: self.namespaced,
            store: self.informer.store(),
        }
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
) -> Read<T>
where
    T: Resource + Clone + Send + Sync + 'static,
    F: Flavour<T>,
{
    let (resource, namespaced) = (flavour.resource(), flavour.namespaced());
    let (spec, placed) = match (shard, placement) {
        (Some(shard), Some(placement)) => {
            shard.read(factory, spec, &resource, namespaced, placement)
        }
        _ => (spec, Vec::new()),
    };
    let selectors = factory.resolve_selectors(spec.current_selectors());
    Read {
        kind: GroupKind {
            group: resource.group,
            kind: resource.kind,
        },
        plural: resource.plural,
        written_as: flavour.written_as(),
        selectors,
        namespaced,
        informer: flavour.informer(factory, spec),
        placed,
    }
}
