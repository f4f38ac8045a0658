//! Read your own writes off the common path, on both servers, with every write made
//! through the recording client (no `wrote` call in any reconcile):
//!
//! - a dynamic controller whose child is named like its owner (Widget `ns/w0` writes
//!   ConfigMap `ns/w0`, read as a dynamic kind too): the wait is on the child's cache, not
//!   the owner's, so no reconcile waits out the limit;
//! - a metadata-only relation (`owns_metadata::<Secret>`): the Secret created is waited for
//!   in the metadata cache, so an immediate requeue never creates it twice;
//! - a reconcile whose writes are all made from a task it spawns, through a manager's
//!   client: each is given to its controlling owner's key, and waited for as its own;
//! - writes the cache's label selector excludes (a report created without the label) are
//!   not waited for, and a write that takes the object out of the selection (its label
//!   removed) is waited for until the cache drops it: the next reconcile sees it gone.
//!
//! Each reconcile is queued again at once, eight times per object; the controllers count
//! what a stale cache causes (a create answered 409 AlreadyExists, a replace answered 409
//! Conflict) and `controller_runtime_read_your_writes_timeouts_total` counts waits that ran
//! out. All stay 0.

use std::{sync::Arc, time::Duration};

use e2e::{Backend, BackendOptions, both, ensure_namespace, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta, PostParams},
    discovery::Scope,
};
use kube_informer::{
    InformerSpec, Selectors,
    factory::{FactoryOptions, SharedInformerFactory},
    metrics::Metrics,
};
use kube_informer_runtime::{
    CancellationToken,
    controller::{
        Action, Cached, Controller, ControllerMetrics, ControllerOptions, Relation,
        recording_client,
    },
};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio::task::JoinSet;

const ROUNDS: u64 = 8;
const OBJECTS: usize = 5;

/// What stale reads cost: creates of an object that existed, replaces of an old version.
#[derive(Default)]
struct Stale {
    duplicates: usize,
    conflicts: usize,
    /// Rounds each object finished (its name, the rounds).
    done: Vec<(String, u64)>,
}

struct Ctx {
    client: kube::Client,
    stale: Mutex<Stale>,
    /// The cache the reconcile reads its children from.
    children: kube_informer::ReadOnlyStore<DynamicObject>,
    secrets: kube_informer::ReadOnlyStore<PartialObjectMeta<Secret>>,
}

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

fn config_maps() -> ApiResource {
    ApiResource::erase::<ConfigMap>(&())
}

/// A scenario's namespace `ns` (made), an admin client, a factory, and a registry with the
/// controllers' metrics.
async fn scenario(
    backend: &Backend,
    ns: &str,
) -> (
    kube::Client,
    SharedInformerFactory,
    Registry,
    ControllerMetrics,
) {
    let admin = backend.client();
    ensure_namespace(&admin, ns).await;
    let factory = SharedInformerFactory::new(backend.informer_client(), FactoryOptions::default());
    let mut registry = Registry::default();
    let core = Metrics::register(&mut registry);
    let metrics = ControllerMetrics::register(&mut registry, &core);
    (admin, factory, registry, metrics)
}

/// `controller_runtime_read_your_writes_timeouts_total` of `controller` (0 if unset).
fn timeouts(registry: &Registry, controller: &str) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    let series = format!(
        "controller_runtime_read_your_writes_timeouts_total{{controller=\"{controller}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// Cancels the controllers and waits for them to return.
async fn stop(
    mut running: JoinSet<Result<(), kube_informer_runtime::controller::ControllerError>>,
    cancel: CancellationToken,
) {
    cancel.cancel();
    while let Some(ran) = running.join_next().await {
        ran.unwrap().unwrap();
    }
}

/// How many distinct objects reached `ROUNDS` (one may be reconciled done twice: its
/// child's last event queues it again).
fn finished(ctx: &Ctx) -> usize {
    let stale = ctx.stale.lock();
    let names: std::collections::BTreeSet<_> = stale.done.iter().map(|(name, _)| name).collect();
    names.len()
}

/// Asserts no reconcile of `controller` read a stale cache or waited out the limit.
fn assert_fresh(ctx: &Ctx, registry: &Registry, controller: &str, name: &str) {
    let stale = ctx.stale.lock();
    let found = (stale.duplicates, stale.conflicts);
    assert_eq!(
        found,
        (0, 0),
        "{name}: a stale read (duplicates, conflicts)"
    );
    assert_eq!(timeouts(registry, controller), 0, "{name}: a wait ran out");
}

/// The round a child ConfigMap records, from the cache.
fn round(child: &DynamicObject) -> u64 {
    child.data["data"]["round"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// `written`'s error, unless it is a refusal for `reason` (`AlreadyExists`, `Conflict`):
/// that is counted with `count` instead.
fn unless<T>(
    written: Result<T, kube::Error>,
    reason: &str,
    count: impl FnOnce(),
) -> Result<(), kube::Error> {
    match written {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.reason == reason => {
            count();
            Ok(())
        }
        Err(err) => Err(err),
    }
}

/// Creates `OBJECTS` Widgets in `ns`, named `prefix` and a number.
async fn create_widgets(admin: &kube::Client, ns: &str, prefix: &str) {
    let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, &widgets());
    for i in 0..OBJECTS {
        let widget: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": format!("{prefix}{i}")},
        }))
        .unwrap();
        api.create(&PostParams::default(), &widget).await.unwrap();
    }
}

