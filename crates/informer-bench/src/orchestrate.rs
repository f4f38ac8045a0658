//! Renders each scenario's traffic once, serves it, runs every client in its own process
//! `runs` times (interleaved, so drift on a noisy machine hits all clients alike), and prints
//! the medians as one table.

use std::{collections::BTreeMap, process::Stdio, time::Duration};

use fake_apiserver::replay::{ReplayOptions, ReplayServer, WatchShape};
use tokio::{io::AsyncReadExt, process::Command};

use crate::{
    clients::{Impl, Outcome},
    traffic,
};

/// The client-node peer's script; `npm ci` in its folder installs what it needs.
const NODE_CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/node/client.js");

/// Whether the client-node peer can run: Node on the PATH and its packages installed.
fn client_node_ready() -> bool {
    let modules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/node/node_modules/@kubernetes/client-node"
    );
    std::path::Path::new(modules).is_dir()
        && std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
}

/// The longest one client run may take.
const RUN_LIMIT: Duration = Duration::from_secs(600);

/// One workload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scenario {
    /// Pods listed.
    pub(crate) n: usize,
    /// Watch events after the list.
    pub(crate) m: usize,
    /// Counting handlers.
    pub(crate) k: usize,
}

impl Scenario {
    fn label(&self) -> String {
        let short = |x: usize| {
            if x >= 1000 && x.is_multiple_of(1000) {
                format!("{}k", x / 1000)
            } else {
                x.to_string()
            }
        };
        if self.m == 0 {
            format!("N={} sync", short(self.n))
        } else {
            format!("N={} M={} K={}", short(self.n), short(self.m), self.k)
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The workloads, in order.
    pub(crate) scenarios: Vec<Scenario>,
    /// The clients compared.
    pub(crate) clients: Vec<Impl>,
    /// Runs per client and scenario (the table shows medians).
    pub(crate) runs: usize,
    /// Seeds the traffic.
    pub(crate) seed: u64,
    /// How the server writes watch events (per event, as a real server, by default).
    pub(crate) shape: WatchShape,
    /// What the objects are (pods by default).
    pub(crate) objects: traffic::Objects,
}

impl Plan {
    /// Issue #8's workloads: 10k pods then 100k events to 1 and 10 handlers; 50k pods synced.
    pub(crate) fn full() -> Self {
        Self {
            scenarios: vec![
                Scenario {
                    n: 10_000,
                    m: 100_000,
                    k: 1,
                },
                Scenario {
                    n: 10_000,
                    m: 100_000,
                    k: 10,
                },
                Scenario {
                    n: 50_000,
                    m: 0,
                    k: 1,
                },
            ],
            clients: Impl::ALL.to_vec(),
            runs: 3,
            seed: 8,
            shape: WatchShape::PerEvent,
            objects: traffic::Objects::Pods,
        }
    }

    /// A quick look: 2k pods then 20k events; 10k pods synced; one run.
    pub(crate) fn quick() -> Self {
        Self {
            scenarios: vec![
                Scenario {
                    n: 2_000,
                    m: 20_000,
                    k: 1,
                },
                Scenario {
                    n: 2_000,
                    m: 20_000,
                    k: 10,
                },
                Scenario {
                    n: 10_000,
                    m: 0,
                    k: 1,
                },
            ],
            runs: 1,
            ..Self::full()
        }
    }
}

/// Runs the plan and prints the table.
pub(crate) fn run(plan: &Plan) -> Result<(), String> {
    on_one_thread(run_plan(plan))
}

/// Runs an orchestrator on one thread: the server it holds gets one, and the processes it
/// starts get the rest of the machine.
pub(crate) fn on_one_thread(
    orchestrate: impl Future<Output = Result<(), String>>,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(orchestrate)
}

/// `clients` without client-node when it cannot run here (said on stderr).
pub(crate) fn runnable(clients: &[Impl]) -> Vec<Impl> {
    let mut clients = clients.to_vec();
    if clients.contains(&Impl::ClientNode) && !client_node_ready() {
        eprintln!(
            "client-node left out: needs node and `npm ci --prefix {}`",
            NODE_CLIENT.trim_end_matches("/client.js")
        );
        clients.retain(|c| *c != Impl::ClientNode);
    }
    clients
}

async fn run_plan(plan: &Plan) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut plan = plan.clone();
    plan.clients = runnable(&plan.clients);
    if plan.objects == traffic::Objects::Widgets {
        // Custom resources are served as JSON only: the protobuf clients have nothing to read.
        let (json, protobuf): (Vec<Impl>, Vec<Impl>) =
            plan.clients.iter().partition(|c| c.reads_any_json_kind());
        if !protobuf.is_empty() {
            eprintln!("left out for a custom resource (JSON only): {protobuf:?}");
        }
        plan.clients = json;
    }
    let plan = &plan;
    let mut rows = Vec::new();
    let mut rendered: Option<((usize, usize), ReplayServer, usize, usize)> = None;
    for scenario in &plan.scenarios {
        if rendered.as_ref().map(|r| r.0) != Some((scenario.n, scenario.m)) {
            drop(rendered.take()); // free the previous traffic first
            eprintln!(
                "rendering {} {:?} and {} events...",
                scenario.n, plan.objects, scenario.m
            );
            let traffic = traffic::render_objects(plan.objects, scenario.n, scenario.m, plan.seed);
            let bytes = traffic.objects.iter().map(|o| o.len()).sum::<usize>();
            let avg = bytes / traffic.objects.len().max(1);
            let deletes = traffic::deletes(&traffic);
            // Protobuf too, when a client asks for it (rendered once, before any client).
            let options = ReplayOptions {
                watch_shape: plan.shape,
                protobuf: plan.objects == traffic::Objects::Pods
                    && plan.clients.iter().any(|c| {
                        matches!(
                            c,
                            Impl::TypedProtobuf
                                | Impl::TypedProtobufStripped
                                | Impl::TypedDefaults
                                | Impl::TypedDefaultsPaged
                                | Impl::CompactProtobuf
                        )
                    }),
            };
            let server = ReplayServer::start_with_options(traffic, options)
                .await
                .map_err(|e| e.to_string())?;
            rendered = Some(((scenario.n, scenario.m), server, avg, deletes));
        }
        let (_, server, avg, deletes) = rendered.as_ref().expect("rendered above");
        eprintln!("{} (pods of {avg} bytes on average)", scenario.label());
        let mut outcomes: BTreeMap<String, Vec<(Outcome, u32)>> = BTreeMap::new();
        for run in 0..plan.runs {
            for client in &plan.clients {
                // The server's share of one core over the run (it is this process): far
                // under 100% means it waited on the socket, i.e. it outran the client.
                let (cpu, started) = (crate::measure::cpu_time(), std::time::Instant::now());
                let outcome = run_client(
                    &exe,
                    *client,
                    server.url(),
                    scenario,
                    *deletes,
                    plan.objects,
                )
                .await?;
                let busy = (crate::measure::cpu_time().saturating_sub(cpu).as_secs_f64()
                    / started.elapsed().as_secs_f64()
                    * 100.0)
                    .round() as u32;
                eprintln!(
                    "  run {} {client:>8}: sync {:.2} s, watch {:.2} s, peak {} MiB, cpu {:.1} s, server busy {busy}%",
                    run + 1,
                    outcome.sync.as_secs_f64(),
                    outcome.watch.as_secs_f64(),
                    outcome.peak_rss_kib / 1024,
                    outcome.cpu.as_secs_f64()
                );
                outcomes
                    .entry(client.to_string())
                    .or_default()
                    .push((outcome, busy));
            }
        }
        for client in &plan.clients {
            let runs = &outcomes[&client.to_string()];
            let (measured, busy): (Vec<Outcome>, Vec<u32>) = runs.iter().cloned().unzip();
            let mut busy = busy;
            busy.sort_unstable();
            rows.push((*scenario, *client, median(&measured), busy[busy.len() / 2]));
        }
    }
    println!("{}", table(&rows));
    Ok(())
}

/// Runs `client` in its own process against `url` and reads its outcome.
pub(crate) async fn run_client(
    exe: &std::path::Path,
    client: Impl,
    url: &str,
    s: &Scenario,
    deletes: usize,
    objects: traffic::Objects,
) -> Result<Outcome, String> {
    let mut command = if client == Impl::ClientNode {
        // The node measured is named, and runs without options from the environment: a
        // `NODE_OPTIONS` or another node on the PATH changes its memory (BENCHMARKS.md
        // has a client-node figure no later run reproduced).
        let version = Command::new("node").arg("--version").output().await;
        let version = version.map_or_else(
            |e| format!("unknown ({e})"),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
        eprintln!("client-node runner: node {version}, NODE_OPTIONS cleared");
        let mut node = Command::new("node");
        node.arg(NODE_CLIENT).env_remove("NODE_OPTIONS");
        if objects == traffic::Objects::Widgets {
            node.args(["--resource", "widgets"]);
        }
        node
    } else {
        let mut own = Command::new(exe);
        own.args(["client", "--client", &client.to_string()]);
        own.args(["--deletes", &deletes.to_string()]); // counts checked exactly
        if objects == traffic::Objects::Widgets {
            own.args(["--objects", "widgets"]);
        }
        own
    };
    let mut child = command
        .args(["--url", url])
        .args([
            "--n",
            &s.n.to_string(),
            "--m",
            &s.m.to_string(),
            "--k",
            &s.k.to_string(),
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let mut stdout = child.stdout.take().expect("piped");
    let finished = tokio::time::timeout(RUN_LIMIT, async {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out).await;
        (child.wait().await, out)
    })
    .await;
    let (status, out) = finished.map_err(|_| format!("{client} took longer than {RUN_LIMIT:?}"))?;
    let status = status.map_err(|e| e.to_string())?;
    out.lines()
        .find_map(Outcome::parse)
        .filter(|_| status.success())
        .ok_or_else(|| format!("{client} failed ({status}): {out}"))
}

/// The median of each figure separately.
pub(crate) fn median(runs: &[Outcome]) -> Outcome {
    fn mid<T: Copy + Ord>(mut v: Vec<T>) -> T {
        v.sort_unstable();
        v[v.len() / 2]
    }
    Outcome {
        sync: mid(runs.iter().map(|o| o.sync).collect()),
        watch: mid(runs.iter().map(|o| o.watch).collect()),
        peak_rss_kib: mid(runs.iter().map(|o| o.peak_rss_kib).collect()),
        cpu: mid(runs.iter().map(|o| o.cpu).collect()),
        switches: mid(runs.iter().map(|o| o.switches).collect()),
    }
}

/// The markdown table: figures, then speed and memory as ratios to kube-rs and to the bound.
/// Speed is events/s for scenarios with events, pods synced per second otherwise.
fn table(rows: &[(Scenario, Impl, Outcome, u32)]) -> String {
    let speed = |s: &Scenario, o: &Outcome| {
        if s.m > 0 {
            s.m as f64 / o.watch.as_secs_f64()
        } else {
            s.n as f64 / o.sync.as_secs_f64()
        }
    };
    let find = |s: &Scenario, client: Impl| {
        rows.iter()
            .find(|(rs, c, _, _)| rs.label() == s.label() && *c == client)
            .map(|(_, _, o, _)| o)
    };
    let mut out = String::from(
        "| scenario | client | sync s | watch s | events/s | peak RSS MiB | KiB/pod | KiB/pod over bound | CPU s | ctx switches | speed ÷ kube-rs | speed ÷ bound | RSS ÷ kube-rs | server busy |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (s, client, o, busy) in rows {
        let ratio = |peer: Impl| {
            find(s, peer).map_or("—".to_owned(), |p| {
                format!("{:.2}", speed(s, o) / speed(s, p))
            })
        };
        let rss_ratio = find(s, Impl::KubeRs).map_or("—".to_owned(), |p| {
            format!("{:.2}", o.peak_rss_kib as f64 / p.peak_rss_kib as f64)
        });
        // What caching adds: peak RSS above the bound's (same client stack, nothing kept).
        let over_bound = find(s, Impl::Bound).map_or("—".to_owned(), |b| {
            format!(
                "{:.1}",
                o.peak_rss_kib.saturating_sub(b.peak_rss_kib) as f64 / s.n as f64
            )
        });
        let events = if s.m > 0 {
            format!("{:.0}", speed(s, o))
        } else {
            "—".into()
        };
        out.push_str(&format!(
            "| {} | {client} | {:.2} | {:.2} | {events} | {:.0} | {:.1} | {over_bound} | {:.1} | {} | {} | {} | {rss_ratio} | {busy}% |\n",
            s.label(),
            o.sync.as_secs_f64(),
            o.watch.as_secs_f64(),
            o.peak_rss_kib as f64 / 1024.0,
            o.peak_rss_kib as f64 / s.n as f64,
            o.cpu.as_secs_f64(),
            o.switches,
            ratio(Impl::KubeRs),
            ratio(Impl::Bound),
        ));
    }
    out
}
