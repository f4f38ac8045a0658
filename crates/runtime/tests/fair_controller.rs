//! A controller's fairness options on a paused clock over in-memory sources: groups named
//! by a function, capped in flight, and workers that grow with the wait and stay under
//! their ceiling.

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube_informer::{
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
    list_watch::MemorySource,
    workqueue::WorkerScaling,
};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, Controller, ControllerOptions, Fairness},
};
use parking_lot::Mutex;
use serde_json::json;

fn config_map(namespace: &str, name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": namespace}})).unwrap()
}

/// The most reconciles at once, per group and in all.
#[derive(Default)]
struct Concurrency {
    now: Mutex<HashMap<String, usize>>,
    most: Mutex<HashMap<String, usize>>,
    all: AtomicUsize,
    most_all: AtomicUsize,
}

impl Concurrency {
    fn enter(&self, group: &str) {
        let mut now = self.now.lock();
        let n = now.entry(group.to_owned()).or_default();
        *n += 1;
        let most = &mut *self.most.lock();
        let m = most.entry(group.to_owned()).or_default();
        *m = (*m).max(*n);
        let all = self.all.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_all.fetch_max(all, Ordering::SeqCst);
    }

    fn leave(&self, group: &str) {
        *self.now.lock().get_mut(group).unwrap() -= 1;
        self.all.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs a controller of `objects` with `options`; each reconcile takes 1 s of paused time.
async fn run(
    objects: Vec<ConfigMap>,
    options: ControllerOptions,
    tenant: fn(&str) -> String,
) -> Arc<Concurrency> {
    let source = MemorySource::<ConfigMap>::default();
    let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let factory = SharedInformerFactory::new(
        kube::Client::try_from(nowhere).unwrap(),
        FactoryOptions::default(),
    );
    factory.informer_with::<ConfigMap>(InformerSpec::new().list_watcher(source.clone()));
    let controller = Controller::<ConfigMap>::new(&factory, options);
    let queue = controller.queue().clone();
    let concurrency = Arc::new(Concurrency::default());
    let reconciled = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let running = tokio::spawn(controller.run(
        {
            let (concurrency, reconciled) = (concurrency.clone(), reconciled.clone());
            move |cm: Cached<ConfigMap>, _: Arc<()>| {
                let (concurrency, reconciled) = (concurrency.clone(), reconciled.clone());
                async move {
                    let Cached::Present(cm) = cm else {
                        return Ok::<_, kube::Error>(Action::Done);
                    };
                    let group = tenant(&cm.namespace().unwrap());
                    concurrency.enter(&group);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    concurrency.leave(&group);
                    reconciled.fetch_add(1, Ordering::SeqCst);
                    Ok(Action::Done)
                }
            }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    factory.start();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let count = objects.len();
    for object in objects {
        source.add(object);
    }
    while reconciled.load(Ordering::SeqCst) < count {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(queue.is_empty());
    cancel.cancel();
    running.await.unwrap().unwrap();
    factory.shutdown().await;
    concurrency
}

fn tenant_of(namespace: &str) -> String {
    namespace
        .split_once('-')
        .map_or(namespace, |(t, _)| t)
        .to_owned()
}

/// Two namespaces of tenant `a`, one of tenant `b`, grouped by tenant and capped at one
/// each: never two of a tenant at once, so four workers run at most two reconciles.
#[tokio::test(start_paused = true)]
async fn a_fairness_function_groups_keys_and_the_cap_holds_per_group() {
    let mut objects = Vec::new();
    for ns in ["a-dev", "a-prod", "b-prod"] {
        for i in 0..5 {
            objects.push(config_map(ns, &format!("cm-{i}")));
        }
    }
    let fairness = Fairness::by(|key| {
        let ns = key.namespace().unwrap_or("");
        Cow::Borrowed(ns.split_once('-').map_or(ns, |(t, _)| t))
    });
    let options = ControllerOptions::default()
        .name("capped")
        .workers(4)
        .fairness(fairness)
        .max_in_flight_per_group(Some(1));
    let concurrency = run(objects, options, tenant_of).await;
    let most = concurrency.most.lock().clone();
    assert_eq!(
        most,
        HashMap::from([("a".to_owned(), 1), ("b".to_owned(), 1)])
    );
    assert_eq!(concurrency.most_all.load(Ordering::SeqCst), 2);
}

/// 60 keys of 1 s each with workers scaled between 1 and 6: more than one runs at once once
/// keys wait past the target, never more than the ceiling.
#[tokio::test(start_paused = true)]
async fn scaled_workers_grow_with_the_backlog_and_stay_under_the_ceiling() {
    let objects = (0..60)
        .map(|i| config_map("shop", &format!("cm-{i}")))
        .collect();
    let scaling = WorkerScaling::new(1, 6)
        .target_wait(Duration::from_millis(500))
        .check_every(Duration::from_millis(100));
    let options = ControllerOptions::default()
        .name("scaled")
        .worker_scaling(scaling);
    let concurrency = run(objects, options, tenant_of).await;
    assert_eq!(concurrency.most_all.load(Ordering::SeqCst), 6);
}