/// A widget's reconcile: creates its child ConfigMap (same name) if the cache has none,
/// else advances the child's round by a replace of the cached copy, until `ROUNDS`.
async fn reconcile_widget(
    widget: Cached<DynamicObject>,
    ctx: Arc<Ctx>,
) -> Result<Action, kube::Error> {
    let Cached::Present(widget) = widget else {
        return Ok(Action::Done);
    };
    let (ns, name) = (widget.namespace().unwrap_or_default(), widget.name_any());
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(child) = ctx.children.get_by_key(&format!("{ns}/{name}")) else {
        let owner = json!([{"apiVersion": "example.com/v1", "kind": "Widget", "name": name,
            "uid": widget.uid(), "controller": true}]);
        let child: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": owner}, "data": {"round": "0"},
        }))
        .unwrap();
        let created = api.create(&PostParams::default(), &child).await;
        unless(created, "AlreadyExists", || {
            ctx.stale.lock().duplicates += 1
        })?;
        return Ok(Action::RequeueAfter(Duration::from_millis(1)));
    };
    let done = round(&child);
    if done >= ROUNDS {
        ctx.stale.lock().done.push((name, done));
        return Ok(Action::Done);
    }
    let mut next: ConfigMap =
        serde_json::from_value(serde_json::to_value(&*child).unwrap()).unwrap();
    next.data = Some([("round".to_owned(), (done + 1).to_string())].into());
    let replaced = api.replace(&name, &PostParams::default(), &next).await;
    unless(replaced, "Conflict", || ctx.stale.lock().conflicts += 1)?;
    Ok(Action::RequeueAfter(Duration::from_millis(1)))
}

async fn a_dynamic_child_named_like_its_owner_is_read_back_without_waiting_out_the_limit(
    backend: Backend,
) {
    const NS: &str = "ryw-dynamic";
    let name = backend.name();
    let (admin, factory, registry, metrics) = scenario(&backend, NS).await;
    let options = ControllerOptions::default()
        .name("widgets")
        .metrics(&metrics);
    let (widgets, config_maps) = (widgets(), config_maps());
    let controller = Controller::dynamic(&factory, &widgets, Scope::Namespaced, options)
        .owns_dynamic(&config_maps, Scope::Namespaced, Relation::new());
    let children = factory
        .dynamic_informer_with(&config_maps, Scope::Namespaced, InformerSpec::new())
        .store();
    let secrets = factory.metadata_informer::<Secret>().store();
    let ctx = Arc::new(Ctx {
        client: recording_client(backend.client()),
        stale: Mutex::default(),
        children,
        secrets,
    });
    let cancel = CancellationToken::new();
    let mut running = JoinSet::new();
    running.spawn(controller.run(
        reconcile_widget,
        |_, _, _| Action::Retry,
        ctx.clone(),
        cancel.clone(),
    ));

    create_widgets(&admin, NS, "w").await;
    eventually(
        &format!("{name}: every widget's child at round {ROUNDS}"),
        || finished(&ctx) >= OBJECTS,
    )
    .await;
    stop(running, cancel).await;
    assert_fresh(&ctx, &registry, "widgets", name);
    factory.shutdown().await;
}

both!(
    a_dynamic_child_named_like_its_owner_is_read_back_without_waiting_out_the_limit,
    BackendOptions {
        custom: vec![("example.com", "widgets", "Widget")],
        ..BackendOptions::default()
    }
);

