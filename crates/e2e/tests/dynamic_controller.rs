//! Dynamic controllers on both servers: a controller of a custom resource without a Rust
//! type (`Controller::dynamic` over an `ApiResource`) reconciles its objects as
//! `DynamicObject`s, a typed child reconciles its dynamic owner (also when the child's
//! owner reference still names an older version of the custom resource), a deletion
//! arrives as `Gone`; a typed controller owns dynamic children (`owns_dynamic`); and the
//! dynamic controller's Events about its objects are accepted, naming the custom kind.

use std::sync::Arc;

use e2e::{Backend, BackendOptions, both, ensure_namespace, eventually};
use k8s_openapi::api::{core::v1::ConfigMap, events::v1::Event};
use kube::{
    Api,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
    },
    discovery::Scope,
};
use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, Controller, ControllerOptions, Relation},
    events::{EventType, NewEvent, Recorder, Reporter},
};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::task::JoinSet;

const NS: &str = "dynamic";

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

/// What the widget controller saw: `name=size` for a present widget, `gone:name` for a
/// deleted one.
type Log = Arc<Mutex<Vec<String>>>;

/// The widget controller's context: what it saw, and where it records Events.
struct Widgets {
    log: Log,
    recorder: Recorder,
    resource: ApiResource,
}

async fn reconcile_widget(
    widget: Cached<DynamicObject>,
    ctx: Arc<Widgets>,
) -> Result<Action, kube::Error> {
    let entry = match &widget {
        Cached::Present(w) => {
            let size = &w.data["spec"]["size"];
            let event =
                NewEvent::new(EventType::Normal, "Sized", "Reconcile").note(format!("size {size}"));
            ctx.recorder.publish_dynamic(&**w, &ctx.resource, event);
            format!("{}={size}", w.metadata.name.as_deref().unwrap_or_default())
        }
        Cached::Gone(key) => format!("gone:{}", key.name()),
    };
    ctx.log.lock().push(entry);
    Ok(Action::Done)
}

async fn reconcile_parent(cm: Cached<ConfigMap>, log: Arc<Log>) -> Result<Action, kube::Error> {
    if let Cached::Present(cm) = cm {
        log.lock()
            .push(cm.metadata.name.clone().unwrap_or_default());
    }
    Ok(Action::Done)
}

fn owner(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true}])
}

async fn a_dynamic_controller_reconciles_custom_resources_and_their_children(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, NS).await;
    let resource = widgets();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();
    let name = backend.name();

    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let (widget_log, parent_log): (Log, Log) = Default::default();
    let widget_controller = Controller::dynamic(
        &factory,
        &resource,
        Scope::Namespaced,
        ControllerOptions::default().name("widgets"),
    )
    .owns::<ConfigMap>();
    let parent_controller =
        Controller::<ConfigMap>::new(&factory, ControllerOptions::default().name("parents"))
            .owns_dynamic(&resource, Scope::Namespaced, Relation::new());
    let cancel = CancellationToken::new();
    let mut running = JoinSet::new();
    let recorder = Recorder::new(client.clone(), Reporter::new("example.com/widgets", "e2e"));
    let widgets = Widgets {
        log: widget_log.clone(),
        recorder: recorder.clone(),
        resource: resource.clone(),
    };
    running.spawn(widget_controller.run(
        reconcile_widget,
        |_, _, _| Action::Retry,
        Arc::new(widgets),
        cancel.clone(),
    ));
    running.spawn(parent_controller.run(
        reconcile_parent,
        |_, _, _| Action::Retry,
        Arc::new(parent_log.clone()),
        cancel.clone(),
    ));
    let seen = |log: &Log, entry: &str| log.lock().iter().any(|e| e == entry);
    let count = |log: &Log, entry: &str| log.lock().iter().filter(|e| *e == entry).count();

    // A widget, created then changed: reconciled as a DynamicObject each time.
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 1},
    }))
    .unwrap();
    let w1 = api.create(&pp, &widget).await.unwrap();
    eventually(&format!("{name}: w1 reconciled"), || {
        seen(&widget_log, "w1=1")
    })
    .await;
    // Its Event names the custom kind and the object, as `kubectl describe widget w1` finds it.
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let uid = w1.metadata.uid.clone();
    let about_w1 = |e: &Event| {
        e.regarding.as_ref().is_some_and(|r| {
            (
                r.kind.as_deref(),
                r.api_version.as_deref(),
                r.name.as_deref(),
            ) == (Some("Widget"), Some("example.com/v1"), Some("w1"))
                && r.uid == uid
        })
    };
    let mut recorded = None;
    for _ in 0..600 {
        let list = events.list(&Default::default()).await.unwrap();
        recorded = list.items.into_iter().find(about_w1);
        if recorded.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let recorded = recorded.unwrap_or_else(|| panic!("{name}: no Event about w1"));
    assert_eq!(recorded.reason.as_deref(), Some("Sized"));
    assert_eq!(recorded.note.as_deref(), Some("size 1"));
    assert_eq!(
        recorded.reporting_controller.as_deref(),
        Some("example.com/widgets")
    );

    let patch = json!({"spec": {"size": 2}});
    api.patch("w1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually(&format!("{name}: w1's change reconciled"), || {
        seen(&widget_log, "w1=2")
    })
    .await;

    // A typed child whose owner reference names an older version: reconciles w1.
    let before = count(&widget_log, "w1=2");
    let uid = w1.metadata.uid.clone().unwrap();
    let child: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "w1-child", "ownerReferences": owner("example.com/v1beta1", "Widget", "w1", &uid)},
    }))
    .unwrap();
    configmaps.create(&pp, &child).await.unwrap();
    eventually(&format!("{name}: the child reconciled its widget"), || {
        count(&widget_log, "w1=2") > before
    })
    .await;

    // A dynamic child of a typed owner: reconciles the owner.
    let parent: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "parent"}})).unwrap();
    let parent = configmaps.create(&pp, &parent).await.unwrap();
    eventually(&format!("{name}: parent reconciled"), || {
        seen(&parent_log, "parent")
    })
    .await;
    let before = count(&parent_log, "parent");
    let kid: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "kid", "ownerReferences": owner("v1", "ConfigMap", "parent", parent.metadata.uid.as_deref().unwrap())},
        "spec": {"size": 7},
    }))
    .unwrap();
    api.create(&pp, &kid).await.unwrap();
    eventually(
        &format!("{name}: the dynamic child reconciled its owner"),
        || count(&parent_log, "parent") > before,
    )
    .await;

    // Deleted: reconciled as gone.
    api.delete("w1", &DeleteParams::default()).await.unwrap();
    eventually(&format!("{name}: w1's deletion reconciled"), || {
        seen(&widget_log, "gone:w1")
    })
    .await;

    cancel.cancel();
    while let Some(result) = running.join_next().await {
        result.unwrap().unwrap();
    }
}

both!(
    a_dynamic_controller_reconciles_custom_resources_and_their_children,
    BackendOptions {
        custom: vec![("example.com", "widgets", "Widget")],
        ..BackendOptions::default()
    }
);
