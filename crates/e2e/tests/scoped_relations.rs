//! Scoped relations on both servers: a controller whose primary kind, owned kinds and
//! watched kind each read only what their own `InformerSpec` selects. The primary is
//! limited to one namespace and a label, a Secret child to its namespace and a label, a
//! ServiceAccount child is cached as metadata only, and a watched ConfigMap of another
//! namespace maps to primaries. Reconciles come from the selected objects only, the caches
//! hold nothing else, and no request for those kinds is cluster-wide (so such an operator
//! needs no cluster-wide RBAC for them).

use std::sync::Arc;

use e2e::{Backend, both, ensure_namespace, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use kube_informer::{
    ObjectKey, Selectors,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, Controller, ControllerOptions},
};
use parking_lot::Mutex;
use serde_json::{Value, json};

const HOME: &str = "scoped-home";
const ELSEWHERE: &str = "scoped-elsewhere";

async fn create<K>(client: &kube::Client, namespace: &str, object: Value) -> K
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let object: K = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap()
}

/// An owner reference to the primary ConfigMap `owner`, as its controller.
fn owned_by(owner: &ConfigMap) -> Value {
    json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name,
            "uid": owner.metadata.uid, "controller": true}])
}

/// The cluster-wide LIST and WATCH requests for `resource` so far.
fn cluster_wide(backend: &Backend, resource: &str) -> usize {
    backend
        .requests()
        .iter()
        .filter(|r| r.resource.as_deref() == Some(resource) && r.namespace.is_none())
        .filter(|r| r.verb == "list" || r.verb == "watch")
        .count()
}

async fn scoped_relations_read_only_what_their_specs_select(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, HOME).await;
    ensure_namespace(&client, ELSEWHERE).await;
    let name = backend.name();
    // The server's own informers may list some kinds cluster-wide at start: count from here.
    let before: Vec<usize> = ["secrets", "serviceaccounts", "configmaps"]
        .iter()
        .map(|r| cluster_wide(&backend, r))
        .collect();

    let primary = |n: &str, labelled: bool| {
        let labels = if labelled {
            json!({"role": "primary"})
        } else {
            json!({})
        };
        json!({"metadata": {"name": n, "labels": labels}})
    };
    let mine: ConfigMap = create(&client, HOME, primary("mine", true)).await;
    let unlabelled: ConfigMap = create(&client, HOME, primary("unlabelled", false)).await;
    create::<ConfigMap>(&client, ELSEWHERE, primary("elsewhere", true)).await;

    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let in_home = || Selectors::default().in_namespace(HOME);
    let primaries = InformerSpec::new().selectors(in_home().labels("role=primary"));
    let secrets = InformerSpec::new().selectors(in_home().labels("owned-by=scoped"));
    let accounts = InformerSpec::new().selectors(in_home());
    let triggers = InformerSpec::new().selectors(
        Selectors::default()
            .in_namespace(ELSEWHERE)
            .labels("kind=trigger"),
    );
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let controller = Controller::<ConfigMap>::new_with(
        &factory,
        primaries,
        ControllerOptions::default().name("scoped"),
    )
    .owns_with::<Secret>(secrets)
    .owns_metadata::<ServiceAccount>(accounts)
    .watches_with::<ConfigMap>(triggers, |trigger| {
        let target = trigger.data.as_ref().and_then(|d| d.get("target"));
        target
            .map(|t| ObjectKey::new(Some(HOME), t))
            .into_iter()
            .collect()
    });
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        move |cm: Cached<ConfigMap>, _: Arc<()>| {
            let log = log.clone();
            async move {
                if let Cached::Present(cm) = cm {
                    log.lock()
                        .push(cm.metadata.name.clone().unwrap_or_default());
                }
                Ok::<_, kube::Error>(Action::Done)
            }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    let count = |key: &str| seen.lock().iter().filter(|k| *k == key).count();
    eventually("the selected primary reconciled", || count("mine") >= 1).await;

    // A selected child reconciles its owner; an unselected one is not even cached.
    let base = count("mine");
    let child = json!({"metadata": {"name": "child", "labels": {"owned-by": "scoped"},
                                    "ownerReferences": owned_by(&mine)}});
    create::<Secret>(&client, HOME, child).await;
    eventually("a labelled child reconciles its owner", || {
        count("mine") > base
    })
    .await;
    let stray = json!({"metadata": {"name": "stray", "ownerReferences": owned_by(&mine)}});
    create::<Secret>(&client, HOME, stray).await;
    let account = json!({"metadata": {"name": "robot", "ownerReferences": owned_by(&mine)}});
    let base = count("mine");
    create::<ServiceAccount>(&client, HOME, account).await;
    eventually("a metadata-only child reconciles its owner", || {
        count("mine") > base
    })
    .await;

    // A watched object elsewhere maps to a primary.
    let base = count("mine");
    let trigger = json!({"metadata": {"name": "trigger", "labels": {"kind": "trigger"}},
                         "data": {"target": "mine"}});
    create::<ConfigMap>(&client, ELSEWHERE, trigger).await;
    eventually("a watched object reconciles its target", || {
        count("mine") > base
    })
    .await;

    // The caches hold the selected objects only.
    let keys = |keys: Vec<ObjectKey>| keys.into_iter().map(|k| k.to_string()).collect::<Vec<_>>();
    let stray_cached = factory
        .informer_with::<Secret>(InformerSpec::new().selectors(in_home().labels("owned-by=scoped")))
        .store()
        .list_keys();
    assert_eq!(keys(stray_cached), [format!("{HOME}/child")], "{name}");
    let accounts = factory
        .metadata_informer_with::<ServiceAccount>(InformerSpec::new().selectors(in_home()))
        .store()
        .list_keys();
    assert!(keys(accounts).contains(&format!("{HOME}/robot")), "{name}");
    // Touching the unselected primaries reconciles nothing of theirs.
    for (ns, n) in [(HOME, "unlabelled"), (ELSEWHERE, "elsewhere")] {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let patch = json!({"data": {"touched": "yes"}});
        api.patch(n, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let base = count("mine");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), HOME);
    let patch = json!({"data": {"touched": "yes"}});
    api.patch("mine", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the selected primary's change", || count("mine") > base).await;
    assert_eq!(
        count("unlabelled") + count("elsewhere"),
        0,
        "{name}: {:?}",
        seen.lock()
    );
    let _ = unlabelled;

    // Not one cluster-wide LIST or WATCH of these kinds.
    for (resource, before) in ["secrets", "serviceaccounts", "configmaps"]
        .iter()
        .zip(before)
    {
        assert_eq!(
            cluster_wide(&backend, resource),
            before,
            "{name}: a cluster-wide request for {resource}"
        );
    }
    cancel.cancel();
    run.await.unwrap().unwrap();
}

both!(scoped_relations_read_only_what_their_specs_select);
