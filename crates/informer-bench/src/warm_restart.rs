//! `informer-bench warm-restart`: an informer with a cache directory, started cold (no
//! snapshot: a streaming list) and then warm (from the snapshot its cold run wrote when it
//! stopped, after the server changed meanwhile), each in a child process of its own. Per
//! start: the time to synced, the client's CPU, and the bytes the server sent it (counted
//! by a TCP proxy in front of the server).
//!
//! On fake-apiserver (in this process) with realistic pods (typed, and `Compact<Pod>`),
//! and on a real kube-apiserver (kube-envtest, needs KUBEBUILDER_ASSETS) with ConfigMaps.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use futures_util::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_envtest::{Environment, EnvironmentOptions, TcpProxy};
use kube_informer::{
    compact::Compact,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
    list_watch::Selectors,
    snapshot::CacheDir,
};
use serde_json::json;

use crate::measure;

const NS: &str = "bench";

/// What the run was asked for.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Realistic pods on fake-apiserver (0: skip).
    pub(crate) pods: usize,
    /// ConfigMaps on a real kube-apiserver (0: skip).
    pub(crate) configmaps: usize,
    /// Cold and warm starts per server, interleaved (the table shows medians).
    pub(crate) runs: usize,
    /// Objects changed while the informer is down, before each warm start.
    pub(crate) changes: usize,
}

/// One start, as the child reports it (plus the bytes the parent counted).
#[derive(Debug, Clone, Copy, Default)]
struct Start {
    synced: Duration,
    cpu: Duration,
    bytes: u64,
    objects: usize,
}

pub(crate) fn run(plan: &Plan) -> Result<(), String> {
    crate::fleet::on_two_threads(async {
        let mut rows = Vec::new();
        if plan.pods > 0 {
            for kind in ["pods", "compact pods"] {
                rows.push((
                    "fake-apiserver",
                    kind,
                    plan.pods,
                    on_fake(plan, kind).await?,
                ));
            }
        }
        if plan.configmaps > 0 {
            match on_real(plan).await? {
                Some(starts) => {
                    rows.push(("kube-apiserver 1.36", "configmaps", plan.configmaps, starts))
                }
                None => eprintln!(
                    "no kube-apiserver (KUBEBUILDER_ASSETS): the real server's rows are skipped"
                ),
            }
        }
        print_table(&rows, plan);
        Ok(())
    })
}

type Starts = (Start, Start);

/// `kind`: `pods` (typed `Pod`s) or `compact pods` (`Compact<Pod>`).
async fn on_fake(plan: &Plan, kind: &str) -> Result<Starts, String> {
    let server = FakeApiServer::start(ServerConfig::default().namespaces([NS]))
        .await
        .map_err(|e| e.to_string())?;
    let pods = (0..plan.pods).map(|i| {
        let mut pod = fake_apiserver::fixtures::realistic_pod(i);
        pod["metadata"]["namespace"] = json!(NS);
        pod
    });
    server
        .seed(&Gvr::core("pods"), pods)
        .map_err(|e| e.to_string())?;
    let proxy = TcpProxy::start(server.addr().port())
        .await
        .map_err(|e| e.to_string())?;
    let target = Target::Url(format!("http://127.0.0.1:{}", proxy.port()));
    let api: Api<Pod> = Api::namespaced(server.client().map_err(|e| e.to_string())?, NS);
    let change = |i: usize| {
        let api = api.clone();
        async move {
            let patch = json!({"metadata": {"labels": {"bench-change": i.to_string()}}});
            let name = format!("web-{i:06}-7d9c5b8f6-x2k4p");
            api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ())
                .map_err(|e| format!("{name}: {e}"))
        }
    };
    measure_starts(plan, kind, &target, || proxy.bytes_served(), change).await
}

