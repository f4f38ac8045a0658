//! A seeded model of the fair queue: 400 random schedules of adds at both priorities,
//! re-adds while held, delayed and rate-limited requeues on a paused clock, hand-outs,
//! dones, and a shutdown that drains. After every step the queue is held against a naive
//! model of what is queued, in which lane, and what is held, and every hand-out is checked:
//!
//! - **exclusive**: never an item already held; never more than the cap of one group held;
//! - **stingy**: the queue's length is the model's (one entry per item, as client-go's);
//! - **live**: when the model has an item a worker may take, `get` hands one out at once;
//! - **prioritized**: never a low-lane item while a group below its cap has a live one;
//! - **fair**: while a group waits in a lane (items queued, below its cap), no other group is
//!   handed two items of that lane;
//! - **lossless**: after shutdown, exactly the items the model holds queued come out.

use std::{
    borrow::Cow,
    collections::{BTreeMap, BTreeSet, HashMap},
};

use futures_util::FutureExt;
use tokio::time::Instant;

use super::*;

type Item = (u8, u8);
const GROUPS: [&str; 4] = ["g0", "g1", "g2", "g3"];
const FRONT: u8 = 0;
const LOW: u8 = 1;
const RETRY: Duration = Duration::from_millis(5);

/// Every failure waits the same 5 ms (the model knows when it comes back).
struct Fixed;

impl RateLimiter<Item> for Fixed {
    fn when(&self, _: &Item) -> Duration {
        RETRY
    }
    fn forget(&self, _: &Item) {}
    fn num_requeues(&self, _: &Item) -> u32 {
        0
    }
}

#[derive(Default)]
struct Model {
    /// Queued items and their lane.
    queued: HashMap<Item, u8>,
    /// Held items, and the lane each comes back to when done (added again while held).
    held: HashMap<Item, Option<u8>>,
    /// Items waiting for a delay: when they are added (the earliest wins, as `add_after`).
    delayed: HashMap<Item, Instant>,
    /// Per (group, lane): the groups served in that lane since the group began to wait.
    served_while_waiting: HashMap<(u8, u8), BTreeSet<u8>>,
    cap: Option<usize>,
}

impl Model {
    fn add(&mut self, item: Item, lane: u8) {
        if let Some(later) = self.held.get_mut(&item) {
            match (*later, lane) {
                (None, _) => *later = Some(lane),
                (Some(LOW), FRONT) => *later = Some(FRONT),
                _ => {}
            }
        } else {
            let queued = self.queued.entry(item).or_insert(lane);
            if lane == FRONT {
                *queued = FRONT; // promoted, or already in front
            }
        }
    }

    fn in_flight(&self, group: u8) -> usize {
        self.held.keys().filter(|(g, _)| *g == group).count()
    }

    fn below_cap(&self, group: u8) -> bool {
        self.cap.is_none_or(|cap| self.in_flight(group) < cap)
    }

    /// The groups waiting in `lane`: items queued there, below the cap.
    fn waiting(&self, lane: u8) -> BTreeSet<u8> {
        let queued = self.queued.iter().filter(|(_, l)| **l == lane);
        let groups = queued.map(|((g, _), _)| *g).collect::<BTreeSet<_>>();
        groups.into_iter().filter(|g| self.below_cap(*g)).collect()
    }

    /// Forgets the turns of groups that stopped waiting.
    fn settle(&mut self) {
        for lane in [FRONT, LOW] {
            let waiting = self.waiting(lane);
            self.served_while_waiting
                .retain(|(g, l), _| *l != lane || waiting.contains(g));
            for g in waiting {
                self.served_while_waiting.entry((g, lane)).or_default();
            }
        }
    }

    /// Checks a hand-out of `item` against the model, then applies it.
    fn hand_out(&mut self, seed: u64, item: Item) {
        let (group, _) = item;
        assert!(
            !self.held.contains_key(&item),
            "seed {seed}: {item:?} held twice"
        );
        assert!(
            self.below_cap(group),
            "seed {seed}: group {group} past its cap"
        );
        let lane = self.queued.remove(&item);
        let lane = lane.unwrap_or_else(|| panic!("seed {seed}: {item:?} was not queued"));
        if lane == LOW {
            let live = self.waiting(FRONT);
            assert!(
                live.is_empty(),
                "seed {seed}: backlog before live items of {live:?}"
            );
        }
        for ((waiter, l), served) in &mut self.served_while_waiting {
            if *l == lane && *waiter != group {
                assert!(
                    served.insert(group),
                    "seed {seed}: group {group} served twice in lane {lane} while group \
                     {waiter} waited"
                );
            }
        }
        self.served_while_waiting.remove(&(group, lane));
        self.held.insert(item, None);
    }

