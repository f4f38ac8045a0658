//! One test per row of the table in `settings.md`, and one that every knob has a row.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    api::{ApiResource, DynamicObject},
    core::PartialObjectMeta,
    discovery::Scope,
};

use super::{Flavour, Objects, Resolved, resolve, short_name};
use crate::{
    FactoryOptions, InformerSpec, Selectors, list_watch::MemorySource, reflector::ReflectorOptions,
};

fn pods(defaults: &FactoryOptions, spec: InformerSpec<Pod>) -> Resolved<Pod> {
    resolve(defaults, Objects::typed::<Pod>(), spec)
}

fn pod_metadata(
    defaults: &FactoryOptions,
    spec: InformerSpec<PartialObjectMeta<Pod>>,
) -> Resolved<PartialObjectMeta<Pod>> {
    resolve(defaults, Objects::metadata::<Pod>(), spec)
}

fn dynamic_pods(
    defaults: &FactoryOptions,
    spec: InformerSpec<DynamicObject>,
) -> Resolved<DynamicObject> {
    let resource = ApiResource::erase::<Pod>(&());
    resolve(
        defaults,
        Objects::dynamic(&resource, &Scope::Namespaced),
        spec,
    )
}

fn in_namespace(namespace: &str) -> Selectors {
    Selectors::default().in_namespace(namespace)
}

#[test]
fn namespaces_are_the_specs_else_the_factorys_else_all() {
    let shop = FactoryOptions::default().selectors(in_namespace("shop"));
    let two = Selectors::default().in_namespaces(["b", "a"]);
    assert_eq!(pods(&shop, InformerSpec::new()).watch.namespaces, ["shop"]);
    assert_eq!(
        pods(&shop, InformerSpec::new().selectors(two.clone()))
            .watch
            .namespaces,
        ["a", "b"]
    );
    assert!(
        pods(&FactoryOptions::default(), InformerSpec::new())
            .watch
            .namespaces
            .is_empty()
    );
    // Cluster-scoped types are cluster-wide whatever either says.
    let nodes = resolve(
        &shop,
        Objects::typed::<Node>(),
        InformerSpec::<Node>::new().selectors(two),
    );
    assert!(nodes.watch.namespaces.is_empty());
}

#[test]
fn label_and_field_selectors_are_each_the_specs_else_the_factorys() {
    let defaults = FactoryOptions::default().selectors(
        in_namespace("shop")
            .labels("team=a")
            .fields("spec.nodeName=n1"),
    );
    let spec = InformerSpec::new().selectors(Selectors::default().labels("app=web"));
    let watch = pods(&defaults, spec).watch;
    assert_eq!(watch.selectors.label_selector(), Some("app=web"));
    assert_eq!(watch.selectors.field_selector(), Some("spec.nodeName=n1"));
    // The namespaces are the watch's own field, not the selectors'.
    assert_eq!(watch.selectors.namespaces(), None);
    let none = pods(&FactoryOptions::default(), InformerSpec::new()).watch;
    assert_eq!(
        (
            none.selectors.label_selector(),
            none.selectors.field_selector()
        ),
        (None, None)
    );
}

#[test]
fn resync_is_the_specs_else_the_factorys_else_none() {
    let minute = Duration::from_secs(60);
    let defaults = FactoryOptions::default().default_resync(minute);
    let spec = InformerSpec::new().resync(Duration::from_secs(5));
    assert_eq!(
        pods(&defaults, spec).options.default_resync,
        Some(Duration::from_secs(5))
    );
    assert_eq!(
        pods(&defaults, InformerSpec::new()).options.default_resync,
        Some(minute)
    );
    let none = pods(&FactoryOptions::default(), InformerSpec::new());
    assert_eq!(none.options.default_resync, None);
}

