//! Every way a reconcile fails, through the runtime's `Controller` in a `Manager`, as the
//! people running an operator see it during an incident: the counters on `/metrics`, and
//! one log line per failure naming the controller, the key and the error.
//!
//! - an error is retried with backoff and never given up (by default);
//! - an error the error policy calls terminal is counted once and not retried;
//! - `max_retries` reached: counted as terminal once, then left alone;
//! - a reconcile past its `reconcile_timeout` is cancelled, counted and retried;
//! - a panic, before the reconcile returns its future or inside it, is caught, counted and
//!   retried.

use std::{
    collections::BTreeMap,
    io::{Read, Write},
    sync::{Arc, OnceLock},
    time::Duration,
};

use e2e::{Backend, both, ensure_namespace};
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt, api::PostParams};
use kube_informer::{Selectors, factory::FactoryOptions};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, ControllerOptions},
    manager::{Manager, ManagerOptions},
};
use parking_lot::Mutex;
use serde_json::json;

const NS: &str = "rt-failures";
const KEYS: [&str; 6] = [
    "err",
    "terminal",
    "timeout",
    "panic-before",
    "panic-inside",
    "max-err",
];

/// Every log line of this test binary (the runtime logs from its worker threads).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || Sink(sink.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        logs
    })
    .clone()
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log lines that contain every one of `parts`.
fn lines_with(parts: &[&str]) -> Vec<String> {
    let logs = logs();
    let text = String::from_utf8_lossy(&logs.lock()).into_owned();
    text.lines()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .map(str::to_owned)
        .collect()
}

/// `GET /metrics` on the manager's endpoints.
async fn metrics(addr: std::net::SocketAddr) -> String {
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        let request = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    })
    .await
    .unwrap()
}

/// The value of the counter `name{controller="<controller>"}` (0 if absent).
fn counter(text: &str, name: &str, controller: &str) -> u64 {
    let series = format!("{name}{{controller=\"{controller}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
        .unwrap_or(0)
}

type Attempts = Arc<Mutex<BTreeMap<String, u32>>>;

/// The failing controller's reconcile: what it does depends on the object's name.
fn failing(
    cm: Cached<ConfigMap>,
    attempts: Arc<Attempts>,
) -> BoxFuture<'static, Result<Action, String>> {
    let Cached::Present(cm) = cm else {
        return Box::pin(async { Ok(Action::Done) });
    };
    let name = cm.name_any();
    *attempts.lock().entry(name.clone()).or_default() += 1;
    match name.as_str() {
        "panic-before" => panic!("boom before"),
        "panic-inside" => Box::pin(async { panic!("boom inside") }),
        "timeout" => Box::pin(std::future::pending()),
        "err" | "terminal" => Box::pin(async move { Err(format!("boom {name}")) }),
        _ => Box::pin(async { Ok(Action::Done) }),
    }
}