    fn done(&mut self, item: Item) {
        if let Some(Some(lane)) = self.held.remove(&item) {
            self.queued.insert(item, lane);
        }
    }

    /// Applies the delayed adds due by `now`.
    fn fire(&mut self, now: Instant) {
        let due: Vec<Item> = (self.delayed.iter())
            .filter(|(_, at)| **at <= now)
            .map(|(item, _)| *item)
            .collect();
        for item in due {
            self.delayed.remove(&item);
            self.add(item, FRONT);
        }
    }

    fn delay(&mut self, item: Item, at: Instant) {
        let earliest = self.delayed.entry(item).or_insert(at);
        *earliest = (*earliest).min(at);
    }
}

#[tokio::test(start_paused = true)]
async fn random_schedules_keep_every_guarantee_of_the_fair_queue() {
    for seed in 1..=400u64 {
        let mut next = seeded(seed);
        let cap = [None, Some(1), Some(2)][(next() % 3) as usize];
        let config = QueueConfig::default()
            .rate_limiter(Fixed)
            .fair_by(|(g, _): &Item| Cow::Borrowed(GROUPS[usize::from(*g)]))
            .max_in_flight_per_group(cap);
        let q: RateLimitingQueue<Item> = RateLimitingQueue::new(config);
        let mut model = Model {
            cap,
            ..Model::default()
        };
        let mut held: BTreeMap<Item, WorkItem<Item>> = BTreeMap::new();
        for _ in 0..400 {
            let item = ((next() % 4) as u8, (next() % 5) as u8);
            match next() % 10 {
                0..=2 => {
                    q.add(item);
                    model.add(item, FRONT);
                }
                3 => {
                    q.add_low_priority(item);
                    model.add(item, LOW);
                }
                4..=6 => {
                    let available =
                        !model.waiting(FRONT).is_empty() || !model.waiting(LOW).is_empty();
                    match q.get().now_or_never() {
                        Some(Some(got)) => {
                            model.hand_out(seed, *got);
                            held.insert(*got, got);
                        }
                        Some(None) => panic!("seed {seed}: None before shutdown"),
                        None => assert!(!available, "seed {seed}: an item waits, get did not"),
                    }
                }
                7 | 8 => {
                    let Some(&key) = held.keys().nth(next() as usize % held.len().max(1)) else {
                        continue;
                    };
                    let work = held.remove(&key).expect("held");
                    match next() % 3 {
                        0 => work.done(),
                        1 => {
                            work.requeue_rate_limited();
                            model.delay(key, Instant::now() + RETRY);
                        }
                        _ => {
                            let after = Duration::from_millis(1 + next() % 9);
                            work.requeue_after(after);
                            model.delay(key, Instant::now() + after);
                        }
                    }
                    model.done(key);
                }
                _ => {
                    tokio::time::advance(Duration::from_millis(1 + next() % 6)).await;
                    model.fire(Instant::now());
                    // Let the queue's timer task add what is due.
                    for _ in 0..20 {
                        if q.waiting() == model.delayed.len() {
                            break;
                        }
                        tokio::task::yield_now().await;
                    }
                    assert_eq!(q.waiting(), model.delayed.len(), "seed {seed}: delayed");
                }
            }
            model.settle();
            assert_eq!(q.len(), model.queued.len(), "seed {seed}: queued items");
        }
        // Shutdown: delays are dropped, adds ignored, what is queued still comes out.
        q.shut_down();
        q.add((0, 9));
        model.delayed.clear();
        let mut rest = Vec::new();
        loop {
            match q.get().now_or_never() {
                Some(Some(got)) => {
                    model.hand_out(seed, *got);
                    rest.push(*got);
                    model.done(*got);
                    drop(got);
                }
                Some(None) => break,
                None => {
                    // Capped groups wait for their held items: let them go.
                    let (&key, _) = held.iter().next().unwrap_or_else(|| {
                        panic!(
                            "seed {seed}: get waits with nothing held: {:?}",
                            model.queued
                        )
                    });
                    held.remove(&key);
                    model.done(key);
                }
            }
            model.settle();
        }
        assert!(
            model.queued.is_empty(),
            "seed {seed}: lost {:?}",
            model.queued
        );
        assert!(
            rest.iter().all(|item| *item != (0, 9)),
            "seed {seed}: added after shutdown"
        );
    }
}