/// The widget's reconcile, run whole on a task of its own (no `carry_writes`): its writes
/// are made off the reconcile's task.
async fn reconcile_widget_in_a_task(
    widget: Cached<DynamicObject>,
    ctx: Arc<Ctx>,
) -> Result<Action, kube::Error> {
    tokio::spawn(reconcile_widget(widget, ctx))
        .await
        .expect("the reconcile's task ran")
}

/// The same widgets with every write made from a spawned task, through a manager's client:
/// each write is given to its controlling owner's key (the child's Widget), so the next
/// reconcile waits for it as for its own: no duplicate, no conflict, no wait run out.
async fn writes_from_spawned_tasks_are_read_back_through_the_managers_client(backend: Backend) {
    use kube_informer_runtime::manager::{Manager, ManagerOptions};

    const NS: &str = "ryw-spawned";
    let name = backend.name();
    let admin = backend.client();
    ensure_namespace(&admin, NS).await;
    let mut manager = Manager::new(backend.client(), ManagerOptions::for_tests())
        .await
        .unwrap();
    let (widgets, config_maps) = (widgets(), config_maps());
    let only_ns = InformerSpec::new().selectors(Selectors::default().in_namespace(NS));
    let controller = manager
        .dynamic_controller_with(
            &widgets,
            Scope::Namespaced,
            only_ns,
            ControllerOptions::default().name("spawning"),
        )
        .owns_dynamic(&config_maps, Scope::Namespaced, Relation::new());
    let factory = manager.factory().clone();
    let ctx = Arc::new(Ctx {
        client: manager.client().clone(),
        stale: Mutex::default(),
        children: factory
            .dynamic_informer_with(&config_maps, Scope::Namespaced, InformerSpec::new())
            .store(),
        secrets: factory.metadata_informer::<Secret>().store(),
    });
    manager.add_controller(
        controller,
        reconcile_widget_in_a_task,
        |_, _, _| Action::Retry,
        ctx.clone(),
    );
    let registry = manager.registry();
    let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
    let running = tokio::spawn(manager.run_until(graceful.clone(), force));

    create_widgets(&admin, NS, "s").await;
    eventually(
        &format!("{name}: every widget's child at round {ROUNDS}"),
        || finished(&ctx) >= OBJECTS,
    )
    .await;
    graceful.cancel();
    running.await.unwrap().unwrap();
    assert_fresh(&ctx, &registry.lock(), "spawning", name);
}

both!(
    writes_from_spawned_tasks_are_read_back_through_the_managers_client,
    BackendOptions {
        custom: vec![("example.com", "widgets", "Widget")],
        ..BackendOptions::default()
    }
);

/// A parent's reconcile: creates its Secret (same name) when the metadata cache lacks it,
/// counting its rounds in the parent's own data (a replace of the cached parent).
async fn reconcile_parent(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let Cached::Present(cm) = cm else {
        return Ok(Action::Done);
    };
    let (ns, name) = (cm.namespace().unwrap_or_default(), cm.name_any());
    let done: u64 = cm
        .data
        .as_ref()
        .and_then(|d| d.get("round")?.parse().ok())
        .unwrap_or(0);
    if done >= ROUNDS {
        ctx.stale.lock().done.push((name, done));
        return Ok(Action::Done);
    }
    if ctx.secrets.get_by_key(&format!("{ns}/{name}")).is_none() {
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
        let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": name,
            "uid": cm.uid(), "controller": true}]);
        let secret: Secret =
            serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": owner}}))
                .unwrap();
        let created = secrets.create(&PostParams::default(), &secret).await;
        unless(created, "AlreadyExists", || {
            ctx.stale.lock().duplicates += 1
        })?;
    }
    let mut next = (*cm).clone();
    next.data = Some([("round".to_owned(), (done + 1).to_string())].into());
    let parents: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let replaced = parents.replace(&name, &PostParams::default(), &next).await;
    unless(replaced, "Conflict", || ctx.stale.lock().conflicts += 1)?;
    Ok(Action::RequeueAfter(Duration::from_millis(1)))
}

