use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::ObjectMeta;

use super::*;
use crate::informer::HandlerFuncs;

fn context() -> ListenerContext {
    ListenerContext {
        progress: Arc::new(Notify::new()),
        reporter: Arc::new(Reporter::new("test".into())),
    }
}

fn cm(name: &str) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    })
}

fn add(name: &str, initial: bool) -> Notification<ConfigMap> {
    Notification::Add {
        object: cm(name),
        is_in_initial_list: initial,
    }
}

/// Waits for `done` (the bound only turns a hang into a failure).
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..30_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("condition never held");
}

#[tokio::test]
async fn delivers_in_order_and_survives_a_panicking_call() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let handler = HandlerFuncs::new().on_add(move |o: Arc<ConfigMap>, _| {
        let name = o.metadata.name.clone().unwrap();
        if name == "boom" {
            panic!("handler bug on {name}");
        }
        log.lock().push(name);
    });
    let listener = Listener::spawn(
        "test".into(),
        Arc::new(handler),
        &HandlerOptions::default(),
        context(),
    );
    for name in ["a", "b", "boom", "c", "d"] {
        listener.push(add(name, false));
    }
    until(|| seen.lock().len() == 4).await;
    assert_eq!(
        *seen.lock(),
        ["a", "b", "c", "d"],
        "in order, and on after the panic"
    );
    listener.stop().await;
}

#[tokio::test]
async fn initial_notifications_are_tracked_until_delivered() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    let handler = HandlerFuncs::new().on_add(move |_: Arc<ConfigMap>, _| {
        // Block the handler until the test lets it go.
        while g.try_acquire().is_err() {
            std::thread::yield_now();
        }
    });
    let listener = Listener::spawn(
        "slow".into(),
        Arc::new(handler),
        &HandlerOptions::default(),
        context(),
    );
    listener.push(add("x", true));
    listener.push(add("y", true));
    listener.push(add("z", false));
    assert!(!listener.initial_delivered());
    gate.add_permits(2);
    until(|| listener.initial_delivered()).await;
    gate.add_permits(1);
    until(|| listener.backlog() == 0).await;
    listener.stop().await;
}

fn versioned(name: &str, rv: u32) -> Arc<ConfigMap> {
    let mut obj = (*cm(name)).clone();
    obj.metadata.resource_version = Some(rv.to_string());
    Arc::new(obj)
}

/// A stuck handler while 50 objects change 100 times each: the default buffer grows to
/// every notification, the coalescing one stays at one per object and then hands over
/// the latest state of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalescing_bounds_the_backlog_of_a_stuck_handler() {
    for coalesce in [false, true] {
        // The first call blocks until released (bounded, so a failure cannot hang).
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let gate = Mutex::new(Some(gate));
        let seen = Arc::new(Mutex::new(
            std::collections::BTreeMap::<String, String>::new(),
        ));
        let s = seen.clone();
        let record = move |o: Arc<ConfigMap>| {
            let rv = o.metadata.resource_version.clone().unwrap_or_default();
            s.lock()
                .insert(o.metadata.name.clone().unwrap_or_default(), rv);
        };
        let record2 = record.clone();
        let handler = HandlerFuncs::new()
            .on_add(move |o: Arc<ConfigMap>, _| {
                if let Some(gate) = gate.lock().take() {
                    let _ = gate.recv_timeout(Duration::from_secs(30));
                }
                record(o);
            })
            .on_update(move |_, n: Arc<ConfigMap>| record2(n));
        let mut options = HandlerOptions::default();
        if coalesce {
            options = options.coalescing();
        }
        let listener = Listener::spawn("stuck".into(), Arc::new(handler), &options, context());
        listener.push(add("block", false)); // the handler sticks on this one
        until(|| listener.backlog() == 0).await;
        for round in 1..=100u32 {
            for i in 0..50 {
                let name = format!("o{i}");
                let n = if round == 1 {
                    Notification::Add {
                        object: versioned(&name, round),
                        is_in_initial_list: false,
                    }
                } else {
                    Notification::Update {
                        old: versioned(&name, round - 1),
                        new: versioned(&name, round),
                    }
                };
                listener.push(n);
            }
        }
        let backlog = listener.backlog();
        if coalesce {
            assert_eq!(backlog, 50, "one pending notification per object");
        } else {
            assert_eq!(backlog, 5000, "every notification, in order");
        }
        release.send(()).unwrap();
        // An empty backlog is not the end: the last notification taken may still be in
        // the handler. Wait for what the handler has recorded (bounded against a hang).
        let done = || {
            let seen = seen.lock();
            seen.len() == 51 && seen.iter().all(|(k, rv)| k == "block" || rv == "100")
        };
        for _ in 0..60_000 {
            if done() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(seen.lock().len(), 51, "every object delivered");
        assert!(
            done(),
            "the latest state of every object: {:?}",
            seen.lock()
        );
        assert_eq!(listener.backlog(), 0);
        listener.stop().await;
    }
}

#[test]
fn merging_keeps_what_the_handler_must_know() {
    let (a1, a2) = (versioned("a", 1), versioned("a", 2));
    let rv = |n: &Notification<ConfigMap>| n.object().metadata.resource_version.clone().unwrap();
    let add = |o: &Arc<ConfigMap>| Notification::Add {
        object: o.clone(),
        is_in_initial_list: true,
    };
    let update = |o: &Arc<ConfigMap>, n: &Arc<ConfigMap>| Notification::Update {
        old: o.clone(),
        new: n.clone(),
    };
    let delete = |o: &Arc<ConfigMap>| Notification::Delete(crate::DeletedObject::Known(o.clone()));
    let m = merge(add(&a1), update(&a1, &a2));
    assert!(
        matches!(
            m,
            Notification::Add {
                is_in_initial_list: true,
                ..
            }
        ) && rv(&m) == "2"
    );
    let m = merge(update(&a1, &a2), delete(&a2));
    assert!(matches!(m, Notification::Delete(_)));
    let m = merge(delete(&a1), add(&a2));
    assert!(
        matches!(&m, Notification::Update { old, .. } if old.metadata.resource_version.as_deref() == Some("1"))
            && rv(&m) == "2"
    );
}

#[tokio::test]
async fn stop_waits_for_the_task_and_drops_what_is_queued() {
    let calls = Arc::new(Mutex::new(0usize));
    let c = calls.clone();
    let handler = HandlerFuncs::new().on_add(move |_: Arc<ConfigMap>, _| *c.lock() += 1);
    let listener = Listener::spawn(
        "stopped".into(),
        Arc::new(handler),
        &HandlerOptions::default(),
        context(),
    );
    listener.stop().await;
    listener.push(add("late", false));
    tokio::task::yield_now().await;
    assert_eq!(*calls.lock(), 0, "no call after stop");
}
