//! The world of one sharding schedule: the server, the Leases, the replicas' lives, and
//! the ledger of who reconciled what when.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc,
        atomic::{AtomicU8, AtomicU64, Ordering},
    },
    time::Duration,
};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_informer::{
    Selectors,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
};
use kube_informer_runtime::{
    controller::{Action, Cached, ControllerOptions},
    leader_election::{LeaderElectionConfig, LeaderElector},
    lease::MemoryLeases,
    manager::{Manager, ManagerError, ManagerOptions},
    sharding::{Ring, drain_label, shard_label, shard_selectors},
};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::{task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

use crate::common::schedule::{FAIL, HANG, Link, Rng, UP};

pub(crate) const SLOTS: usize = 4;
const NS: &str = "shop";
const RING: &str = "web";
/// Timer granularity of tokio's wheel (it rounds deadlines up to the millisecond).
const TOLERANCE: Duration = Duration::from_millis(5);

fn cms() -> Gvr {
    Gvr::core("configmaps")
}

fn secrets() -> Gvr {
    Gvr::core("secrets")
}

/// A reconcile's span, recorded when it ends (also when it is dropped: a kill).
#[derive(Clone, Debug)]
pub(crate) struct Span {
    life: usize,
    key: String,
    start: Instant,
    end: Instant,
}

/// Who reconciles what: each key's life while a reconcile runs, every overlap seen, the
/// spans, and which shard reconciled each key last.
#[derive(Default)]
pub(crate) struct Ledger {
    running: BTreeMap<String, usize>,
    overlaps: Vec<String>,
    spans: Vec<Span>,
    last: BTreeMap<String, String>,
}

struct Running {
    ledger: Arc<Mutex<Ledger>>,
    life: usize,
    key: String,
    start: Instant,
}

impl Drop for Running {
    fn drop(&mut self) {
        trace(format_args!("life {} done with {}", self.life, self.key));
        let mut ledger = self.ledger.lock();
        ledger.running.remove(&self.key);
        let span = Span {
            life: self.life,
            key: std::mem::take(&mut self.key),
            start: self.start,
            end: Instant::now(),
        };
        ledger.spans.push(span);
    }
}

/// One incarnation of a replica's process.
struct Life {
    shard: String,
    link: Arc<Link>,
    factory: SharedInformerFactory,
    elector: Option<LeaderElector>,
    stop: CancellationToken,
    task: Option<JoinHandle<(Result<(), ManagerError>, Instant)>>,
    killed: Option<Instant>,
    returned: Option<Instant>,
    /// Intervals during which the link was down: (from, healed).
    cuts: Vec<(Instant, Option<Instant>)>,
}

pub(crate) struct Timing {
    election: LeaderElectionConfig,
    renew: Duration,
    lease: Duration,
    period: Duration,
}

impl Timing {
    /// The defaults of a manager: a 15 s Lease renewed within 10 s, retried every 2 s, and
    /// every object planned again every 5 s.
    pub(crate) fn defaults() -> Self {
        // LeaderElectionConfig's defaults, client-go's.
        let (lease, renew) = (Duration::from_secs(15), Duration::from_secs(10));
        let election = LeaderElectionConfig::new("unused")
            .namespace(NS)
            .lease_duration(lease)
            .renew_deadline(renew)
            .retry_period(Duration::from_secs(2));
        Self {
            election,
            renew,
            lease,
            period: Duration::from_secs(5),
        }
    }

    pub(crate) fn lease(&self) -> Duration {
        self.lease
    }

    pub(crate) fn random(rng: &mut Rng) -> Self {
        let retry = rng.millis(200, 500);
        let renew = retry.mul_f64(1.3) + rng.millis(500, 2000);
        let lease = renew + rng.millis(1000, 2000);
        let election = LeaderElectionConfig::new("unused")
            .namespace(NS)
            .lease_duration(lease)
            .renew_deadline(renew)
            .retry_period(retry)
            .release_on_cancel(rng.below(2) == 0);
        Self {
            election,
            renew,
            lease,
            period: rng.millis(100, 800),
        }
    }
}

pub(crate) struct World {
    seed: u64,
    pub(crate) rng: Rng,
    timing: Timing,
    server: FakeApiServer,
    leases: Arc<MemoryLeases>,
    ledger: Arc<Mutex<Ledger>>,
    lives: Vec<Life>,
    /// The life occupying each slot, if any.
    slots: [Option<usize>; SLOTS],
    objects: usize,
    /// Reconciles of at most 50 ms (none still running seconds after its object moved).
    pub(crate) quick_reconciles: bool,
    /// `settle` looks every 100 ms: what it read last, reused while nothing it depends on
    /// changed (the server's objects, at one resourceVersion; the set of live shards).
    read: std::cell::RefCell<Memo>,
}

/// The objects' placement at one server resourceVersion, and the ring of one set of shards.
#[derive(Default)]
struct Memo {
    labels: Option<(u64, Placement)>,
    ring: Option<(Vec<String>, Ring)>,
}

/// Each primary's shard label, and each child's owner and shard label.
type Placement = (BTreeMap<String, String>, BTreeMap<String, (String, String)>);

fn trace(what: std::fmt::Arguments<'_>) {
    if std::env::var("SCHEDULE_TRACE").is_ok() {
        eprintln!("{:?} {what}", Instant::now());
    }
}

impl World {
    pub(crate) async fn new(seed: u64, rng: Rng, timing: Timing) -> Self {
        let server = FakeApiServer::start(ServerConfig::default().namespaces([NS]))
            .await
            .unwrap();
        Self {
            seed,
            rng,
            timing,
            server,
            leases: Arc::default(),
            ledger: Arc::default(),
            lives: Vec::new(),
            slots: [None; SLOTS],
            objects: 0,
            quick_reconciles: false,
            read: Default::default(),
        }
    }

    /// Creates `n` ConfigMaps, every other one with a Secret it controls.
    pub(crate) async fn populate(&mut self, n: usize) {
        for _ in 0..n {
            self.create();
        }
    }

    fn create(&mut self) {
        let name = format!("cm-{:03}", self.objects);
        self.objects += 1;
        let cm = self
            .server
            .create(&cms(), Some(NS), json!({"metadata": {"name": name}}))
            .unwrap();
        if self.objects.is_multiple_of(2) {
            let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name,
                               "uid": cm["metadata"]["uid"], "controller": true});
            let secret = json!({"metadata": {"name": format!("{name}-child"),
                                             "ownerReferences": [owner]}});
            self.server.create(&secrets(), Some(NS), secret).unwrap();
        }
    }

    pub(crate) async fn start(&mut self, slot: usize) {
        let id = self.lives.len();
        let shard = format!("s{slot}");
        trace(format_args!("start life {id} as {shard}"));
        let link = Arc::new(Link {
            life: id,
            leases: self.leases.clone(),
            state: AtomicU8::new(UP),
            delay_ms: AtomicU64::new(self.rng.below(100)),
        });
        let options = ManagerOptions::default()
            .no_endpoints()
            .shutdown_timeout(Duration::from_secs(3))
            .factory(FactoryOptions::default().selectors(Selectors::default().in_namespace(NS)))
            .leader_election(self.timing.election.clone())
            .lease_store(link.clone())
            .sharded(RING, shard.clone())
            .sharding_period(self.timing.period);
        let mut manager = Manager::new(self.server.memory_client(), options)
            .await
            .unwrap();
        let factory = manager.factory().clone();
        let elector = manager.elector().cloned();
        let controller = manager
            .controller::<ConfigMap>(ControllerOptions::default().name("web").workers(3))
            .owns::<Secret>();
        let (ledger, lengths) = (self.ledger.clone(), Arc::new(Mutex::new(self.rng.clone())));
        lengths.lock().0 ^= id as u64 + 1;
        let name = shard.clone();
        let quick = self.quick_reconciles;
        // The reconcile knows nothing of sharding; it only records when it runs.
        let reconcile = move |cm: Cached<ConfigMap>, _: Arc<()>| {
            let key = match &cm {
                Cached::Present(cm) => cm.metadata.name.clone().unwrap_or_default(),
                Cached::Gone(key) => key.name().to_owned(),
            };
            trace(format_args!("life {id} reconciles {key}"));
            {
                let mut ledger = ledger.lock();
                if let Some(other) = ledger.running.insert(key.clone(), id) {
                    ledger
                        .overlaps
                        .push(format!("{key}: life {other} and life {id}"));
                }
            }
            let running = Running {
                ledger: ledger.clone(),
                life: id,
                key: key.clone(),
                start: Instant::now(),
            };
            let length = {
                let mut rng = lengths.lock();
                if quick {
                    rng.millis(0, 50)
                } else if rng.below(20) == 0 {
                    rng.millis(1000, 4000) // still running when its object moves
                } else {
                    rng.millis(0, 300)
                }
            };
            let (ledger, name) = (ledger.clone(), name.clone());
            async move {
                tokio::time::sleep(length).await;
                drop(running);
                if matches!(cm, Cached::Present(_)) {
                    ledger.lock().last.insert(key, name);
                }
                Ok::<_, kube::Error>(Action::Done)
            }
        };
        manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(()));
        let stop = CancellationToken::new();
        let run = manager.run_until(stop.clone(), CancellationToken::new());
        let task = tokio::spawn(async move { (run.await, Instant::now()) });
        self.lives.push(Life {
            shard,
            link,
            factory,
            elector,
            stop,
            task: Some(task),
            killed: None,
            returned: None,
            cuts: Vec::new(),
        });
        self.slots[slot] = Some(id);
    }

    /// Collects managers that returned on their own (their shard lost, or a stop).
    pub(crate) async fn reap(&mut self) {
        for slot in 0..SLOTS {
            let Some(id) = self.slots[slot] else { continue };
            let life = &mut self.lives[id];
            if life.task.as_ref().is_some_and(JoinHandle::is_finished) {
                let (result, at) = life.task.take().unwrap().await.unwrap();
                let seed = self.seed;
                assert!(
                    result.is_ok() || matches!(result, Err(ManagerError::LeadershipLost)),
                    "seed {seed}: life {id} returned {result:?}"
                );
                trace(format_args!("life {id} returned {result:?}"));
                life.returned = Some(at);
                self.slots[slot] = None;
            }
        }
    }

    /// The slot whose replica is the elected sharder.
    pub(crate) async fn sharder_slot(&self) -> usize {
        use kube_informer_runtime::lease::LeaseStore;
        let lease = self.leases.get(&format!("{RING}-sharder")).await.unwrap();
        let holder = lease
            .and_then(|l| l.spec?.holder_identity)
            .expect("a sharder");
        holder.trim_start_matches('s').parse().unwrap()
    }

    /// Kills the replica in `slot` (its manager's future dropped).
    pub(crate) async fn kill_slot(&mut self, slot: usize) {
        let id = self.slots[slot].expect("a running slot");
        self.kill(id).await;
    }

    pub(crate) async fn stop_gracefully(&mut self, slot: usize) {
        let id = self.slots[slot].expect("a running slot");
        self.lives[id].stop.cancel();
        let task = self.lives[id].task.take().unwrap();
        let (result, at) = task.await.unwrap();
        assert!(result.is_ok(), "seed {}: {result:?}", self.seed);
        self.lives[id].returned = Some(at);
        self.slots[slot] = None;
    }

    async fn kill(&mut self, id: usize) {
        let life = &mut self.lives[id];
        if let Some(task) = life.task.take() {
            trace(format_args!("kill life {id}"));
            task.abort(); // a crash: the run future is dropped
            let _ = task.await;
            life.killed = Some(Instant::now());
        }
        if let Some(slot) = self.slots.iter().position(|s| *s == Some(id)) {
            self.slots[slot] = None;
        }
    }

    fn random_life(&mut self) -> Option<usize> {
        let running: Vec<usize> = self.slots.iter().flatten().copied().collect();
        (!running.is_empty()).then(|| running[self.rng.below(running.len() as u64) as usize])
    }

    pub(crate) async fn step(&mut self) {
        let action = self.rng.below(12);
        trace(format_args!("action {action} slots {:?}", self.slots));
        match action {
            0 => {
                if let Some(id) = self.random_life() {
                    self.kill(id).await;
                }
            }
            1 => {
                if let Some(id) = self.random_life() {
                    self.lives[id].stop.cancel();
                }
            }
            2 | 3 => {
                if let Some(id) = self.random_life() {
                    let mode = if self.rng.below(2) == 0 { HANG } else { FAIL };
                    let life = &mut self.lives[id];
                    if life.link.state.swap(mode, Ordering::SeqCst) == UP {
                        life.cuts.push((Instant::now(), None));
                    }
                }
            }
            4 => {
                if let Some(id) = self.random_life() {
                    self.heal(id);
                }
            }
            5 | 6 => {
                if let Some(slot) = self.slots.iter().position(Option::is_none) {
                    self.start(slot).await;
                }
            }
            7 => {
                for _ in 0..=self.rng.below(3) {
                    self.create();
                }
            }
            8 => {
                let name = format!("cm-{:03}", self.rng.below(self.objects as u64));
                let _ = self.server.delete(&cms(), Some(NS), &name);
            }
            9 => {
                self.foreign_label();
            }
            _ => self.churn(),
        }
    }

    /// Changes up to 5 random objects (their reconciles run, some for seconds).
    pub(crate) fn churn(&mut self) {
        for _ in 0..=self.rng.below(5) {
            let name = format!("cm-{:03}", self.rng.below(self.objects as u64));
            let patch = json!({"data": {"n": self.rng.next().to_string()}});
            let _ = self.server.patch(&cms(), Some(NS), &name, patch);
        }
    }

    /// Someone else rewrites the shard label of an object a replica is reconciling right
    /// now, as `kubectl label --overwrite`, a GitOps tool or a re-applied manifest would: to
    /// another live shard (most often), away, empty, or to a dead shard's name. `false`
    /// when nothing is being reconciled.
    pub(crate) fn foreign_label(&mut self) -> bool {
        let running: Vec<(String, usize)> = {
            let ledger = self.ledger.lock();
            ledger
                .running
                .iter()
                .map(|(k, l)| (k.clone(), *l))
                .collect()
        };
        if running.is_empty() {
            return false;
        }
        let (key, life) = running[self.rng.below(running.len() as u64) as usize].clone();
        let holder = self.lives[life].shard.clone();
        let others: Vec<String> = self
            .slots
            .iter()
            .flatten()
            .map(|&id| self.lives[id].shard.clone())
            .filter(|s| *s != holder)
            .collect();
        let label = match self.rng.below(6) {
            0 => Value::Null,
            1 => json!(""),
            2 => json!("s9"),
            _ if others.is_empty() => json!("s9"),
            _ => json!(others[self.rng.below(others.len() as u64) as usize]),
        };
        trace(format_args!(
            "someone labels {key} (held by {holder}) {label}"
        ));
        let patch = json!({"metadata": {"labels": {shard_label(RING): label}}});
        self.server.patch(&cms(), Some(NS), &key, patch).is_ok()
    }

    fn heal(&mut self, id: usize) {
        let life = &mut self.lives[id];
        if life.link.state.swap(UP, Ordering::SeqCst) != UP
            && let Some(cut) = life.cuts.last_mut()
        {
            cut.1 = Some(Instant::now());
        }
    }

    /// Heals every link and fills 2 to 4 slots.
    pub(crate) async fn heal_all(&mut self) {
        for id in 0..self.lives.len() {
            self.heal(id);
        }
        let wanted = 2 + self.rng.below(3) as usize;
        let mut running = self.slots.iter().flatten().count();
        for slot in 0..SLOTS {
            if running < wanted && self.slots[slot].is_none() {
                self.start(slot).await;
                running += 1;
            }
        }
    }

    /// The shard label of every ConfigMap (`<shard>+drain` while drained), and of every
    /// Secret with its owner's name.
    fn labels(&self) -> Placement {
        // Read at a resourceVersion the objects are still at: the same answer.
        let at = self.server.resource_version();
        if let Some((read_at, placement)) = &self.read.borrow().labels
            && *read_at == at
        {
            return placement.clone();
        }
        let placement = self.read_labels();
        self.read.borrow_mut().labels = Some((at, placement.clone()));
        placement
    }

    fn read_labels(&self) -> Placement {
        let (label, drain) = (shard_label(RING), drain_label(RING));
        let shard_of = |object: &Value| {
            let labels = &object["metadata"]["labels"];
            let mut shard = labels[&label].as_str().unwrap_or_default().to_owned();
            if labels.get(&drain).is_some() {
                shard += "+drain";
            }
            shard
        };
        let name = |object: &Value| object["metadata"]["name"].as_str().unwrap().to_owned();
        let primaries = self.server.list(&cms()).unwrap();
        let children = self.server.list(&secrets()).unwrap();
        (
            primaries
                .iter()
                .map(|cm| (name(cm), shard_of(cm)))
                .collect(),
            children
                .iter()
                .map(|s| {
                    let owner = s["metadata"]["ownerReferences"][0]["name"].as_str();
                    (name(s), (owner.unwrap().to_owned(), shard_of(s)))
                })
                .collect(),
        )
    }

    /// Waits until the running replicas hold every object, children with their owners,
    /// each cache exactly its shard, and each object last reconciled on its shard; returns
    /// the placement. Restarts nothing: the slots that run are the replicas.
    pub(crate) async fn settle(&mut self, what: &str) -> BTreeMap<String, String> {
        // A dead shard's Lease expires, the sharder sees it within a round, drains take a
        // round to be acknowledged and one to complete, and the newcomer reconciles.
        let bound = self.timing.lease * 2 + self.timing.period * 8 + Duration::from_secs(10);
        let deadline = Instant::now() + bound;
        loop {
            self.reap().await;
            let not_yet = match self.settled() {
                Ok(placed) => return placed,
                Err(not_yet) => not_yet,
            };
            assert!(
                Instant::now() < deadline,
                "seed {}: never settled ({what}) within {bound:?}: {not_yet}; slots {:?}",
                self.seed,
                self.slots,
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The placement once settled, or what is not yet.
    fn settled(&self) -> Result<BTreeMap<String, String>, String> {
        let live: Vec<&Life> = self
            .slots
            .iter()
            .flatten()
            .map(|&id| &self.lives[id])
            .collect();
        if let Some(life) = live
            .iter()
            .find(|l| !l.elector.as_ref().is_some_and(LeaderElector::is_leading))
        {
            return Err(format!("{} does not hold its shard", life.shard));
        }
        let shards: BTreeSet<&str> = live.iter().map(|l| l.shard.as_str()).collect();
        let (labels, children) = self.labels();
        // Where the ring of the live shards puts each object (a child: its owner, whether
        // or not the owner still exists): nothing else is settled.
        let shards: Vec<String> = shards.iter().map(|s| (*s).to_owned()).collect();
        if self
            .read
            .borrow()
            .ring
            .as_ref()
            .is_none_or(|(of, _)| *of != shards)
        {
            self.read.borrow_mut().ring = Some((shards.clone(), Ring::new(shards.iter())));
        }
        let memo = self.read.borrow();
        let ring = &memo.ring.as_ref().expect("just set").1;
        let placed = |owner: &str, shard: &str| {
            ring.shard_for(&format!("/ConfigMap/{NS}/{owner}")) == Some(shard)
        };
        if let Some((key, shard)) = labels.iter().find(|(k, s)| !placed(k, s)) {
            return Err(format!("{key} is on {shard:?}"));
        }
        if let Some((key, (_, shard))) = children.iter().find(|(_, (o, s))| !placed(o, s)) {
            return Err(format!("{key} is on {shard:?}"));
        }
        {
            let ledger = self.ledger.lock();
            if let Some((key, shard)) = labels.iter().find(|(k, s)| ledger.last.get(*k) != Some(s))
            {
                return Err(format!(
                    "{key} was last reconciled by {:?}, not {shard}",
                    ledger.last.get(key)
                ));
            }
        }
        for life in &live {
            let selectors = || shard_selectors(RING, &life.shard);
            let keys = |keys: Vec<kube_informer::ObjectKey>| -> BTreeSet<String> {
                keys.into_iter().map(|k| k.name().to_owned()).collect()
            };
            let mine: BTreeSet<String> = labels
                .iter()
                .filter(|(_, s)| **s == life.shard)
                .map(|(k, _)| k.clone())
                .collect();
            let primaries = keys(
                life.factory
                    .informer_with::<ConfigMap>(InformerSpec::new().selectors(selectors()))
                    .store()
                    .list_keys(),
            );
            let cached_children = keys(
                life.factory
                    .informer_with::<Secret>(InformerSpec::new().selectors(selectors()))
                    .store()
                    .list_keys(),
            );
            if primaries != mine {
                return Err(format!(
                    "{}'s cache holds {primaries:?}, not {mine:?}",
                    life.shard
                ));
            }
            let my_children: BTreeSet<String> = children
                .iter()
                .filter(|(_, (_, s))| *s == life.shard)
                .map(|(k, _)| k.clone())
                .collect();
            if cached_children != my_children {
                return Err(format!(
                    "{}'s cache holds the children {cached_children:?}, not {my_children:?}",
                    life.shard
                ));
            }
        }
        Ok(labels)
    }

    /// Forgets who reconciled what last and changes every object: each must then be
    /// reconciled again, on its shard.
    pub(crate) fn touch_all(&mut self) {
        self.ledger.lock().last.clear();
        for (name, _) in self.labels().0 {
            let patch = json!({"data": {"touched": "yes"}});
            self.server.patch(&cms(), Some(NS), &name, patch).unwrap();
        }
    }

    pub(crate) async fn kill_all(&mut self) {
        for id in 0..self.lives.len() {
            self.kill(id).await;
        }
    }

    /// The safety verdicts over the whole schedule (see the test's docs).
    pub(crate) fn check(&self) {
        let seed = self.seed;
        let ledger = self.ledger.lock();
        assert!(
            ledger.overlaps.is_empty(),
            "seed {seed}: reconciled twice at once: {:?}",
            ledger.overlaps
        );
        for (id, life) in self.lives.iter().enumerate() {
            let mine = || ledger.spans.iter().filter(move |s| s.life == id);
            if let Some(end) = life.killed.or(life.returned) {
                for span in mine() {
                    assert!(
                        span.end <= end,
                        "seed {seed}: life {id}'s reconcile of {} outlived it: {span:?}",
                        span.key
                    );
                }
            }
            for &(from, to) in &life.cuts {
                // Cut off longer than the renew deadline: nothing runs from then to the heal.
                let blind = from + self.timing.renew + TOLERANCE;
                if to.is_some_and(|to| to <= blind) {
                    continue;
                }
                for span in mine() {
                    let during = span.end > blind && to.is_none_or(|to| span.start < to);
                    assert!(
                        !during,
                        "seed {seed}: life {id} cut off at {from:?} still reconciled: {span:?}"
                    );
                }
            }
        }
    }
}
