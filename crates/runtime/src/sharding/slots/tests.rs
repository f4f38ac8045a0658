//! The slot protocol: the plan's properties, and random schedules of replicas joining,
//! killed, stopped and partitioned (failing, hanging, losing answers) on a paused clock,
//! with a ledger that fails the moment two replicas serve one slot.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc,
        atomic::{AtomicU8, AtomicU64, Ordering::SeqCst},
    },
    time::Duration,
};

use futures_util::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::{table::SlotTable, *};
use crate::{
    leader_election::{LeaderElectionConfig, LeaderElector},
    lease::{LeaseStore, MemoryLeases},
    sharding::{LiveShards, shard_lease},
};

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("r{i}")).collect()
}

fn counts(table: &SlotTable, live: &[String]) -> Vec<usize> {
    live.iter().map(|r| table.held_by(r).len()).collect()
}

/// Applies every planned move, as the holders would.
fn settle(mut table: SlotTable, live: &[String]) -> SlotTable {
    for replica in live {
        let leaving = table.leaving(replica);
        table.hand_over(replica, leaving);
    }
    table
}

#[test]
fn a_plan_gives_every_slot_and_balances_within_one() {
    for n in 1..=9 {
        let live = names(n);
        let table = SlotTable::default().plan(&live);
        assert!(
            table.settled(),
            "{n}: nobody served anything, so nothing moves"
        );
        let counts = counts(&table, &live);
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(max - min <= 1, "{n} replicas: {counts:?}");
        assert_eq!(
            table.plan(&live),
            table,
            "{n}: planning again changes nothing"
        );
    }
}

#[test]
fn a_joining_replica_takes_only_its_share_and_only_for_itself() {
    let three = names(3);
    let before = SlotTable::default().plan(&three);
    let four = names(4);
    let planned = before.plan(&four);
    // Nothing changes hands at once: slots are only marked to move.
    for slot in 0..SLOTS {
        assert_eq!(planned.holder(slot), before.holder(slot));
    }
    assert_eq!(planned.moving.len(), SLOTS / 4, "{:?}", planned.moving);
    assert!(planned.moving.values().all(|to| to == "r3"));
    let after = settle(planned, &four);
    assert!(after.settled());
    assert_eq!(counts(&after, &four), [16, 16, 16, 16]);
    assert_eq!(after.plan(&four), after);
}

#[test]
fn a_dead_replicas_slots_move_at_once_and_moves_towards_it_are_cancelled() {
    let three = names(3);
    let moving = SlotTable::default().plan(&three).plan(&names(4));
    let (r0_held, r3_incoming) = (moving.held_by("r0"), moving.moving.len());
    assert!(r3_incoming > 0);
    // r3 dies before anything was handed over, and r0 dies too.
    let live = vec!["r1".to_owned(), "r2".to_owned()];
    let planned = moving.plan(&live);
    assert!(planned.settled(), "{planned:?}");
    for slot in r0_held.iter() {
        assert!(matches!(planned.holder(slot), Some("r1" | "r2")));
    }
    assert_eq!(counts(&planned, &live), [32, 32]);
}