#[test]
fn managed_fields_are_stripped_by_default_and_skipped_while_decoding() {
    // Stripped by the informer's queue (before the spec's transform: `fifo/sink.rs`), from
    // objects that arrive with them; skipped while decoding by the factory's own sources.
    let strip = pods(&FactoryOptions::default(), InformerSpec::new());
    assert!(strip.watch.without_managed_fields);
    assert!(strip.options.strip_managed_fields);
    assert!(strip.transform.is_none(), "no transform step of its own");
    // Metadata informers too.
    let metadata = pod_metadata(&FactoryOptions::default(), InformerSpec::new());
    assert!(metadata.watch.without_managed_fields);
    assert!(metadata.options.strip_managed_fields);
    let keep = pods(
        &FactoryOptions::default().keep_managed_fields(),
        InformerSpec::new(),
    );
    assert!(!keep.watch.without_managed_fields && !keep.options.strip_managed_fields);
}

#[test]
fn indexes_are_the_namespace_index_and_the_specs() {
    let by_node = crate::Indexers::new().index("by-node", |_: &Pod| vec![]);
    let resolved = pods(
        &FactoryOptions::default(),
        InformerSpec::new().indexers(by_node),
    );
    assert_eq!(
        resolved.options.indexers.names().collect::<Vec<_>>(),
        ["namespace"]
    );
    assert_eq!(resolved.indexers.names().collect::<Vec<_>>(), ["by-node"]);
    let nodes = resolve(
        &FactoryOptions::default(),
        Objects::typed::<Node>(),
        InformerSpec::<Node>::new(),
    );
    assert_eq!(
        nodes.options.indexers.names().count(),
        0,
        "cluster-scoped: no namespace index"
    );
}

#[test]
fn typed_protobuf_is_the_specs_else_the_factorys_else_on() {
    let default = FactoryOptions::default();
    let never = FactoryOptions::default().protobuf(false);
    assert!(pods(&default, InformerSpec::new()).watch.protobuf);
    assert!(!pods(&never, InformerSpec::new()).watch.protobuf);
    assert!(
        pods(&never, InformerSpec::new().protobuf(true))
            .watch
            .protobuf
    );
    assert!(
        !pods(&default, InformerSpec::new().protobuf(false))
            .watch
            .protobuf
    );
}

#[test]
fn metadata_protobuf_is_the_specs_else_on_only_when_the_factory_asks() {
    let default = FactoryOptions::default();
    let always = FactoryOptions::default().protobuf(true);
    assert!(!pod_metadata(&default, InformerSpec::new()).watch.protobuf);
    assert!(pod_metadata(&always, InformerSpec::new()).watch.protobuf);
    assert!(
        pod_metadata(&default, InformerSpec::new().protobuf(true))
            .watch
            .protobuf
    );
    assert!(
        !pod_metadata(&always, InformerSpec::new().protobuf(false))
            .watch
            .protobuf
    );
}

#[test]
fn dynamic_protobuf_is_the_specs_else_off() {
    let always = FactoryOptions::default().protobuf(true);
    assert!(!dynamic_pods(&always, InformerSpec::new()).watch.protobuf);
    assert!(
        dynamic_pods(&always, InformerSpec::new().protobuf(true))
            .watch
            .protobuf
    );
}

#[test]
fn list_watch_tuning_is_the_factorys_with_the_informers_name_and_selectors() {
    let reflector = ReflectorOptions::default()
        .page_size(250)
        .name("ignored")
        .selectors(Selectors::default().labels("ignored=yes"));
    let defaults = FactoryOptions::default()
        .reflector(reflector)
        .selectors(in_namespace("shop").labels("app=web"));
    let resolved = pods(&defaults, InformerSpec::new());
    let reflector = &resolved.options.reflector;
    assert_eq!(reflector.page_size, 250);
    assert_eq!(reflector.selectors.label_selector(), Some("app=web"));
    assert_eq!(reflector.name, None, "named after the informer");
    assert_eq!(resolved.options.name.as_deref(), Some("Pod in shop"));
    let two = Selectors::default().in_namespaces(["a", "b"]);
    let resolved = pod_metadata(
        &FactoryOptions::default(),
        InformerSpec::new().selectors(two),
    );
    assert_eq!(
        resolved.options.name.as_deref(),
        Some("Pod metadata in a,b")
    );
    let dynamic = dynamic_pods(&FactoryOptions::default(), InformerSpec::new());
    assert_eq!(dynamic.options.name.as_deref(), Some("v1/pods"));
}

