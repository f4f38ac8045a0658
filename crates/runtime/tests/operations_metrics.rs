//! What an SRE's dashboard reads, scraped from a manager's `/metrics` while it works: the
//! `process_*` metrics, `rest_client_*` with the API server's host, webhook requests,
//! latency and in-flight, certificate reads, the work queue's depth per lane, the decode
//! backlog, and each informer's lists, watches and last sync. Every family must be there,
//! and the ones that count what happened must move when it happens; and every family the
//! manager exports is in docs/operations.md's Metrics table, with the labels it gives.

use crate::{common, webhook::client};

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use common::{server, until};
use fake_apiserver::Gvr;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{ResourceExt, core::admission::AdmissionRequest};
use kube_envtest::ServingCerts;
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, ControllerOptions},
    manager::{Manager, ManagerOptions},
    tls::ServingCert,
    webhook::{Allowed, WebhookServer},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::Semaphore,
};

/// The samples of one scrape: the series (name and labels, as written) and its value;
/// and each family's name and type (`# TYPE` lines).
struct Scrape(HashMap<String, f64>, BTreeMap<String, String>);

impl Scrape {
    async fn of(addr: std::net::SocketAddr) -> Self {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let (_, body) = response.split_once("\r\n\r\n").unwrap();
        let samples = body
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty());
        let samples = samples.filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        });
        let families = body.lines().filter_map(|l| {
            let (name, kind) = l.strip_prefix("# TYPE ")?.split_once(' ')?;
            Some((name.to_owned(), kind.to_owned()))
        });
        Self(samples.collect(), families.collect())
    }

    /// The names a dashboard queries for each family: OpenMetrics names a counter's family
    /// without the `_total` its samples carry.
    fn queried_names(&self) -> BTreeSet<String> {
        let names = self.1.iter().map(|(name, kind)| match kind.as_str() {
            "counter" => format!("{name}_total"),
            "info" => format!("{name}_info"),
            _ => name.clone(),
        });
        names.collect()
    }

    /// The labels of the series of the family queried as `name` (a histogram's `_bucket`,
    /// `_sum` and `_count` too), each as written.
    fn label_sets(&self, name: &str) -> Vec<&str> {
        let base = name.strip_suffix("_total").unwrap_or(name);
        let series = self
            .0
            .keys()
            .map(|s| s.split_once('{').unwrap_or((s.as_str(), "")));
        series
            .filter(|(series_name, _)| {
                let suffix = series_name.strip_prefix(base);
                suffix.is_some_and(|s| ["", "_total", "_bucket", "_sum", "_count"].contains(&s))
            })
            .map(|(_, labels)| labels)
            .collect()
    }

    /// The sum of the samples named `name` whose labels include each of `labels`.
    fn sum(&self, name: &str, labels: &[&str]) -> Option<f64> {
        let matching = self.0.iter().filter(|(series, _)| {
            let (series_name, rest) = series.split_once('{').unwrap_or((series.as_str(), ""));
            series_name == name && labels.iter().all(|l| rest.contains(l))
        });
        matching.map(|(_, v)| *v).reduce(|a, b| a + b)
    }

    fn get(&self, name: &str, labels: &[&str]) -> f64 {
        self.sum(name, labels)
            .unwrap_or_else(|| panic!("no {name} {labels:?} in the scrape"))
    }
}

/// The metric families docs/operations.md names (in backticks, in its "Metrics" section),
/// each with the labels it gives them (`name{a,b}`, `name{a="x"|"y"}`).
fn documented_metrics() -> BTreeMap<String, Vec<String>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/operations.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let (_, section) = docs
        .split_once("\n## Metrics\n")
        .expect("a Metrics section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let quoted = section.split('`').skip(1).step_by(2);
    let metrics = quoted.filter_map(|quoted| {
        let (name, labels) = quoted.split_once('{').unwrap_or((quoted, ""));
        let is_name = name.contains('_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        let labels = labels.trim_end_matches('}').split(',');
        let labels = labels.map(|l| l.split('=').next().unwrap_or_default().trim().to_owned());
        is_name.then(|| {
            (
                name.to_owned(),
                labels.filter(|l| !l.is_empty()).collect::<Vec<_>>(),
            )
        })
    });
    let mut documented = BTreeMap::<String, Vec<String>>::new();
    for (name, labels) in metrics {
        documented.entry(name).or_default().extend(labels);
    }
    documented
}