async fn on_real(plan: &Plan) -> Result<Option<Starts>, String> {
    let Some(env) = Environment::start_or_skip(EnvironmentOptions::new().audit_log(false))
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let client = env.client();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace =
        serde_json::from_value(json!({"metadata": {"name": NS}})).map_err(|e| e.to_string())?;
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(|e| e.to_string())?;
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    stream::iter(0..plan.configmaps)
        .map(|i| {
            let api = api.clone();
            async move {
                let cm = serde_json::from_value(json!({
                    "metadata": {"name": format!("cm-{i}"), "labels": {"app": "bench", "index": i.to_string()}},
                    "data": {"config.yaml": format!("replicas: {}\nimage: registry.example.com/app:{i}\n", i % 7)}
                }))
                .map_err(|e: serde_json::Error| e.to_string())?;
                api.create(&PostParams::default(), &cm).await.map(|_| ()).map_err(|e| e.to_string())
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<(), String>>()?;
    let proxy = env.proxy();
    let kubeconfig = tempfile_path("kubeconfig");
    let yaml = serde_json::to_string(&proxy.kubeconfig()).map_err(|e| e.to_string())?;
    std::fs::write(&kubeconfig, yaml).map_err(|e| e.to_string())?;
    let change = |i: usize| {
        let api = api.clone();
        async move {
            let patch = json!({"data": {"changed": i.to_string()}});
            let name = format!("cm-{i}");
            api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ())
                .map_err(|e| format!("{name}: {e}"))
        }
    };
    let target = Target::Kubeconfig(kubeconfig.clone());
    let starts = measure_starts(plan, "configmaps", &target, || proxy.bytes_served(), change).await;
    let _ = std::fs::remove_file(kubeconfig);
    starts.map(Some)
}

/// Where the child process finds the server.
enum Target {
    Url(String),
    Kubeconfig(PathBuf),
}

fn tempfile_path(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("informer-bench-warm-{}-{what}", std::process::id()))
}

/// `plan.runs` cold and warm starts, interleaved; the medians of each.
async fn measure_starts<F, Fut>(
    plan: &Plan,
    kind: &str,
    target: &Target,
    served: impl Fn() -> u64,
    change: F,
) -> Result<Starts, String>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let (mut colds, mut warms) = (Vec::new(), Vec::new());
    for run in 0..plan.runs {
        let dir = tempfile_path(&format!("cache-{run}"));
        let _ = std::fs::remove_dir_all(&dir);
        let before = served();
        let mut cold = child(kind, target, &dir).await?;
        cold.bytes = served() - before;
        // The server changes while the informer is down.
        stream::iter((0..plan.changes).map(|i| (run * plan.changes + i) % cold.objects.max(1)))
            .map(&change)
            .buffer_unordered(8)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<(), String>>()?;
        let before = served();
        let mut warm = child(kind, target, &dir).await?;
        warm.bytes = served() - before;
        if warm.objects != cold.objects {
            return Err(format!(
                "warm start cached {} objects, cold {}",
                warm.objects, cold.objects
            ));
        }
        let _ = std::fs::remove_dir_all(&dir);
        colds.push(cold);
        warms.push(warm);
    }
    Ok((median(&colds), median(&warms)))
}

fn median(starts: &[Start]) -> Start {
    fn mid<T: Copy + Ord>(mut v: Vec<T>) -> T {
        v.sort();
        v[v.len() / 2]
    }
    Start {
        synced: mid(starts.iter().map(|s| s.synced).collect()),
        cpu: mid(starts.iter().map(|s| s.cpu).collect()),
        bytes: mid(starts.iter().map(|s| s.bytes).collect()),
        objects: starts.first().map_or(0, |s| s.objects),
    }
}

/// Runs one start in a child process and reads its report.
async fn child(kind: &str, target: &Target, dir: &Path) -> Result<Start, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut command = tokio::process::Command::new(exe);
    command
        .args(["warm-client", "--kind", kind, "--dir"])
        .arg(dir);
    match target {
        Target::Url(url) => command.args(["--url", url]),
        Target::Kubeconfig(path) => command.arg("--kubeconfig").arg(path),
    };
    let output = command
        .stderr(Stdio::inherit())
        .output()
        .await
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!("the client failed: {}", output.status));
    }
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("the client's report: {e}"))?;
    let ms = |field: &str| Duration::from_micros(report[field].as_u64().unwrap_or(0));
    Ok(Start {
        synced: ms("synced_us"),
        cpu: ms("cpu_us"),
        bytes: 0,
        objects: report["objects"].as_u64().unwrap_or(0) as usize,
    })
}