#[cfg(feature = "metrics")]
#[test]
fn metrics_are_the_factorys() {
    use prometheus_client::registry::Registry;
    let metrics = crate::metrics::Metrics::register(&mut Registry::default());
    let recorded = pods(
        &FactoryOptions::default().metrics(&metrics),
        InformerSpec::new(),
    );
    assert!(recorded.options.metrics.is_some());
    assert!(recorded.options.reflector.metrics.is_some());
    // A reflector's own metrics are not used: the factory's say where informers record.
    let own = ReflectorOptions::default().metrics(&metrics);
    let unrecorded = pods(
        &FactoryOptions::default().reflector(own),
        InformerSpec::new(),
    );
    assert!(unrecorded.options.metrics.is_none());
    assert!(unrecorded.options.reflector.metrics.is_none());
}

#[test]
fn the_source_is_the_specs_else_the_client() {
    let custom = InformerSpec::new().list_watcher(MemorySource::<Pod>::default());
    assert!(pods(&FactoryOptions::default(), custom).source.is_some());
    assert!(
        pods(&FactoryOptions::default(), InformerSpec::new())
            .source
            .is_none()
    );
}

#[test]
fn the_cache_directory_is_the_specs_else_the_factorys_else_none() {
    let (mine, theirs) = (
        crate::snapshot::CacheDir::new("/mine", "a"),
        crate::snapshot::CacheDir::new("/factory", "a"),
    );
    let persisted = |defaults: &FactoryOptions, spec: InformerSpec<Pod>| {
        let resolved = super::resolve_persisted(defaults, Objects::typed::<Pod>(), spec);
        resolved.options.persistence.map(|p| p.config)
    };
    let plain = FactoryOptions::default();
    let with_dir = FactoryOptions::default().cache_dir(theirs.clone());
    assert_eq!(persisted(&plain, InformerSpec::new()), None);
    assert_eq!(persisted(&with_dir, InformerSpec::new()), Some(theirs));
    let own = InformerSpec::new().cache_dir(mine.clone());
    assert_eq!(persisted(&with_dir, own), Some(mine));
}

#[test]
fn the_cache_directory_is_the_specs_and_its_snapshot_names_what_is_watched() {
    let shop = FactoryOptions::default().selectors(in_namespace("shop"));
    let cache = crate::snapshot::CacheDir::new("/cache", "https://a:6443");
    assert!(
        pods(&shop, InformerSpec::new())
            .options
            .persistence
            .is_none()
    );
    let labelled = Selectors::default()
        .labels("app=web")
        .fields("status.phase=Running");
    let resolved = pods(
        &shop,
        InformerSpec::new()
            .selectors(labelled)
            .cache_dir(cache.clone()),
    );
    let persistence = resolved
        .options
        .persistence
        .expect("the spec's cache directory");
    assert_eq!(persistence.config, cache);
    let identity = persistence.identity;
    assert_eq!(identity.server, "https://a:6443");
    assert!(
        identity.schema.starts_with("kube-informer "),
        "{}",
        identity.schema
    );
    // Objects with managedFields are another schema than objects without.
    let kept = pods(
        &FactoryOptions::default()
            .selectors(in_namespace("shop"))
            .keep_managed_fields(),
        InformerSpec::new().cache_dir(cache.clone()),
    );
    let kept = kept
        .options
        .persistence
        .expect("a cache directory")
        .identity;
    assert_ne!(kept.schema, identity.schema);
    assert_eq!(identity.namespace.as_deref(), Some("shop"));
    assert_eq!(identity.label_selector.as_deref(), Some("app=web"));
    assert_eq!(
        identity.field_selector.as_deref(),
        Some("status.phase=Running")
    );
    assert!(
        identity.kind.contains("::core::v1::pod::Pod"),
        "{}",
        identity.kind
    );
    // It does not decide what is watched: the same informer, with or without it.
    let plain = pods(&shop, InformerSpec::new()).watch;
    assert_eq!(
        pods(&shop, InformerSpec::new().cache_dir(cache)).watch,
        plain
    );
}