/// Every family the manager exports is in the docs' table, with the labels the table
/// gives it: a metric added, renamed or relabelled without its documentation fails here.
fn families_are_documented(scrape: &Scrape) {
    let documented = documented_metrics();
    let undocumented: Vec<_> = scrape
        .queried_names()
        .into_iter()
        .filter(|name| !documented.contains_key(name))
        .collect();
    assert!(
        undocumented.is_empty(),
        "exported but not in docs/operations.md's Metrics table: {undocumented:?}"
    );
    // A family with series has the labels the docs give it (one without series yet, a
    // counter nothing counted, has nothing to contradict them).
    let exported = scrape.queried_names();
    for (name, labels) in documented.iter().filter(|(n, _)| exported.contains(*n)) {
        let sets = scrape.label_sets(name);
        for label in labels.iter().filter(|_| !sets.is_empty()) {
            let labelled = format!("{label}=\"");
            assert!(
                sets.iter().any(|set| set.contains(&labelled)),
                "docs/operations.md gives {name} the label {label}; its series: {sets:?}"
            );
        }
    }
}

fn review(uid: &str) -> serde_json::Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "operation": "CREATE", "name": "c", "namespace": "shop",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "userInfo": {"username": "tester"}, "dryRun": false,
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "shop"}},
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_family_a_dashboard_reads_is_scraped_and_moves() {
    let started = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let server = server().await;
    let config = kube::Config::new(server.url().parse().unwrap());
    let mut manager = Manager::from_config(config, ManagerOptions::for_tests())
        .await
        .unwrap();

    // A webhook server with a certificate from files.
    let dir = tempfile::tempdir().unwrap();
    let certs = ServingCerts::for_loopback().unwrap();
    certs.write_to(dir.path()).unwrap();
    let webhooks = WebhookServer::new(ServingCert::from_dir(dir.path()))
        .address(([127, 0, 0, 1], 0).into())
        .validating("/validate", |_: AdmissionRequest<ConfigMap>| async {
            Ok(Allowed::new())
        })
        .bind()
        .await
        .unwrap();
    let (webhook_addr, watcher) = (webhooks.local_addr(), webhooks.certificate().clone());
    manager.add_webhooks(webhooks);

    // One worker, held by the ConfigMap `hold` until the test lets it go.
    let gate = Arc::new(Semaphore::new(0));
    let reconciled: Arc<Mutex<Vec<String>>> = Arc::default();
    let controller =
        manager.controller::<ConfigMap>(ControllerOptions::default().name("cms").workers(1));
    manager.add_controller(
        controller,
        {
            let (gate, reconciled) = (gate.clone(), reconciled.clone());
            move |cm: Cached<ConfigMap>, _: Arc<()>| {
                let (gate, reconciled) = (gate.clone(), reconciled.clone());
                async move {
                    let name = match &cm {
                        Cached::Present(cm) => cm.name_any(),
                        Cached::Gone(key) => key.name().to_owned(),
                    };
                    reconciled.lock().push(name.clone());
                    if name == "hold" {
                        gate.acquire().await.unwrap().forget();
                    }
                    Ok::<_, kube::Error>(Action::Done)
                }
            }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
    );
    let client = manager.client().clone();
    let mut endpoints = manager.endpoints();
    let (stop, force) = (CancellationToken::new(), CancellationToken::new());
    let running = tokio::spawn(manager.run_until(stop.clone(), force));
    let addr = endpoints.wait_for(Option::is_some).await.unwrap().unwrap();
    let reflector = ["name=\"ConfigMap\""];
    let mut first = Scrape::of(addr).await;
    // Synced: the gauge is 0 until the first LIST lands.
    while first
        .sum("reflector_last_sync_timestamp_seconds", &reflector)
        .is_none_or(|at| at == 0.0)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
        first = Scrape::of(addr).await;
    }

    // Work: a read through the manager's client, a held reconcile with two changes queued behind it, a webhook request, a
    // certificate check.
    let api = kube::Api::<ConfigMap>::namespaced(client, "shop");
    api.list(&Default::default()).await.unwrap();
    let cms = Gvr::core("configmaps");
    server
        .create(&cms, Some("shop"), json!({"metadata": {"name": "hold"}}))
        .unwrap();
    until("the held reconcile", || {
        reconciled.lock().contains(&"hold".to_owned())
    })
    .await;
    for name in ["a", "b"] {
        server
            .create(&cms, Some("shop"), json!({"metadata": {"name": name}}))
            .unwrap();
    }
    let live = ["name=\"cms\"", "lane=\"live\""];
    let mut held = Scrape::of(addr).await;
    while held.get("workqueue_lane_depth", &live) < 2.0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        held = Scrape::of(addr).await;
    }
    assert_eq!(
        held.get(
            "workqueue_lane_depth",
            &["name=\"cms\"", "lane=\"backlog\""]
        ),
        0.0
    );
    let mut connection = client::connect(webhook_addr, &certs.ca_pem).await.unwrap();
    let (status, answer) = connection.post("/validate", &review("u1")).await;
    assert_eq!(
        (status, &answer["response"]["allowed"]),
        (200, &json!(true))
    );
    watcher.check().unwrap();
    gate.add_permits(1);
    until("the queued changes reconciled", || {
        let seen = reconciled.lock();
        seen.contains(&"a".to_owned()) && seen.contains(&"b".to_owned())
    })
    .await;
    let last = Scrape::of(addr).await;

    // process_*: there, and plausible.
    #[cfg(target_os = "linux")]
    {
        for family in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_threads",
        ] {
            assert!(last.get(family, &[]) > 0.0, "{family}");
        }
        let start = last.get("process_start_time_seconds", &[]);
        assert!(
            start > 1e9 && start <= started.as_secs_f64() + 1.0,
            "{start}"
        );
    }
    // rest_client_*, labelled with the fake API server's host, counted what was sent.
    let host = format!("host=\"{}\"", server.addr());
    let gets = |s: &Scrape| s.get("rest_client_requests_total", &[&host, "method=\"GET\""]);
    assert!(gets(&last) > gets(&first), "the LIST was counted");
    assert!(last.get("rest_client_request_duration_seconds_count", &[&host]) > 0.0);
    // The webhook request: counted by path and code, timed, and no longer in flight.
    let path = "webhook=\"/validate\"";
    let answered = ["controller_runtime_webhook_requests_total", "code=\"200\""];
    assert_eq!(first.sum(answered[0], &[path, answered[1]]), None);
    assert_eq!(last.get(answered[0], &[path, answered[1]]), 1.0);
    assert_eq!(
        last.get("controller_runtime_webhook_latency_seconds_count", &[path]),
        1.0
    );
    assert_eq!(
        last.get("controller_runtime_webhook_requests_in_flight", &[path]),
        0.0
    );
    // The certificate: read at bind and at the check.
    let reads = |s: &Scrape| s.get("certwatcher_read_certificate_total", &[]);
    assert!(reads(&last) > reads(&first));
    assert!(
        last.sum("certwatcher_read_certificate_errors_total", &[])
            .is_some()
    );
    // The queue's lanes: two live changes were waiting while held; none now.
    assert_eq!(last.get("workqueue_lane_depth", &live), 0.0);
    // The decoding threads' backlog is exported.
    assert!(last.sum("informer_decode_backlog", &[]).is_some());
    // The informer's watch (its first sync a streaming list: no LIST counted), and a last
    // sync that moved with the new objects.
    assert!(last.get("reflector_watches_total", &reflector) >= 1.0);
    let synced = |s: &Scrape| s.get("reflector_last_sync_timestamp_seconds", &reflector);
    assert!(synced(&first) >= started.as_secs_f64());
    assert!(synced(&last) > synced(&first));

    families_are_documented(&last);

    stop.cancel();
    running.await.unwrap().unwrap();
}
