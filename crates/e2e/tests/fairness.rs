//! Fairness between namespaces, on both servers: one namespace gets 2,000 ConfigMaps in one
//! burst, another gets one. With the burst's reconciles held, everything is queued; once
//! they go, the lone change is among the next two reconciles (two namespaces queued: the
//! bound of docs `controller#fairness-between-namespaces`), where a first-come queue puts
//! it behind the whole burst. Verdicts count reconciles, never time.
//!
//! One worker, so the order reconciles start in is the order the queue hands keys out.
//! (With two, a worker handed the lone key can be descheduled before its reconcile starts
//! while the other runs three of the burst: seen on fake-apiserver, a race of the
//! observation, not of the queue.)

use std::{sync::Arc, time::Duration};

use e2e::{Backend, both, ensure_namespace, eventually};
use futures_util::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt, api::PostParams};
use kube_informer::{
    Selectors,
    factory::{FactoryOptions, SharedInformerFactory},
};
use kube_informer_runtime::controller::{Action, Cached, Controller, ControllerOptions};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const BURST: &str = "rt-fair-burst";
const LONE: &str = "rt-fair-lone";
const OBJECTS: usize = 2_000;
const WORKERS: usize = 1;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": "fair"}}})).unwrap()
}

async fn a_lone_change_is_not_queued_behind_another_namespaces_burst(backend: Backend) {
    let name = backend.name();
    let client = backend.client();
    ensure_namespace(&client, BURST).await;
    ensure_namespace(&client, LONE).await;
    let factory = SharedInformerFactory::new(
        client.clone(),
        FactoryOptions::default().selectors(Selectors::default().labels("app=fair")),
    );
    let options = ControllerOptions::default().name("fair").workers(WORKERS);
    let controller = Controller::<ConfigMap>::new(&factory, options);
    let queue = controller.queue().clone();
    let started = Arc::new(Mutex::new(Vec::<String>::new()));
    // The burst's reconciles wait here until the test opens it.
    let (open, gate) = watch::channel(false);
    let reconcile = {
        let started = started.clone();
        move |cm: Cached<ConfigMap>, _: Arc<()>| {
            let (started, mut gate) = (started.clone(), gate.clone());
            async move {
                let key = match &cm {
                    Cached::Present(cm) => format!("{}/{}", cm.namespace().unwrap(), cm.name_any()),
                    Cached::Gone(key) => key.as_str().to_owned(),
                };
                let burst = key.starts_with(BURST);
                started.lock().push(key);
                if burst {
                    gate.wait_for(|open| *open)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(Action::Done)
            }
        }
    };
    let cancel = CancellationToken::new();
    let running = tokio::spawn(controller.run(
        reconcile,
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(60))
        .await
        .unwrap();

    let burst: Api<ConfigMap> = Api::namespaced(client.clone(), BURST);
    let creates = (0..OBJECTS).map(|i| {
        let burst = burst.clone();
        async move {
            burst
                .create(&PostParams::default(), &config_map(&format!("cm-{i}")))
                .await
        }
    });
    let created = stream::iter(creates)
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    assert!(
        created.iter().all(Result::is_ok),
        "{name}: the burst was created"
    );
    let lone: Api<ConfigMap> = Api::namespaced(client.clone(), LONE);
    lone.create(&PostParams::default(), &config_map("lone"))
        .await
        .unwrap();

    // Every key queued (the worker holds a burst key), then the gate opens.
    let queued = OBJECTS + 1 - WORKERS;
    eventually(&format!("{name}: {queued} keys queued"), || {
        queue.len() == queued && started.lock().len() == WORKERS
    })
    .await;
    open.send_replace(true);
    let lone_key = format!("{LONE}/lone");
    eventually(&format!("{name}: the lone change reconciled"), || {
        started.lock().contains(&lone_key)
    })
    .await;
    let after = started.lock().iter().position(|k| *k == lone_key).unwrap() - WORKERS;
    assert!(
        after < 2,
        "{name}: the lone change waited for {after} reconciles of the burst, not at most 1"
    );
    eventually(&format!("{name}: the burst reconciled"), || {
        started.lock().len() == OBJECTS + 1
    })
    .await;
    cancel.cancel();
    running.await.unwrap().unwrap();
    factory.shutdown().await;
}

both!(a_lone_change_is_not_queued_behind_another_namespaces_burst);
