//! `informer-bench sharding`: a sharded controller of Pods as 1, 2 and 4 replicas, each in
//! its own process, on fake-apiserver with realistic pods. For each replica count: the
//! time until every pod is labelled and cached by its shard, then per replica the pods it
//! caches, its reconciles, its memory and the bytes it read from the API server; then one
//! replica is killed (the time until the others hold its pods) and a new one joins (the
//! time until it holds its share).

pub(crate) mod replica;

use std::{
    collections::{BTreeMap, BTreeSet},
    process::Stdio,
    sync::Arc,
    time::{Duration, Instant},
};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, fixtures::realistic_pod};
use kube_informer_runtime::sharding::Ring;
use parking_lot::Mutex;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    task::JoinSet,
};

pub(crate) const NAMESPACE: &str = "bench";
pub(crate) const RING: &str = "bench";
/// The longest a placement may take before the run is called failed.
const SETTLE_LIMIT: Duration = Duration::from_secs(600);

/// What the orchestrator was asked for.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) pods: usize,
    pub(crate) replicas: Vec<usize>,
    pub(crate) lease: Duration,
}

/// A replica's report of itself, one line every quarter second.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Status {
    pub(crate) cached: usize,
    pub(crate) reconciles: u64,
    pub(crate) leading: bool,
    pub(crate) rss_kib: u64,
    pub(crate) peak_rss_kib: u64,
}