async fn a_metadata_only_child_is_created_once_under_immediate_requeues(backend: Backend) {
    const NS: &str = "ryw-metadata";
    let name = backend.name();
    let (admin, factory, registry, metrics) = scenario(&backend, NS).await;
    let only_ns = InformerSpec::new().selectors(Selectors::default().in_namespace(NS));
    let options = ControllerOptions::default()
        .name("parents")
        .metrics(&metrics);
    let controller = Controller::<ConfigMap>::new_with(&factory, only_ns, options)
        .owns_metadata::<Secret>(InformerSpec::new());
    let ctx = Arc::new(Ctx {
        client: recording_client(backend.client()),
        stale: Mutex::default(),
        children: factory
            .dynamic_informer_with(&config_maps(), Scope::Namespaced, InformerSpec::new())
            .store(),
        secrets: factory.metadata_informer::<Secret>().store(),
    });
    let cancel = CancellationToken::new();
    let mut running = JoinSet::new();
    running.spawn(controller.run(
        reconcile_parent,
        |_, _, _| Action::Retry,
        ctx.clone(),
        cancel.clone(),
    ));
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), NS);
    for i in 0..OBJECTS {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("p{i}")}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    eventually(&format!("{name}: every parent at round {ROUNDS}"), || {
        finished(&ctx) >= OBJECTS
    })
    .await;
    stop(running, cancel).await;
    assert_fresh(&ctx, &registry, "parents", name);
    factory.shutdown().await;
}

both!(a_metadata_only_child_is_created_once_under_immediate_requeues);

/// What the retiring controller saw of each object: present rounds, then gone.
#[derive(Default)]
struct Retiring {
    client: Option<kube::Client>,
    present: Mutex<Vec<String>>,
    gone: Mutex<Vec<String>>,
}

/// Reconciles ConfigMaps labelled `stage=active`: writes an unlabelled report (outside
/// the selection) and retires the object by removing its label (out of the selection).
async fn retire(cm: Cached<ConfigMap>, ctx: Arc<Retiring>) -> Result<Action, kube::Error> {
    let cm = match cm {
        Cached::Present(cm) => cm,
        Cached::Gone(key) => {
            ctx.gone.lock().push(key.name().to_owned());
            return Ok(Action::Done);
        }
    };
    let (ns, name) = (cm.namespace().unwrap_or_default(), cm.name_any());
    ctx.present.lock().push(name.clone());
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone().unwrap(), &ns);
    let report: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": format!("{name}-report")}})).unwrap();
    // Its report, once (an AlreadyExists is a requeue's, not a stale read: not counted).
    unless(
        api.create(&PostParams::default(), &report).await,
        "AlreadyExists",
        || {},
    )?;
    let mut retired = (*cm).clone();
    retired.metadata.labels = None;
    api.replace(&name, &PostParams::default(), &retired).await?;
    // Queued again at once: the next reconcile must find it out of the cache.
    Ok(Action::RequeueAfter(Duration::from_millis(1)))
}

async fn writes_outside_the_selection_are_not_waited_for_and_one_that_leaves_it_is(
    backend: Backend,
) {
    const NS: &str = "ryw-selected";
    let name = backend.name();
    let (admin, factory, registry, metrics) = scenario(&backend, NS).await;
    let active = Selectors::default().in_namespace(NS).labels("stage=active");
    let options = ControllerOptions::default()
        .name("retiring")
        .metrics(&metrics);
    let controller =
        Controller::<ConfigMap>::new_with(&factory, InformerSpec::new().selectors(active), options);
    let ctx = Arc::new(Retiring {
        client: Some(recording_client(backend.client())),
        ..Retiring::default()
    });
    let cancel = CancellationToken::new();
    let mut running = JoinSet::new();
    running.spawn(controller.run(retire, |_, _, _| Action::Retry, ctx.clone(), cancel.clone()));
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), NS);
    for i in 0..OBJECTS {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("r{i}"), "labels": {"stage": "active"}},
        }))
        .unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    eventually(
        &format!("{name}: every object retired and seen gone"),
        // Distinct names: one object may be reconciled gone twice (its DELETED event and
        // its own requeue).
        || {
            ctx.gone
                .lock()
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                >= OBJECTS
        },
    )
    .await;
    cancel.cancel();
    while let Some(ran) = running.join_next().await {
        ran.unwrap().unwrap();
    }
    let present = ctx.present.lock().clone();
    assert_eq!(
        present.len(),
        OBJECTS,
        "{name}: each reconciled present once: {present:?}"
    );
    assert_eq!(timeouts(&registry, "retiring"), 0, "{name}: a wait ran out");
    factory.shutdown().await;
}

both!(writes_outside_the_selection_are_not_waited_for_and_one_that_leaves_it_is);
