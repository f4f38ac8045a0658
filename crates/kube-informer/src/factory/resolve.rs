//! From settings to one watch: the factory's defaults ([`FactoryOptions`]) and an
//! informer's own ([`InformerSpec`]), for one flavour of object, resolved into one
//! request ([`Resolved`]): what is watched ([`Watch`], which is the sharing key), how the
//! informer is set up ([`InformerOptions`], transform, indexes) and where its objects come
//! from (the factory's client through [`Watch::client_source`], or the spec's source).
//!
//! Every informer constructor of the factory goes through [`resolve`]; nothing else reads
//! a knob.
//!
//! The table (`settings.md`, also in the public [`factory`](super) docs):
//!
#![doc = include_str!("settings.md")]

use std::{any::TypeId, sync::Arc};

use kube::{Resource, api::ApiResource, discovery::Scope};
use serde::de::DeserializeOwned;

use super::{FactoryOptions, FactoryScope, InformerSpec, spec::Make};
use crate::{
    Indexers,
    informer::InformerOptions,
    list_watch::{ClientListerWatcher, Selectors},
};

/// A transform of every object before it is cached.
pub(super) type Transform<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// The flavour of object an informer holds, which decides how its source asks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Flavour {
    /// Whole objects of a compiled-in type (`Pod`, `Compact<Pod>`, a custom resource).
    Typed,
    /// `PartialObjectMeta<K>`: metadata only.
    Metadata,
    /// `DynamicObject`s of a resource known at run time (`apiVersion/plural`).
    Dynamic(String),
}

/// The objects an informer is asked for: flavour, name (for logs and metrics) and scope.
#[derive(Debug, Clone)]
pub(super) struct Objects {
    pub(super) flavour: Flavour,
    pub(super) name: String,
    pub(super) namespaced: bool,
}

impl Objects {
    /// Whole objects of `K`.
    pub(super) fn typed<K: Resource>() -> Self
    where
        K::Scope: FactoryScope,
    {
        Self {
            flavour: Flavour::Typed,
            name: short_name::<K>(),
            namespaced: K::Scope::NAMESPACED,
        }
    }

    /// `K`'s metadata only.
    pub(super) fn metadata<K: Resource>() -> Self
    where
        K::Scope: FactoryScope,
    {
        Self {
            flavour: Flavour::Metadata,
            name: format!("{} metadata", short_name::<K>()),
            namespaced: K::Scope::NAMESPACED,
        }
    }

    /// Objects of `resource`, of `scope`.
    pub(super) fn dynamic(resource: &ApiResource, scope: &Scope) -> Self {
        let what = format!("{}/{}", resource.api_version, resource.plural);
        Self {
            flavour: Flavour::Dynamic(what.clone()),
            name: what,
            namespaced: matches!(scope, Scope::Namespaced),
        }
    }
}

/// What a factory informer watches. Two requests that resolve to the same `Watch` share
/// one informer: this is the factory's key, so every field is part of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Watch {
    /// The Rust type of the cached objects.
    pub(super) objects: TypeId,
    pub(super) flavour: Flavour,
    /// Sorted; empty: every namespace.
    pub(super) namespaces: Vec<String>,
    /// The label and field selectors (the namespaces are above).
    pub(super) selectors: Selectors,
    /// Ask for protobuf (answers are read as their `Content-Type` says).
    pub(super) protobuf: bool,
    /// Over protobuf, skip `metadata.managedFields` while decoding.
    pub(super) without_managed_fields: bool,
}

impl Watch {
    /// The factory's source of `K` in `namespace` (`None`: all, or cluster-scoped): the
    /// one place a client request is shaped from settings.
    pub(super) fn client_source<K>(
        &self,
        client: &kube::Client,
        namespace: Option<&str>,
        dyntype: &K::DynamicType,
    ) -> ClientListerWatcher<K>
    where
        K: Resource + DeserializeOwned,
    {
        let mut source = ClientListerWatcher::<K>::new(client.clone(), namespace, dyntype);
        if self.flavour == Flavour::Metadata {
            source = source.metadata_only();
        }
        if self.without_managed_fields {
            source = source.without_managed_fields();
        }
        if let Some(shards) = self.selectors.share() {
            source = source.with_shards(shards.clone());
        }
        source.protobuf(self.protobuf)
    }
}

/// One informer request, resolved.
pub(super) struct Resolved<K> {
    /// What it watches: the sharing key.
    pub(super) watch: Watch,
    /// Its options when it is made (name, reflector, namespace index, resync, metrics).
    pub(super) options: InformerOptions<K>,
    /// The spec's transform (the factory's strip of managedFields is an option: `options`).
    pub(super) transform: Option<Transform<K>>,
    /// The spec's own index functions (added to a shared informer that lacks them).
    pub(super) indexers: Indexers<K>,
    /// The spec's source, if it has one.
    pub(super) source: Option<Make<K>>,
}