impl Status {
    pub(crate) fn line(&self) -> String {
        format!(
            "status {} {} {} {} {}",
            self.cached, self.reconciles, self.leading, self.rss_kib, self.peak_rss_kib
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let mut fields = line.strip_prefix("status ")?.split(' ');
        Some(Self {
            cached: fields.next()?.parse().ok()?,
            reconciles: fields.next()?.parse().ok()?,
            leading: fields.next()?.parse().ok()?,
            rss_kib: fields.next()?.parse().ok()?,
            peak_rss_kib: fields.next()?.parse().ok()?,
        })
    }
}

type Statuses = Arc<Mutex<BTreeMap<String, Status>>>;

/// The replicas running, and the tasks reading their reports.
struct Replicas {
    exe: std::path::PathBuf,
    url: String,
    lease: Duration,
    children: BTreeMap<String, Child>,
    statuses: Statuses,
    readers: JoinSet<()>,
}

impl Replicas {
    fn start(&mut self, shard: &str) -> Result<(), String> {
        let mut child = Command::new(&self.exe)
            .args(["shard-replica", "--url", &self.url, "--shard", shard])
            .args(["--lease-secs", &self.lease.as_secs().to_string()])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start a replica: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let (statuses, name) = (self.statuses.clone(), shard.to_owned());
        self.readers.spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(status) = Status::parse(&line) {
                    statuses.lock().insert(name.clone(), status);
                }
            }
        });
        self.children.insert(shard.to_owned(), child);
        Ok(())
    }

    async fn kill(&mut self, shard: &str) {
        if let Some(mut child) = self.children.remove(shard) {
            let _ = child.kill().await;
        }
        self.statuses.lock().remove(shard);
    }

    /// Waits until every replica leads its shard and caches exactly the pods the ring of
    /// the replicas places on it.
    async fn settled(&self, keys: &[String]) -> Result<Duration, String> {
        let started = Instant::now();
        let shards: BTreeSet<&str> = self.children.keys().map(String::as_str).collect();
        let ring = Ring::new(shards.iter().copied());
        let mut expected: BTreeMap<&str, usize> = shards.iter().map(|s| (*s, 0)).collect();
        for key in keys {
            *expected
                .entry(ring.shard_for(key).expect("a live shard"))
                .or_default() += 1;
        }
        loop {
            let done = {
                let statuses = self.statuses.lock();
                expected.iter().all(|(shard, n)| {
                    statuses
                        .get(*shard)
                        .is_some_and(|s| s.leading && s.cached == *n)
                })
            };
            if done {
                return Ok(started.elapsed());
            }
            if started.elapsed() > SETTLE_LIMIT {
                return Err(format!(
                    "not settled after {SETTLE_LIMIT:?}: expected {expected:?}, reported {:?}",
                    self.statuses.lock()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One replica's figures once settled.
struct Row {
    shard: String,
    status: Status,
    read_bytes: u64,
}

pub(crate) fn run(plan: &Plan) -> Result<(), String> {
    crate::orchestrate::on_one_thread(run_plan(plan))
}

async fn run_plan(plan: &Plan) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    println!(
        "sharded controller of {} pods; lease {:?} (renew at 2/3, retry at 1/5), sharding period 5 s\n",
        plan.pods, plan.lease
    );
    println!(
        "| replicas | replica | pods cached | share | reconciles | RSS MiB | peak MiB | read from API MiB |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    let mut timings = Vec::new();
    for &n in &plan.replicas {
        let server = seeded(plan.pods).await?;
        let keys: Vec<String> = (0..plan.pods)
            .map(|i| format!("/Pod/{NAMESPACE}/{}", pod_name(i)))
            .collect();
        let mut replicas = Replicas {
            exe: exe.clone(),
            url: server.url().to_owned(),
            lease: plan.lease,
            children: BTreeMap::new(),
            statuses: Statuses::default(),
            readers: JoinSet::new(),
        };
        for i in 0..n {
            replicas.start(&format!("r{i}"))?;
        }
        let placed = replicas.settled(&keys).await?;
        // Let the reconciles of the last placed pods finish before reading the counts.
        tokio::time::sleep(Duration::from_secs(2)).await;
        for row in rows(&server, &replicas) {
            let s = row.status;
            println!(
                "| {n} | {} | {} | {:.1}% | {} | {} | {} | {:.0} |",
                row.shard,
                s.cached,
                s.cached as f64 * 100.0 / plan.pods as f64,
                s.reconciles,
                s.rss_kib / 1024,
                s.peak_rss_kib / 1024,
                row.read_bytes as f64 / (1024.0 * 1024.0)
            );
        }
        let mut timing = format!("{n} replica(s): all pods placed and cached in {placed:.1?}");
        if n >= 2 {
            let victim = format!("r{}", n - 1);
            replicas.kill(&victim).await;
            let crash = replicas.settled(&keys).await?;
            replicas.start(&format!("r{n}"))?;
            let join = replicas.settled(&keys).await?;
            timing += &format!(
                "; {victim} killed: its pods held by the others after {crash:.1?}; r{n} joined: its share held after {join:.1?}"
            );
        }
        eprintln!("{timing}");
        timings.push(timing);
        for shard in replicas.children.keys().cloned().collect::<Vec<_>>() {
            replicas.kill(&shard).await;
        }
        replicas.readers.shutdown().await;
        server.shutdown().await;
    }
    println!();
    for timing in timings {
        println!("- {timing}");
    }
    Ok(())
}

fn pod_name(i: usize) -> String {
    format!("web-{i:06}-7d9c5b8f6-x2k4p")
}

/// A fresh server holding `pods` realistic pods in the benchmark's namespace.
async fn seeded(pods: usize) -> Result<FakeApiServer, String> {
    let server = FakeApiServer::start(ServerConfig::default().namespaces([NAMESPACE]))
        .await
        .map_err(|e| e.to_string())?;
    let objects = (0..pods).map(|i| {
        let mut pod = realistic_pod(i);
        pod["metadata"]["namespace"] = NAMESPACE.into();
        pod
    });
    server
        .seed(&Gvr::core("pods"), objects)
        .map_err(|e| e.to_string())?;
    Ok(server)
}

/// Each replica's status and the bytes the API server sent it (its shard's LISTs and
/// watches, told apart by their label selector), and the same for the sharder's own cache
/// (pods listed and watched without a selector).
fn rows(server: &FakeApiServer, replicas: &Replicas) -> Vec<Row> {
    let requests = server.requests();
    let read = |shard: Option<&str>| -> u64 {
        requests
            .iter()
            .filter(|r| r.resource.as_deref() == Some("pods") && r.method == "GET")
            .filter(|r| match (shard, r.param("labelSelector")) {
                (Some(shard), Some(selector)) => selector.ends_with(&format!("={shard}")),
                (None, None) => true,
                _ => false,
            })
            .map(|r| r.bytes)
            .sum()
    };
    let statuses = replicas.statuses.lock();
    let mut rows: Vec<Row> = replicas
        .children
        .keys()
        .map(|shard| Row {
            shard: shard.clone(),
            status: statuses.get(shard).copied().unwrap_or_default(),
            read_bytes: read(Some(shard)),
        })
        .collect();
    rows.push(Row {
        shard: "(sharder's metadata cache)".into(),
        status: Status::default(),
        read_bytes: read(None),
    });
    rows
}
