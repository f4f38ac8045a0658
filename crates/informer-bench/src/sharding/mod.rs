//! `informer-bench sharding`: a sharded controller of Pods as 1, 2 and 4 replicas, each in
//! its own process, on fake-apiserver with realistic pods. For each replica count: the
//! time until every pod is labelled and cached by its shard, then per replica the pods it
//! caches, its reconciles, its memory and the bytes it read from the API server; then one
//! replica is killed (the time until the others hold its pods) and a new one joins (the
//! time until it holds its share). In label mode (the sharder writes each pod's shard
//! label) and in range mode (`ManagerOptions::hash_ranges`: each replica lists and watches
//! its hash ranges of pod uids, nothing written), back to back.

pub(crate) mod replica;

use std::{
    collections::{BTreeMap, BTreeSet},
    process::Stdio,
    sync::Arc,
    time::{Duration, Instant},
};

use fake_apiserver::{FakeApiServer, Gvr, RequestRecord, ServerConfig, fixtures::realistic_pod};
use kube_informer::list_watch::shard_hash;
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
    /// `labels`, `ranges`, or both.
    pub(crate) modes: Vec<String>,
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
    ranges: bool,
    children: BTreeMap<String, Child>,
    statuses: Statuses,
    readers: JoinSet<()>,
}