/// [`resolve`], with the factory's cache directory for a spec that names none.
pub(super) fn resolve_persisted<K>(
    defaults: &FactoryOptions,
    objects: Objects,
    mut spec: InformerSpec<K>,
) -> Resolved<K>
where
    K: Resource + serde::Serialize + DeserializeOwned + 'static,
{
    if spec.persistence.is_none()
        && let Some(cache) = &defaults.cache_dir
    {
        spec.persistence = Some(crate::snapshot::Persistence::new(cache.clone()));
    }
    resolve(defaults, objects, spec)
}

/// Resolves `spec` for `objects` against the factory's `defaults` (see the table above).
pub(super) fn resolve<K>(
    defaults: &FactoryOptions,
    objects: Objects,
    spec: InformerSpec<K>,
) -> Resolved<K>
where
    K: Resource + 'static,
{
    // Destructured whole: a new field on either struct does not compile until it is
    // resolved here (and the table test asks for its row).
    let FactoryOptions {
        selectors: default_selectors,
        default_resync,
        reflector,
        keep_managed_fields,
        protobuf: default_protobuf,
        // Applied before (`resolve_persisted`), where `K` is known to be serializable.
        cache_dir: _,
        #[cfg(feature = "metrics")]
        metrics,
    } = defaults;
    let InformerSpec {
        selectors,
        transform,
        indexers,
        resync,
        source,
        protobuf,
        persistence,
    } = spec;

    let selectors = selectors.or(default_selectors);
    let namespaces = match objects.namespaced {
        true => selectors.namespaces().unwrap_or_default().to_vec(),
        false => Vec::new(),
    };
    let protobuf = protobuf.unwrap_or(match objects.flavour {
        Flavour::Typed => default_protobuf.unwrap_or(true),
        Flavour::Metadata => *default_protobuf == Some(true),
        Flavour::Dynamic(_) => false,
    });
    let watch = Watch {
        objects: TypeId::of::<K>(),
        flavour: objects.flavour,
        namespaces,
        selectors: selectors.without_namespaces(),
        protobuf,
        without_managed_fields: !*keep_managed_fields,
    };

    // What the objects are, whatever the namespaces (a snapshot names those apart).
    let what = objects.name.clone();
    let name = match watch.namespaces.as_slice() {
        [] => objects.name,
        [one] => format!("{} in {one}", objects.name),
        many => format!("{} in {}", objects.name, many.join(",")),
    };
    let mut reflector = reflector.clone().selectors(watch.selectors.clone());
    // Named after each informer (one name for all would merge their metrics), and
    // recorded as the factory says.
    reflector.name = None;
    #[cfg(feature = "metrics")]
    {
        reflector.metrics = None;
    }
    let namespace_index = match objects.namespaced {
        true => Indexers::new().namespace(),
        false => Indexers::new(),
    };
    let mut options = InformerOptions::default()
        .reflector(reflector)
        .name(name)
        .indexers(namespace_index);
    options.default_resync = resync.or(*default_resync);
    #[cfg(feature = "metrics")]
    if let Some(metrics) = metrics {
        options = options.metrics(metrics);
    }

    // Stripped before the spec's transform, only from objects that arrive with them.
    options.strip_managed_fields = !*keep_managed_fields;
    // A live share changes what the cache holds: a snapshot could hold another share.
    let live = matches!(
        watch.selectors.share(),
        Some(crate::list_watch::Shards::Live(_))
    );
    options.persistence = persistence.filter(|_| !live).map(|mut persistence| {
        let identity = &mut persistence.identity;
        identity.kind = format!("{} {what}", std::any::type_name::<K>());
        if *keep_managed_fields {
            identity.schema.push_str(" with managedFields");
        }
        identity.namespace = (!watch.namespaces.is_empty()).then(|| watch.namespaces.join(","));
        identity.label_selector = watch.selectors.label_selector().map(str::to_owned);
        identity.field_selector = watch.selectors.field_selector().map(str::to_owned);
        identity.shard_selector = watch.selectors.shard_selector().map(ToString::to_string);
        persistence
    });

    Resolved {
        watch,
        options,
        transform,
        indexers,
        source,
    }
}

/// A type's short name, e.g. `Pod` for `k8s_openapi::api::core::v1::Pod`.
fn short_name<K>() -> String {
    let full = std::any::type_name::<K>();
    let base = full.split('<').next().unwrap_or(full);
    let short = base.rsplit("::").next().unwrap_or(base);
    match full.split_once('<') {
        Some((_, args)) => {
            let inner = args.trim_end_matches('>');
            let inner = inner.split(',').next().unwrap_or(inner);
            format!("{short}<{}>", inner.rsplit("::").next().unwrap_or(inner))
        }
        None => short.to_owned(),
    }
}

#[cfg(test)]
mod tests;