#[test]
fn the_key_is_what_is_watched_and_nothing_else() {
    let defaults = FactoryOptions::default();
    let plain = pods(&defaults, InformerSpec::new()).watch;
    // Knobs that do not change what is watched share the informer.
    let tuned = InformerSpec::new()
        .resync(Duration::from_secs(1))
        .transform(|p: Pod| p)
        .indexers(crate::Indexers::new().index("x", |_: &Pod| vec![]))
        .list_watcher(MemorySource::<Pod>::default());
    assert_eq!(pods(&defaults, tuned).watch, plain);
    // Knobs that do, do not.
    let differ = [
        InformerSpec::new().selectors(in_namespace("a")),
        InformerSpec::new().selectors(Selectors::default().labels("a=b")),
        InformerSpec::new().selectors(Selectors::default().fields("a=b")),
        InformerSpec::new().protobuf(false),
    ];
    for spec in differ {
        assert_ne!(pods(&defaults, spec).watch, plain);
    }
    let kept = pods(
        &FactoryOptions::default().keep_managed_fields(),
        InformerSpec::new(),
    );
    assert_ne!(kept.watch, plain);
    let metadata = pod_metadata(&defaults, InformerSpec::new().protobuf(true)).watch;
    assert_eq!(metadata.flavour, Flavour::Metadata);
    assert_ne!(metadata.objects, plain.objects);
}

/// Every field of both structs has a row in the table: adding a field does not compile
/// until it is destructured here, and the test fails until the table names its setter.
#[test]
fn every_knob_has_a_row_in_the_table() {
    let InformerSpec {
        selectors: _,
        transform: _,
        indexers: _,
        resync: _,
        source: _,
        protobuf: _,
        persistence: _,
    } = InformerSpec::<Pod>::new();
    let spec_setters = [
        "selectors",
        "transform",
        "indexers",
        "resync",
        "list_watcher",
        "protobuf",
        "cache_dir",
    ];
    let FactoryOptions {
        selectors: _,
        default_resync: _,
        reflector: _,
        keep_managed_fields: _,
        protobuf: _,
        cache_dir: _,
        #[cfg(feature = "metrics")]
            metrics: _,
    } = FactoryOptions::default();
    let factory_setters = [
        "selectors",
        "default_resync",
        "reflector",
        "keep_managed_fields",
        "protobuf",
        "cache_dir",
        "metrics",
    ];
    let table: Vec<&str> = include_str!("../settings.md")
        .lines()
        .filter(|line| line.starts_with("| "))
        .collect();
    let column = |row: &str, n: usize| row.split(" | ").nth(n).unwrap_or_default().to_owned();
    for setter in factory_setters {
        let named = format!("`{setter}`");
        assert!(
            table.iter().any(|row| column(row, 1).contains(&named)),
            "no row for FactoryOptions::{setter}"
        );
    }
    for setter in spec_setters {
        let named = format!("`{setter}`");
        assert!(
            table.iter().any(|row| column(row, 2).contains(&named)),
            "no row for InformerSpec::{setter}"
        );
    }
}

#[test]
fn short_names_read_well() {
    assert_eq!(short_name::<Pod>(), "Pod");
    assert_eq!(short_name::<crate::compact::Compact<Pod>>(), "Compact<Pod>");
}