#[test]
fn slots_cover_the_hash_space_and_merge_into_ranges() {
    assert_eq!(slot_of(0), 0);
    assert_eq!(slot_of(u64::MAX), SLOTS - 1);
    for slot in [0, 1, 31, 63] {
        let range = slot_range(slot);
        assert_eq!(slot_of(range.start as u64), slot);
        assert_eq!(slot_of((range.end - 1) as u64), slot);
    }
    let set: SlotSet = [0, 1, 2, 5, 63].into_iter().collect();
    assert_eq!(set.ranges().len(), 3);
    let selector = set
        .selector(kube_informer::list_watch::ShardField::Uid)
        .unwrap();
    assert!(selector.contains_hash(0) && selector.contains_hash(u64::MAX));
    assert!(!selector.contains_hash(slot_range(3).start as u64));
    assert!(
        SlotSet::EMPTY
            .selector(kube_informer::list_watch::ShardField::Uid)
            .is_none()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_table_that_does_not_parse_is_an_error_not_an_empty_table() {
    let leases = Arc::new(MemoryLeases::default());
    let mut lease = Lease::default();
    lease.metadata.name = Some("web-slot-table".into());
    lease.metadata.annotations =
        Some([(super::table::ANNOTATION.to_owned(), "{".to_owned())].into());
    leases.create(&lease).await.unwrap();
    let tables = TableStore::new(leases, "web");
    let error = tables.read().await.err().expect("an error");
    assert!(error.to_string().contains("does not parse"), "{error}");
}

/// The race the check-in exists for: the coordinator read the table and saw a holder
/// dead; the holder comes back (its Lease retaken) and starts serving before the
/// coordinator writes. Its check-in changed the table, so the coordinator's plan, made
/// against the older version, is refused: the slots are never given to a second replica.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_holder_that_returns_while_the_coordinator_plans_is_never_given_away() {
    let leases = Arc::new(MemoryLeases::default());
    let tables = TableStore::new(leases.clone(), RING);
    let two = names(2);
    let first = tables.read().await.unwrap();
    tables
        .write(&first, &SlotTable::default().plan(&two))
        .await
        .unwrap();
    let coordinator = tables.read().await.unwrap();
    let without_r0 = coordinator.table.plan(&two[1..]);
    assert!(without_r0.held_by("r0").is_empty());

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let recorder = Recorder {
        replica: "r0".into(),
        ledger: ledger.clone(),
        seed: AtomicU64::new(1),
    };
    let serving = serve_slots(&tables, "r0", &recorder, PERIOD);
    let came_back = async {
        while ledger.lock().serving.is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let refused = tables.write(&coordinator, &without_r0).await;
        assert!(refused.is_err(), "r0 serves, and its slots were given away");
    };
    tokio::select! {
        () = serving => unreachable!("serves until dropped"),
        () = came_back => {}
    }
    assert_eq!(
        tables.read().await.unwrap().table.held_by("r0").len(),
        SLOTS / 2
    );
}

// --- Random schedules ---------------------------------------------------------------

const RING: &str = "web";
const PERIOD: Duration = Duration::from_secs(1);

/// A deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A replica's link to the Leases: connected, failing at once, hanging, or losing the
/// answers of writes that landed.
struct Link {
    inner: Arc<MemoryLeases>,
    mode: AtomicU8,
    /// Each request takes up to 400 ms, so that rounds overlap.
    latency: AtomicU64,
}

const OK: u8 = 0;
const FAILING: u8 = 1;
const HANGING: u8 = 2;
const LOSING: u8 = 3;

impl Link {
    async fn pass<T>(
        &self,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        let cut = || kube::Error::Service("partitioned (a test's link)".into());
        let delay = Rng(self.latency.fetch_add(1, SeqCst)).below(400);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        match self.mode.load(SeqCst) {
            FAILING => Err(cut()),
            HANGING => std::future::pending().await,
            LOSING => {
                let _landed = call.await;
                Err(cut())
            }
            _ => call.await,
        }
    }
}

impl LeaseStore for Link {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>> {
        Box::pin(self.pass(self.inner.get(name)))
    }

    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(self.pass(self.inner.create(lease)))
    }

    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(self.pass(self.inner.replace(name, lease)))
    }

    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>> {
        Box::pin(self.pass(self.inner.list(label, value)))
    }
}

/// Who serves each slot now, and every time two did.
#[derive(Default)]
struct Ledger {
    serving: BTreeMap<usize, String>,
    overlaps: Vec<String>,
    trace: bool,
}

/// A replica's serving, recorded in the ledger. Narrowing takes a random while (reconciles
/// in flight finishing); halting is at once, and so is being dropped (a kill).
struct Recorder {
    replica: String,
    ledger: Arc<Mutex<Ledger>>,
    seed: AtomicU64,
}

