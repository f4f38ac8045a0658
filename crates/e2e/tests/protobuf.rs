//! Informers of built-in kinds read protobuf, and custom resources JSON, with the same
//! objects in the cache as the JSON API shows. On both servers: pods
//! (containers, probes, volumes, quantities, int-or-strings), ConfigMaps with binary data,
//! Secrets, Services, Nodes, Deployments, Leases (microsecond times), events.k8s.io Events
//! and a custom resource; created, then changed and deleted while watched; every cache must
//! equal the server's state read as JSON. The answers' content types are recorded: on both
//! servers every LIST and WATCH of a built-in kind is answered in protobuf, the custom
//! resource's in JSON.

use std::{fmt::Debug, time::Duration};

use e2e::{Backend, BackendOptions, both, ensure_namespace, recording};
use k8s_openapi::{
    NamespaceResourceScope,
    api::{
        apps::v1::Deployment,
        coordination::v1::Lease,
        core::v1::{ConfigMap, Node, Pod, Secret, Service},
        events::v1::Event,
    },
};
use kube::{
    Api, Resource,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
        PostParams,
    },
    discovery::Scope,
};
use kube_informer::{
    ReadOnlyStore,
    factory::{FactoryOptions, SharedInformerFactory},
    reflector::ReflectorOptions,
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

const NS: &str = "protobuf";

async fn create<K>(client: &kube::Client, object: Value) -> K
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), NS);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap()
}

/// Waits until `store` holds exactly what the server lists (read as JSON), object for
/// object; a minute at most (a hang, not a verdict).
async fn converges<K>(name: &str, what: &str, store: &ReadOnlyStore<K>, api: &Api<K>)
where
    K: Resource + Clone + DeserializeOwned + Debug + PartialEq,
{
    converges_as(name, what, store, api, |o| o).await;
}

/// [`converges`], comparing objects as `normalize` leaves them.
async fn converges_as<K>(
    name: &str,
    what: &str,
    store: &ReadOnlyStore<K>,
    api: &Api<K>,
    normalize: impl Fn(K) -> K,
) where
    K: Resource + Clone + DeserializeOwned + Debug + PartialEq,
{
    let mut last = String::new();
    for _ in 0..600 {
        let listed = api.list(&ListParams::default()).await.unwrap().items;
        let mut server: Vec<K> = listed.into_iter().map(&normalize).collect();
        let mut cached: Vec<K> = store
            .list()
            .iter()
            .map(|o| normalize((**o).clone()))
            .collect();
        let key = |o: &K| (o.meta().namespace.clone(), o.meta().name.clone());
        server.sort_by_key(key);
        cached.sort_by_key(key);
        if server == cached {
            return;
        }
        last = format!("server {} objects, cache {}", server.len(), cached.len());
        if server.len() == cached.len() {
            let differing = server.iter().zip(&cached).find(|(s, c)| s != c);
            if let Some((s, c)) = differing {
                last = format!("server {s:?}\ncache {c:?}");
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name}: the {what} cache never matched the server: {last}");
}

fn pod(name: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"app": "web"}}, "spec": {
        "containers": [{
            "name": "web", "image": "nginx:1.27",
            "ports": [{"name": "http", "containerPort": 8080}],
            "env": [{"name": "MODE", "value": "prod"}, {"name": "FROM", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}],
            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "0.1"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5},
            "livenessProbe": {"tcpSocket": {"port": 8080}},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}],
        }],
        "volumes": [{"name": "config", "configMap": {"name": "settings", "defaultMode": 420}}],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoExecute", "tolerationSeconds": 30}],
        "nodeSelector": {"disk": "ssd"},
        "terminationGracePeriodSeconds": 0,
    }})
}