/// The child: one informer with the cache directory, started, synced, stopped (which
/// writes the snapshot); prints its report as JSON.
pub(crate) fn client(
    kind: &str,
    url: Option<&str>,
    kubeconfig: Option<&Path>,
    dir: &Path,
) -> Result<(), String> {
    crate::fleet::on_two_threads(async {
        let config = match (url, kubeconfig) {
            (Some(url), _) => kube::Config::new(url.parse().map_err(|e| format!("{e}"))?),
            (None, Some(path)) => {
                let kubeconfig =
                    kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                    .await
                    .map_err(|e| e.to_string())?
            }
            (None, None) => return Err("--url or --kubeconfig".into()),
        };
        let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
        let factory = SharedInformerFactory::new(
            client,
            FactoryOptions::default().selectors(Selectors::default().in_namespace(NS)),
        );
        let cache = CacheDir::new(dir, "informer-bench");
        let cpu = measure::cpu_time();
        let started = Instant::now();
        let objects = match kind {
            "pods" => {
                synced(
                    &factory,
                    factory.informer_with::<Pod>(InformerSpec::new().cache_dir(cache)),
                )
                .await?
            }
            "compact pods" => {
                synced(
                    &factory,
                    factory.informer_with::<Compact<Pod>>(InformerSpec::new().cache_dir(cache)),
                )
                .await?
            }
            _ => {
                synced(
                    &factory,
                    factory.informer_with::<ConfigMap>(InformerSpec::new().cache_dir(cache)),
                )
                .await?
            }
        };
        let synced_after = started.elapsed();
        let cpu = measure::cpu_time() - cpu;
        factory.shutdown().await;
        println!(
            "{}",
            json!({"synced_us": synced_after.as_micros() as u64, "cpu_us": cpu.as_micros() as u64, "objects": objects})
        );
        Ok(())
    })
}

async fn synced<K>(
    factory: &SharedInformerFactory,
    informer: kube_informer::informer::SharedIndexInformer<K>,
) -> Result<usize, String>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
{
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(300))
        .await
        .map_err(|e| e.to_string())?;
    Ok(informer.store().len())
}

fn print_table(rows: &[(&str, &str, usize, Starts)], plan: &Plan) {
    println!(
        "\nWarm restarts: an informer with a cache directory started cold, then warm after {} \
         objects changed while it was down; medians of {} runs, each start in its own process:\n",
        plan.changes, plan.runs
    );
    println!("| server | objects | start | time to synced | client CPU | bytes from the server |");
    println!("|---|---:|---|---:|---:|---:|");
    for (server, kind, count, (cold, warm)) in rows {
        let ratio = |w: f64, c: f64| {
            if c > 0.0 {
                format!(" ({:.2}×)", w / c)
            } else {
                String::new()
            }
        };
        println!(
            "| {server} | {count} {kind} | cold | {:.0} ms | {:.0} ms | {:.1} MB |",
            cold.synced.as_secs_f64() * 1e3,
            cold.cpu.as_secs_f64() * 1e3,
            cold.bytes as f64 / 1e6
        );
        println!(
            "| {server} | {count} {kind} | warm | {:.0} ms{} | {:.0} ms{} | {:.3} MB{} |",
            warm.synced.as_secs_f64() * 1e3,
            ratio(warm.synced.as_secs_f64(), cold.synced.as_secs_f64()),
            warm.cpu.as_secs_f64() * 1e3,
            ratio(warm.cpu.as_secs_f64(), cold.cpu.as_secs_f64()),
            warm.bytes as f64 / 1e6,
            ratio(warm.bytes as f64, cold.bytes as f64),
        );
    }
}