impl Recorder {
    fn stop(&self, slots: Option<SlotSet>) {
        let mut ledger = self.ledger.lock();
        ledger
            .serving
            .retain(|slot, by| *by != self.replica || slots.is_some_and(|s| !s.contains(*slot)));
    }
}

impl SlotServer for Recorder {
    fn widen(&self, slots: SlotSet) -> BoxFuture<'_, ()> {
        let mut ledger = self.ledger.lock();
        for slot in slots.iter() {
            if let Some(other) = ledger.serving.get(&slot).filter(|o| **o != self.replica) {
                let overlap = format!(
                    "slot {slot}: {} widened while {other} serves it",
                    self.replica
                );
                ledger.overlaps.push(overlap);
            }
            ledger.serving.insert(slot, self.replica.clone());
        }
        if ledger.trace {
            eprintln!(
                "{:?} {} widens {:?}",
                tokio::time::Instant::now(),
                self.replica,
                slots.iter().collect::<Vec<_>>()
            );
        }
        Box::pin(async {})
    }

    fn narrow(&self, slots: SlotSet) -> BoxFuture<'_, ()> {
        let wait = Rng(self.seed.fetch_add(1, SeqCst)).below(3000);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(wait)).await;
            self.stop(Some(slots));
        })
    }

    fn halt(&self) {
        self.stop(None);
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop(None);
    }
}

/// One replica: its shard Lease, the coordinator's election, and the slots served while it
/// holds its Lease; `stop` halts it, then gives its Leases up.
async fn replica(
    name: String,
    link: Arc<Link>,
    ledger: Arc<Mutex<Ledger>>,
    seed: u64,
    stop: CancellationToken,
) {
    let shard = LeaderElector::new(link.clone(), shard_lease(RING, &name)).unwrap();
    let sharder_config =
        LeaderElectionConfig::new(format!("{RING}-sharder")).identity(name.clone());
    let sharder = LeaderElector::new(link.clone(), sharder_config).unwrap();
    let tables = TableStore::new(link.clone(), RING);
    let live = LiveShards::new(link.clone(), RING);
    let recorder = Recorder {
        replica: name.clone(),
        ledger,
        seed: AtomicU64::new(seed),
    };
    let serving = async {
        let mut leading = shard.leading();
        loop {
            if leading.wait_for(|l| *l).await.is_err() {
                return;
            }
            tokio::select! {
                () = serve_slots(&tables, &name, &recorder, PERIOD) => {}
                _ = leading.wait_for(|l| !*l) => {}
            }
            recorder.halt();
        }
    };
    let coordinating = async {
        let mut leading = sharder.leading();
        loop {
            if leading.wait_for(|l| *l).await.is_err() {
                return;
            }
            let rounds = async {
                loop {
                    let _ = coordinate_once(&tables, &live).await;
                    tokio::time::sleep(PERIOD).await;
                }
            };
            tokio::select! {
                () = rounds => {}
                _ = leading.wait_for(|l| !*l) => {}
            }
        }
    };
    let elections = CancellationToken::new();
    let run = async {
        tokio::select! {
            () = serving => {}
            () = coordinating => {}
            () = stop.cancelled() => {}
        }
        // Halted before the Leases are given up: no one may count it gone while it serves.
        recorder.halt();
        elections.cancel();
    };
    tokio::join!(
        shard.run(elections.clone()),
        sharder.run(elections.clone()),
        run
    );
}