impl Replicas {
    fn start(&mut self, shard: &str) -> Result<(), String> {
        let mut child = Command::new(&self.exe)
            .args(["shard-replica", "--url", &self.url, "--shard", shard])
            .args(["--lease-secs", &self.lease.as_secs().to_string()])
            .args(self.ranges.then_some("--ranges"))
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

    /// Waits until every replica leads its shard and caches exactly the pods placed on
    /// it: by the ring of the replicas (label mode), or by the slot table once no slot
    /// moves (range mode).
    async fn settled(&self, server: &FakeApiServer, pods: &Pods) -> Result<Duration, String> {
        let started = Instant::now();
        let shards: BTreeSet<&str> = self.children.keys().map(String::as_str).collect();
        loop {
            let expected = match self.ranges {
                false => Some(pods.by_ring(&shards)),
                true => pods.by_slots(server, &shards).await,
            };
            let done = expected.as_ref().is_some_and(|expected| {
                let statuses = self.statuses.lock();
                shards.iter().all(|shard| {
                    let n = expected.get(*shard).copied().unwrap_or_default();
                    statuses
                        .get(*shard)
                        .is_some_and(|s| s.leading && s.cached == n)
                })
            });
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

/// The pods, as each mode places them.
struct Pods {
    /// Label mode's keys.
    keys: Vec<String>,
    /// Range mode's slots (of the uids' hashes), one per pod.
    slots: Vec<usize>,
}

impl Pods {
    async fn of(server: &FakeApiServer, count: usize) -> Result<Self, String> {
        let keys = (0..count)
            .map(|i| format!("/Pod/{NAMESPACE}/{}", pod_name(i)))
            .collect();
        let client = server.client().map_err(|e| e.to_string())?;
        let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(client, NAMESPACE);
        let metadata = api
            .list_metadata(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let slots = metadata
            .items
            .iter()
            .map(|pod| {
                let hash = shard_hash(pod.metadata.uid.as_deref().unwrap_or_default());
                (hash >> 58) as usize // 64 slots
            })
            .collect();
        Ok(Self { keys, slots })
    }

    fn by_ring(&self, shards: &BTreeSet<&str>) -> BTreeMap<String, usize> {
        let ring = Ring::new(shards.iter().copied());
        let mut counts = BTreeMap::new();
        for key in &self.keys {
            let shard = ring.shard_for(key).expect("a live shard");
            *counts.entry(shard.to_owned()).or_default() += 1;
        }
        counts
    }

    /// Each live replica's pods as the slot table gives them; `None` while a slot moves,
    /// is held by a replica that is gone, or a live replica holds none.
    async fn by_slots(
        &self,
        server: &FakeApiServer,
        shards: &BTreeSet<&str>,
    ) -> Option<BTreeMap<String, usize>> {
        let client = server.client().ok()?;
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(client, NAMESPACE);
        let lease = leases.get_opt(&format!("{RING}-slot-table")).await.ok()??;
        let text = lease
            .metadata
            .annotations?
            .remove("sharding.kube-informer.dev/slots")?;
        let table: serde_json::Value = serde_json::from_str(&text).ok()?;
        if table["moving"].as_object().is_some_and(|m| !m.is_empty()) {
            return None;
        }
        let holders: Vec<Option<String>> = serde_json::from_value(table["holders"].clone()).ok()?;
        // A replica that joined holds slots once the coordinator has planned for it.
        let holding = |shard: &&str| holders.iter().any(|h| h.as_deref() == Some(*shard));
        if !shards.iter().all(holding) {
            return None;
        }
        let mut counts = BTreeMap::new();
        for slot in &self.slots {
            let holder = holders.get(*slot)?.clone()?;
            if !shards.contains(holder.as_str()) {
                return None;
            }
            *counts.entry(holder).or_default() += 1;
        }
        Some(counts)
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
    for mode in &plan.modes {
        let ranges = match mode.as_str() {
            "labels" => false,
            "ranges" => true,
            other => return Err(format!("unknown mode {other:?}: labels or ranges")),
        };
        run_mode(plan, ranges).await?;
    }
    Ok(())
}

async fn run_mode(plan: &Plan, ranges: bool) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mode = if ranges { "range mode" } else { "label mode" };
    println!(
        "sharded controller of {} pods, {mode}; lease {:?} (renew at 2/3, retry at 1/5), sharding period 5 s\n",
        plan.pods, plan.lease
    );
    println!(
        "| replicas | replica | pods cached | share | reconciles | RSS MiB | peak MiB | read from API MiB |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    let mut timings = Vec::new();
    for &n in &plan.replicas {
        let server = seeded(plan.pods).await?;
        let keys = Pods::of(&server, plan.pods).await?;
        let mut replicas = Replicas {
            exe: exe.clone(),
            url: server.url().to_owned(),
            lease: plan.lease,
            ranges,
            children: BTreeMap::new(),
            statuses: Statuses::default(),
            readers: JoinSet::new(),
        };
        for i in 0..n {
            replicas.start(&format!("r{i}"))?;
        }
        let placed = replicas.settled(&server, &keys).await?;
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
            let before = pod_bytes(&server);
            replicas.kill(&victim).await;
            let crash = replicas.settled(&server, &keys).await?;
            let after_crash = pod_bytes(&server);
            replicas.start(&format!("r{n}"))?;
            let join = replicas.settled(&server, &keys).await?;
            let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
            timing += &format!(
                "; {victim} killed: its pods held by the others after {crash:.1?}, {:.0} MiB of pods read meanwhile; r{n} joined: its share held after {join:.1?}, {:.0} MiB read meanwhile",
                mib(after_crash - before),
                mib(pod_bytes(&server) - after_crash),
            );
        }
        let writes = server
            .requests()
            .iter()
            .filter(|r| r.resource.as_deref() == Some("pods") && r.method != "GET")
            .count();
        timing += &format!("; writes to pods: {writes}");
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

/// The bytes of pods the server has sent so far (LISTs and watches, to every client).
fn pod_bytes(server: &FakeApiServer) -> u64 {
    pod_reads(&server.requests()).map(|r| r.bytes).sum()
}

/// The reads of pods (LISTs and watches) among `requests`.
fn pod_reads(requests: &[RequestRecord]) -> impl Iterator<Item = &RequestRecord> {
    requests
        .iter()
        .filter(|r| r.resource.as_deref() == Some("pods") && r.method == "GET")
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

/// Each replica's status and the bytes the API server sent it. Label mode tells the
/// replicas' requests apart by their label selector, and adds the sharder's own cache (pods
/// listed and watched without a selector); range mode's selectors change with the slots,
/// so its replicas' bytes are one total.
fn rows(server: &FakeApiServer, replicas: &Replicas) -> Vec<Row> {
    let requests = server.requests();
    let pods = || pod_reads(&requests);
    let by_label = |shard: Option<&str>| -> u64 {
        pods()
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
            read_bytes: if replicas.ranges {
                0
            } else {
                by_label(Some(shard))
            },
        })
        .collect();
    rows.push(match replicas.ranges {
        false => Row {
            shard: "(sharder's metadata cache)".into(),
            status: Status::default(),
            read_bytes: by_label(None),
        },
        true => Row {
            shard: "(all replicas)".into(),
            status: Status::default(),
            read_bytes: pods()
                .filter(|r| r.param("shardSelector").is_some())
                .map(|r| r.bytes)
                .sum(),
        },
    });
    rows
}
