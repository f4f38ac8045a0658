//! A consumer that stalls for longer than the API server tolerates. With backpressure the
//! informer stops reading its watch; the server's buffers fill and it ends the watch (a
//! real kube-apiserver within about 100 ms, counted in `apiserver_terminated_watchers_total`;
//! fake-apiserver when its per-watch buffer is full, counted in the same metric). Once the
//! consumer resumes, the informer resumes the watch from its last version (or relists on a
//! 410) and converges exactly: nothing lost, the handler's view equal to the server's.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use e2e::{Backend, assert_cache_matches, both, ensure_namespace, quick, server_state};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use kube_informer::informer::{HandlerOptions, InformerOptions, Notification, SharedIndexInformer};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

const NS: &str = "stall";
/// Writes at most, before the test gives up on the server ending the watch.
const MAX_WRITES: usize = 1500;

/// `apiserver_terminated_watchers_total` for config maps, from the server's `/metrics`.
async fn terminated_watchers(client: &kube::Client) -> u64 {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = client.request_text(request).await.expect("GET /metrics");
    text.lines()
        .filter(|l| l.starts_with("apiserver_terminated_watchers_total{"))
        .filter(|l| l.contains(r#"resource="configmaps""#) && l.contains(r#"group="""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

fn config_map(name: String, size: usize) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name);
    cm.data = Some([("payload".to_owned(), "x".repeat(size))].into());
    cm
}

async fn a_stalled_consumer_outlasts_the_server(backend: Backend) {
    let name = backend.name();
    let client = backend.client();
    ensure_namespace(&client, NS).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let before = terminated_watchers(&client).await;

    let watched: Api<ConfigMap> = Api::namespaced(backend.informer_client(), NS);
    let informer = SharedIndexInformer::new(
        watched,
        InformerOptions::default()
            .reflector(quick())
            .queue_capacity(Some(10)),
    );
    // The consumer: a stream nobody reads until the test says so (a stalled consumer
    // that blocks no thread), holding the informer back for as long as it stalls.
    let mut stalled = informer.stream(
        HandlerOptions::default()
            .name("stalled")
            .backpressure(4, Duration::MAX),
    );
    // What the consumer last saw of each object: its view of the namespace.
    let seen: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let consumer = tokio::spawn({
        let seen = seen.clone();
        async move {
            let _ = released.await;
            while let Some(notification) = stalled.next().await {
                let mut seen = seen.lock();
                let meta = |cm: &ConfigMap| {
                    (
                        cm.metadata.name.clone().unwrap_or_default(),
                        cm.metadata.resource_version.clone().unwrap_or_default(),
                    )
                };
                match notification {
                    Notification::Add { object, .. } | Notification::Update { new: object, .. } => {
                        let (name, rv) = meta(&object);
                        seen.insert(name, rv);
                    }
                    Notification::Delete(gone) => {
                        seen.remove(&meta(gone.object()).0);
                    }
                }
            }
        }
    });
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    informer
        .wait_for_sync(Duration::from_secs(60))
        .await
        .expect("synced");

    // The consumer is stuck: write until the server gives up on the watch nobody reads.
    let mut written = 0;
    while terminated_watchers(&client).await == before {
        assert!(
            written < MAX_WRITES,
            "{name}: {written} writes of 64 KiB and the server never ended the stalled watch"
        );
        for _ in 0..20 {
            let cm = config_map(format!("cm-{written:04}"), 64 * 1024);
            api.create(&PostParams::default(), &cm)
                .await
                .expect("create");
            written += 1;
        }
    }
    // More changes while the watch is gone: updates and deletes must arrive too.
    for i in (0..written).step_by(7) {
        let mut cm = config_map(format!("cm-{i:04}"), 16);
        cm.metadata.labels = Some([("touched".to_owned(), "yes".to_owned())].into());
        let current = api.get(&format!("cm-{i:04}")).await.expect("get");
        cm.metadata.resource_version = current.metadata.resource_version;
        api.replace(&format!("cm-{i:04}"), &PostParams::default(), &cm)
            .await
            .expect("update");
    }
    for i in (3..written).step_by(11) {
        api.delete(&format!("cm-{i:04}"), &DeleteParams::default())
            .await
            .expect("delete");
    }
    let fence = api
        .create(&PostParams::default(), &config_map("fence".into(), 16))
        .await
        .expect("create")
        .metadata
        .resource_version
        .unwrap_or_default();

    release.send(()).expect("the consumer waits");
    assert_cache_matches(name, &informer.store(), &api, &fence).await;
    // The consumer catches up on everything it was held from (the cache is at the fence,
    // so every notification up to it is queued for it).
    let server = server_state(&api).await;
    let caught_up = tokio::time::timeout(Duration::from_secs(60), async {
        while *seen.lock() != server {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(
        *seen.lock(),
        server,
        "{name}: the consumer's view differs from the server's ({caught_up:?})"
    );
    let watches = backend
        .requests_for("configmaps", NS)
        .iter()
        .filter(|r| r.verb == "watch" || r.verb == "list")
        .count();
    assert!(
        watches >= 2,
        "{name}: the ended watch was never resumed ({watches} watch and list requests)"
    );
    cancel.cancel();
    run.await.expect("the informer's task ends");
    consumer.await.expect("the consumer ends with the informer");
}

both!(a_stalled_consumer_outlasts_the_server);