struct Running {
    link: Arc<Link>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn schedule(seed: u64) {
    let mut rng = Rng(seed);
    let trace = std::env::var("SCHEDULE_TRACE").is_ok();
    let leases = Arc::new(MemoryLeases::default());
    let ledger = Arc::new(Mutex::new(Ledger {
        trace,
        ..Ledger::default()
    }));
    let mut running: BTreeMap<String, Running> = BTreeMap::new();
    let mut born = 0;
    let start = |running: &mut BTreeMap<String, Running>, name: String, rng: &mut Rng| {
        let link = Arc::new(Link {
            inner: leases.clone(),
            mode: AtomicU8::new(OK),
            latency: AtomicU64::new(rng.next()),
        });
        let stop = CancellationToken::new();
        let task = tokio::spawn(replica(
            name.clone(),
            link.clone(),
            ledger.clone(),
            rng.next(),
            stop.clone(),
        ));
        running.insert(name, Running { link, stop, task });
    };
    for _ in 0..3 {
        start(&mut running, format!("r{born}"), &mut rng);
        born += 1;
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    for _ in 0..30 {
        let pick = |running: &BTreeMap<String, Running>, rng: &mut Rng| {
            let names: Vec<String> = running.keys().cloned().collect();
            names[rng.below(names.len() as u64) as usize].clone()
        };
        let step = rng.below(7);
        match step {
            0 if running.len() < 5 => {
                start(&mut running, format!("r{born}"), &mut rng);
                born += 1;
            }
            1 if running.len() > 1 => {
                let name = pick(&running, &mut rng);
                let gone = running.remove(&name).unwrap();
                gone.task.abort();
                let _ = gone.task.await;
                if rng.below(2) == 0 {
                    // Back under the same name (a StatefulSet's pod).
                    start(&mut running, name, &mut rng);
                }
            }
            2 if running.len() > 1 => {
                let name = pick(&running, &mut rng);
                let gone = running.remove(&name).unwrap();
                gone.stop.cancel();
                // Its Lease release may hang on a partitioned link: a process would exit.
                let mut task = gone.task;
                if tokio::time::timeout(Duration::from_secs(30), &mut task)
                    .await
                    .is_err()
                {
                    task.abort();
                }
            }
            3..=5 => {
                let name = pick(&running, &mut rng);
                let mode = [FAILING, HANGING, LOSING][step as usize - 3];
                running[&name].link.mode.store(mode, SeqCst);
            }
            _ => {
                let name = pick(&running, &mut rng);
                running[&name].link.mode.store(OK, SeqCst);
            }
        }
        if trace {
            eprintln!(
                "{:?} step {step}: {:?}",
                tokio::time::Instant::now(),
                running.keys().collect::<Vec<_>>()
            );
        }
        tokio::time::sleep(Duration::from_millis(rng.below(15_000))).await;
    }
    for replica in running.values() {
        replica.link.mode.store(OK, SeqCst);
    }
    tokio::time::sleep(Duration::from_secs(90)).await;

    let overlaps = ledger.lock().overlaps.clone();
    assert!(overlaps.is_empty(), "seed {seed}: {overlaps:?}");
    let table = TableStore::new(leases.clone(), RING)
        .read()
        .await
        .unwrap()
        .table;
    let live: Vec<String> = running.keys().cloned().collect();
    assert!(table.settled(), "seed {seed}: {table:?}");
    let held: BTreeSet<&str> = (0..SLOTS).filter_map(|s| table.holder(s)).collect();
    assert!(
        held.iter().all(|h| running.contains_key(*h)),
        "seed {seed}: {held:?} vs {live:?}"
    );
    let counts = counts(&table, &live);
    assert!(
        counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
        "seed {seed}: {counts:?}"
    );
    let serving = ledger.lock().serving.clone();
    for slot in 0..SLOTS {
        assert_eq!(
            serving.get(&slot).map(String::as_str),
            table.holder(slot),
            "seed {seed}: slot {slot}"
        );
    }
    for (_, replica) in running {
        replica.stop.cancel();
        replica.task.await.unwrap();
    }
    assert!(
        ledger.lock().serving.is_empty(),
        "seed {seed}: stopped replicas serve nothing"
    );
}

fn paused(seeds: std::ops::Range<u64>) {
    let only = std::env::var("SCHEDULE_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok());
    for seed in seeds.filter(|s| only.is_none_or(|o| o == *s)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(schedule(seed));
    }
}

#[test]
fn random_schedules_never_serve_one_slot_twice_1_to_50() {
    paused(1..51);
}

#[test]
fn random_schedules_never_serve_one_slot_twice_51_to_100() {
    paused(51..101);
}