async fn every_failure_is_counted_and_logged(backend: Backend) {
    let tag = backend.name().to_owned();
    let logs = logs();
    let client = backend.client();
    ensure_namespace(&client, NS).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for key in KEYS {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": key}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let factory = FactoryOptions::default().selectors(Selectors::default().in_namespace(NS));
    let mut manager = Manager::new(client, ManagerOptions::for_tests().factory(factory))
        .await
        .unwrap();
    let (failing_name, limited_name) = (format!("failing-{tag}"), format!("limited-{tag}"));
    let options = ControllerOptions::default()
        .name(&failing_name)
        .reconcile_timeout(Some(Duration::from_secs(1)));
    let controller = manager.controller::<ConfigMap>(options);
    let attempts: Arc<Attempts> = Arc::default();
    manager.add_controller(
        controller,
        failing,
        |cm, _, _| match cm {
            Cached::Present(cm) if cm.name_any() == "terminal" => Action::Done,
            _ => Action::Retry,
        },
        attempts.clone(),
    );
    let options = ControllerOptions::default()
        .name(&limited_name)
        .max_retries(Some(3));
    let controller = manager.controller::<ConfigMap>(options);
    let limited: Arc<Attempts> = Arc::default();
    manager.add_controller(
        controller,
        |cm: Cached<ConfigMap>, attempts: Arc<Attempts>| async move {
            match cm {
                Cached::Present(cm) if cm.name_any() == "max-err" => {
                    *attempts.lock().entry(cm.name_any()).or_default() += 1;
                    Err("boom max".to_owned())
                }
                _ => Ok(Action::Done),
            }
        },
        |_, _, _| Action::Retry,
        limited.clone(),
    );
    let mut endpoints = manager.endpoints();
    let (stop, force) = (CancellationToken::new(), CancellationToken::new());
    let running = tokio::spawn(manager.run_until(stop.clone(), force));
    let addr = endpoints.wait_for(Option::is_some).await.unwrap().unwrap();

    // Until the counters show each kind of failure handled, more than once where it is
    // retried (a two-minute hang guard: backoff starts at 5 ms, a timeout takes a second).
    let (failing_name, limited_name) = (failing_name.as_str(), limited_name.as_str());
    let terminal = "controller_runtime_terminal_reconcile_errors_total";
    let timeouts = "controller_runtime_reconcile_timeouts_total";
    let panics = "controller_runtime_reconcile_panics_total";
    let errors = "controller_runtime_reconcile_errors_total";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let text = loop {
        let text = metrics(addr).await;
        if counter(&text, terminal, failing_name) >= 1
            && counter(&text, terminal, limited_name) >= 1
            && counter(&text, timeouts, failing_name) >= 2
            && counter(&text, panics, failing_name) >= 4
            // Errors, timeouts and panics are all errors: 6 plain ones at the least.
            && counter(&text, errors, failing_name) >= 6 + 1 + 2 + 4
            && counter(&text, errors, limited_name) >= 4
        {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{tag}: not every failure came round: {:?} {:?}\n{text}",
            attempts.lock(),
            limited.lock()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    stop.cancel();
    running.await.unwrap().unwrap();

    assert_eq!(
        counter(&text, terminal, failing_name),
        1,
        "{tag}: the terminal error, once"
    );
    assert_eq!(
        counter(&text, terminal, limited_name),
        1,
        "{tag}: max_retries reached, once"
    );
    let attempts = attempts.lock().clone();
    assert_eq!(
        attempts["terminal"], 1,
        "{tag}: a terminal error is not retried"
    );
    assert_eq!(
        limited.lock()["max-err"],
        4,
        "{tag}: 1 attempt and 3 retries, then no more"
    );

    // One line per failure, naming the controller, the key and the error.
    let key = |name: &str| format!("object={NS}/{name}");
    let retried = lines_with(&[failing_name, &key("err"), "will retry", "boom err"]);
    assert!(retried.len() >= 6, "{tag}: {retried:?}");
    let terminal = lines_with(&[
        failing_name,
        &key("terminal"),
        "not retried (terminal)",
        "boom terminal",
    ]);
    assert_eq!(terminal.len(), 1, "{tag}: {terminal:?}");
    let gave_up = lines_with(&[limited_name, &key("max-err"), "giving up", "boom max"]);
    assert_eq!(gave_up.len(), 1, "{tag}: {gave_up:?}");
    let timed_out = lines_with(&[failing_name, &key("timeout"), "did not finish within 1s"]);
    assert!(timed_out.len() >= 2, "{tag}: {timed_out:?}");
    let before = lines_with(&[failing_name, &key("panic-before"), "panicked: boom before"]);
    assert!(before.len() >= 2, "{tag}: {before:?}");
    let inside = lines_with(&[failing_name, &key("panic-inside"), "panicked: boom inside"]);
    assert!(inside.len() >= 2, "{tag}: {inside:?}");
    drop(logs);
}

both!(every_failure_is_counted_and_logged);