async fn informers_read_the_same_objects_from_protobuf_and_json(backend: Backend) {
    let client = backend.client();
    let name = backend.name();
    ensure_namespace(&client, NS).await;
    let now = "2026-11-26T10:00:00.123456Z";
    create::<Pod>(&client, pod("web-0")).await;
    create::<ConfigMap>(&client, json!({"metadata": {"name": "settings"}, "data": {"mode": "prod"}, "binaryData": {"blob": "AAECAwQ="}})).await;
    create::<Secret>(
        &client,
        json!({"metadata": {"name": "token"}, "type": "Opaque", "data": {"token": "c2VjcmV0"}}),
    )
    .await;
    create::<Service>(&client, json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [
        {"name": "http", "port": 80, "targetPort": "http"}, {"name": "admin", "port": 9000, "targetPort": 9001, "protocol": "TCP"}]}})).await;
    create::<Deployment>(&client, json!({"metadata": {"name": "web"}, "spec": {
        "replicas": 0, "selector": {"matchLabels": {"app": "web"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
        "template": pod("template"),
    }})).await;
    create::<Lease>(&client, json!({"metadata": {"name": "leader"}, "spec": {
        "holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": now, "renewTime": now, "leaseTransitions": 0}})).await;
    create::<Event>(
        &client,
        json!({"metadata": {"name": "started"}, "eventTime": now, "reportingController": "e2e",
        "reportingInstance": "e2e-1", "action": "Start", "reason": "Started", "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": NS, "name": "web-0"}}),
    )
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node = json!({"metadata": {"name": "protobuf-node", "labels": {"disk": "ssd"}}, "spec": {"taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]}});
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(node).unwrap(),
        )
        .await
        .unwrap();
    let widgets = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widget_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &widgets);
    let widget: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}})).unwrap();
    widget_api
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();

    let (recorder, seen) = recording(backend.informer_client());
    // Paged LISTs (two objects a page: continue tokens read from protobuf list metadata),
    // then watches; the streaming list over protobuf is `sync.rs`'s.
    let lists = ReflectorOptions::default()
        .streaming_lists(false)
        .page_size(2);
    let factory = SharedInformerFactory::new(
        recorder,
        // Whole objects, managed fields and all: compared with the server's field for field.
        FactoryOptions::default()
            .protobuf(true)
            .keep_managed_fields()
            .reflector(lists),
    );
    let pods = factory.informer::<Pod>();
    let configmaps = factory.informer::<ConfigMap>();
    let secrets = factory.informer::<Secret>();
    let services = factory.informer::<Service>();
    let deployments = factory.informer::<Deployment>();
    let leases = factory.informer::<Lease>();
    let events = factory.informer::<Event>();
    let node_informer = factory.informer::<Node>();
    let widget_informer = factory.dynamic_informer(&widgets, Scope::Namespaced);
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(60))
        .await
        .unwrap();

    // Changes while watched: a label on each, a deletion.
    let label = json!({"metadata": {"labels": {"changed": "yes"}}});
    let pp = PatchParams::default();
    Api::<Pod>::namespaced(client.clone(), NS)
        .patch("web-0", &pp, &Patch::Merge(&label))
        .await
        .unwrap();
    Api::<Deployment>::namespaced(client.clone(), NS)
        .patch("web", &pp, &Patch::Merge(&label))
        .await
        .unwrap();
    Api::<Lease>::namespaced(client.clone(), NS)
        .patch(
            "leader",
            &pp,
            &Patch::Merge(&json!({"spec": {"renewTime": "2026-11-26T10:00:05.654321Z"}})),
        )
        .await
        .unwrap();
    nodes
        .patch("protobuf-node", &pp, &Patch::Merge(&label))
        .await
        .unwrap();
    widget_api
        .patch("w", &pp, &Patch::Merge(&label))
        .await
        .unwrap();
    Api::<Secret>::namespaced(client.clone(), NS)
        .delete("token", &DeleteParams::default())
        .await
        .unwrap();
    create::<ConfigMap>(
        &client,
        json!({"metadata": {"name": "later"}, "data": {"k": "v"}}),
    )
    .await;

    converges(name, "pod", &pods.store(), &Api::all(client.clone())).await;
    converges(
        name,
        "configmap",
        &configmaps.store(),
        &Api::all(client.clone()),
    )
    .await;
    converges(name, "secret", &secrets.store(), &Api::all(client.clone())).await;
    converges(
        name,
        "service",
        &services.store(),
        &Api::all(client.clone()),
    )
    .await;
    converges(
        name,
        "deployment",
        &deployments.store(),
        &Api::all(client.clone()),
    )
    .await;
    converges(name, "lease", &leases.store(), &Api::all(client.clone())).await;
    converges(name, "event", &events.store(), &Api::all(client.clone())).await;
    converges(name, "node", &node_informer.store(), &nodes).await;
    // A JSON list's items carry no apiVersion and kind, its watch events do: not compared.
    let untyped = |mut widget: DynamicObject| {
        widget.types = None;
        widget
    };
    let all_widgets = Api::all_with(client.clone(), &widgets);
    converges_as(
        name,
        "widget",
        &widget_informer.store(),
        &all_widgets,
        untyped,
    )
    .await;

    // A factory as a user gets it: the same objects without their managed fields (skipped
    // unread over protobuf for pods, scanned past over JSON for the custom resource).
    let defaults = SharedInformerFactory::new(backend.informer_client(), FactoryOptions::default());
    let default_pods = defaults.informer::<Pod>();
    let default_widgets = defaults.dynamic_informer(&widgets, Scope::Namespaced);
    defaults.start();
    defaults
        .wait_for_sync(Duration::from_secs(60))
        .await
        .unwrap();
    let pod_without_managed_fields = |mut pod: Pod| {
        pod.metadata.managed_fields = None;
        pod
    };
    let widget_without_managed_fields = |widget: DynamicObject| {
        let mut widget = untyped(widget);
        widget.metadata.managed_fields = None;
        widget
    };
    converges_as(
        name,
        "pod (defaults)",
        &default_pods.store(),
        &Api::all(client.clone()),
        pod_without_managed_fields,
    )
    .await;
    converges_as(
        name,
        "widget (defaults)",
        &default_widgets.store(),
        &all_widgets,
        widget_without_managed_fields,
    )
    .await;
    let cached = default_pods.store().list();
    assert!(
        !cached.is_empty() && cached.iter().all(|p| p.metadata.managed_fields.is_none()),
        "{name}: managedFields left out by default"
    );
    defaults.shutdown().await;

    // How each LIST and WATCH was answered.
    let answers = seen.lock().clone();
    let built_in: Vec<&(String, String)> = answers
        .iter()
        .filter(|(uri, _)| !uri.contains("/example.com/"))
        .collect();
    let custom: Vec<&(String, String)> = answers
        .iter()
        .filter(|(uri, _)| uri.contains("/example.com/"))
        .collect();
    for kind in [
        "pods",
        "configmaps",
        "secrets",
        "services",
        "deployments",
        "leases",
        "events",
        "nodes",
    ] {
        let of_kind = |watch: bool| {
            built_in.iter().any(|(uri, _)| {
                uri.contains(&format!("/{kind}?")) && uri.contains("watch=true") == watch
            })
        };
        assert!(
            of_kind(false) && of_kind(true),
            "{name}: a LIST and a WATCH of {kind}: {answers:?}"
        );
    }
    assert!(!custom.is_empty(), "{name}");
    for (uri, content_type) in &custom {
        assert!(
            content_type.starts_with("application/json"),
            "{name}: {uri} answered {content_type}"
        );
    }
    let wanted = "application/vnd.kubernetes.protobuf";
    for (uri, content_type) in &built_in {
        assert!(
            content_type.starts_with(wanted),
            "{name}: {uri} answered {content_type}, not {wanted}"
        );
    }
    factory.shutdown().await;
}

both!(
    informers_read_the_same_objects_from_protobuf_and_json,
    BackendOptions {
        custom: vec![("example.com", "widgets", "Widget")],
        ..BackendOptions::default()
    }
);
