//! The queued items: two lanes (live changes, then work that can wait), each split into
//! fairness groups served round-robin, with an optional cap on each group's items in flight.
//!
//! This is deficit round-robin with a quantum of one item: a group with work in a lane waits
//! in that lane's ring; the group at the front of the ring gives one item and goes to the
//! back if it has more. So while a group waits, no other group of its lane is served twice.
//! A group at its in-flight cap leaves the rings until one of its items is done.

use std::{borrow::Cow, collections::VecDeque, sync::Arc};

use tokio::time::Instant;

use super::QueueItem;

type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type Set<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

/// Names the fairness group of an item (see [`QueueConfig::fair_by`](super::QueueConfig::fair_by)).
pub(super) type GroupFn<T> = Arc<dyn for<'a> Fn(&'a T) -> Cow<'a, str> + Send + Sync>;

/// The front lane (live changes) and the low lane (work that can wait).
pub(super) const FRONT: usize = 0;
pub(super) const LOW: usize = 1;

/// A group's index in [`Lines::groups`]: stable while the group has items queued or held.
pub(super) type GroupId = usize;

pub(super) struct Lines<T> {
    /// The groups by id; `None` is a free slot.
    groups: Vec<Option<Group<T>>>,
    free: Vec<GroupId>,
    ids: Map<Box<str>, GroupId>,
    /// Per lane, the groups that may have an item to give, in turn order.
    rings: [VecDeque<GroupId>; 2],
    /// The items waiting in the low lane. An entry of the low lane whose item is not here
    /// was promoted or handed out: it is skipped.
    low_set: Set<T>,
    /// Items queued (each once), over both lanes.
    len: usize,
    group_of: Option<GroupFn<T>>,
    /// At most this many items of one group held by workers at once.
    limit: Option<usize>,
    /// Whether entries carry the time they were queued (for waits: metrics, scaling).
    timed: bool,
    /// How many groups have nothing queued or held (kept for reuse, up to [`IDLE_GROUPS`]).
    idle: usize,
}

/// Idle groups kept before they are swept: a namespace that comes and goes one key at a
/// time keeps its group instead of making it again on every add.
const IDLE_GROUPS: usize = 1024;

struct Group<T> {
    name: Box<str>,
    lanes: [VecDeque<T>; 2],
    /// When each entry of `lanes` was queued, in step with it, when the queue is timed
    /// (apart, so an untimed queue's entries stay as small as its items).
    stamps: [VecDeque<Instant>; 2],
    in_ring: [bool; 2],
    in_flight: usize,
    /// Nothing queued, held or ringed: counted in [`Lines::idle`].
    idle: bool,
}

/// One group's state at a scrape (for the per-group metrics).
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GroupStats {
    pub(super) name: String,
    pub(super) depth: usize,
    pub(super) in_flight: usize,
    /// How long the group's oldest queued item has waited (when timed).
    pub(super) longest_wait: Option<std::time::Duration>,
}

impl<T: QueueItem> Lines<T> {
    pub(super) fn new(group_of: Option<GroupFn<T>>, limit: Option<usize>, timed: bool) -> Self {
        let mut lines = Self {
            groups: Vec::new(),
            free: Vec::new(),
            ids: Map::default(),
            rings: [VecDeque::new(), VecDeque::new()],
            low_set: Set::default(),
            len: 0,
            group_of,
            limit: limit.map(|l| l.max(1)),
            timed,
            idle: 0,
        };
        // Without a group function every item is in group 0, made here and kept.
        if lines.group_of.is_none() {
            lines.make_group("".into());
        }
        lines
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn low_len(&self) -> usize {
        self.low_set.len()
    }

    /// From now on entries carry the time they were queued; those queued before count as
    /// queued `now` (so every entry has its time, in step with its lane).
    pub(super) fn time_from(&mut self, now: Instant) {
        if std::mem::replace(&mut self.timed, true) {
            return;
        }
        for group in self.groups.iter_mut().flatten() {
            for lane in [FRONT, LOW] {
                let missing = group.lanes[lane].len() - group.stamps[lane].len();
                group.stamps[lane].extend(std::iter::repeat_n(now, missing));
            }
        }
    }

    /// Whether the queue splits its items into groups.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(super) fn is_fair(&self) -> bool {
        self.group_of.is_some()
    }

    /// The group `item` belongs to now, made if new.
    fn group(&mut self, item: &T) -> GroupId {
        let Some(group_of) = &self.group_of else {
            return 0;
        };
        // The caller's code, called under the queue's lock after the item was marked
        // dirty: a panic must not leave it dirty and unqueued (lost). It goes to the group
        // named "" instead, and the panic is logged.
        let name = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| group_of(item)));
        let name = name.unwrap_or_else(|panic| {
            tracing::error!(
                "a work queue's fairness group function panicked: {}; the item is queued in \
                 the group named \"\"",
                crate::util::panic_message(panic.as_ref())
            );
            Cow::Borrowed("")
        });
        let Some(&id) = self.ids.get(name.as_ref()) else {
            return self.make_group(name.into());
        };
        let group = self.slot(id);
        if std::mem::take(&mut group.idle) {
            self.idle -= 1;
        }
        id
    }

    /// A new, empty group named `name`, in a free slot if there is one.
    fn make_group(&mut self, name: Box<str>) -> GroupId {
        let group = Group {
            name: name.clone(),
            lanes: [VecDeque::new(), VecDeque::new()],
            stamps: [VecDeque::new(), VecDeque::new()],
            in_ring: [false; 2],
            in_flight: 0,
            idle: false,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.groups[id] = Some(group);
                id
            }
            None => {
                self.groups.push(Some(group));
                self.groups.len() - 1
            }
        };
        self.ids.insert(name, id);
        id
    }

    /// Queues `item` (not queued yet) in `lane` of its group.
    pub(super) fn push(&mut self, item: T, lane: usize) {
        let id = self.group(&item);
        if lane == LOW {
            self.low_set.insert(item.clone());
        }
        let timed = self.timed;
        self.len += 1;
        let limit = self.limit;
        let group = self.slot(id);
        group.lanes[lane].push_back(item);
        if timed {
            group.stamps[lane].push_back(Instant::now());
        }
        if !group.in_ring[lane] && !group.at(limit) {
            group.in_ring[lane] = true;
            self.rings[lane].push_back(id);
        }
    }

    /// Moves `item` from the low lane to the front lane; whether it was waiting there.
    pub(super) fn promote(&mut self, item: &T) -> bool {
        if self.low_set.is_empty() || !self.low_set.remove(item) {
            return false;
        }
        // Its old entry in the low lane is now stale and will be skipped.
        self.len -= 1;
        self.push(item.clone(), FRONT);
        true
    }

    /// The next item to hand out and its group: the front lane first, then the low lane;
    /// within a lane the group whose turn it is; never a group at its cap.
    pub(super) fn pop(&mut self) -> Option<(T, GroupId)> {
        for lane in [FRONT, LOW] {
            while let Some(id) = self.rings[lane].pop_front() {
                let limit = self.limit;
                let low_set = &mut self.low_set;
                let group = self.groups[id].as_mut().expect("a ringed group exists");
                group.in_ring[lane] = false;
                if group.at(limit) {
                    continue; // back in the ring when one of its items is done
                }
                let found = loop {
                    let Some(item) = group.lanes[lane].pop_front() else {
                        break None;
                    };
                    group.stamps[lane].pop_front();
                    if lane == FRONT || low_set.remove(&item) {
                        break Some(item);
                    }
                };
                let Some(item) = found else {
                    self.note_if_idle(id);
                    continue;
                };
                group.in_flight += 1;
                if !group.lanes[lane].is_empty() && !group.at(limit) {
                    group.in_ring[lane] = true;
                    self.rings[lane].push_back(id);
                }
                self.len -= 1;
                return Some((item, id));
            }
        }
        None
    }

    /// One of group `id`'s items is done: below its cap again, it takes its turns.
    /// Whether that gave it a turn it did not have (a worker may take one of its items).
    pub(super) fn done(&mut self, id: GroupId) -> bool {
        let limit = self.limit;
        let group = self.groups[id]
            .as_mut()
            .expect("a held item's group exists");
        group.in_flight -= 1;
        let mut ringed = false;
        if limit.is_some() {
            for lane in [FRONT, LOW] {
                if !group.in_ring[lane] && !group.lanes[lane].is_empty() {
                    group.in_ring[lane] = true;
                    self.rings[lane].push_back(id);
                    ringed = true;
                }
            }
        }
        self.note_if_idle(id);
        ringed
    }

    /// Whether a worker could be handed an item now (false also when nothing is queued).
    pub(super) fn may_pop(&self) -> bool {
        !self.rings[FRONT].is_empty() || !self.rings[LOW].is_empty()
    }

    /// How long the oldest item a worker could take has waited (when timed): the items of
    /// a group at its in-flight limit wait for that group's own reconciles, which more
    /// workers would not speed up.
    pub(super) fn longest_wait(&self, now: Instant) -> Option<std::time::Duration> {
        let groups = self.groups.iter().flatten();
        groups
            .filter(|g| !g.at(self.limit))
            .filter_map(|g| g.oldest(&self.low_set))
            .min()
            .map(|at| now - at)
    }

    /// How many queued items a worker could take (those of groups below their in-flight
    /// limit).
    pub(super) fn takeable(&self) -> usize {
        if self.limit.is_none() {
            return self.len;
        }
        let capped = self.groups.iter().flatten().filter(|g| g.at(self.limit));
        let parked: usize = capped.map(|g| g.depth(&self.low_set)).sum();
        self.len.saturating_sub(parked)
    }

    /// Each group with items queued or held, for the per-group metrics.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(super) fn stats(&self, now: Instant) -> Vec<GroupStats> {
        let groups = self.groups.iter().flatten();
        let stats = groups.map(|group| GroupStats {
            name: group.name.to_string(),
            depth: group.depth(&self.low_set),
            in_flight: group.in_flight,
            longest_wait: group.oldest(&self.low_set).map(|at| now - at),
        });
        stats.filter(|s| s.depth > 0 || s.in_flight > 0).collect()
    }

    #[cfg(test)]
    pub(super) fn group_count(&self) -> usize {
        self.groups.iter().flatten().count()
    }

    fn slot(&mut self, id: GroupId) -> &mut Group<T> {
        self.groups[id].as_mut().expect("a group in use exists")
    }

    /// Counts group `id` idle once it has nothing queued, held or ringed; past
    /// [`IDLE_GROUPS`] idle groups, frees them all (the one group of an unfair queue stays).
    fn note_if_idle(&mut self, id: GroupId) {
        if self.group_of.is_none() {
            return;
        }
        let group = self.slot(id);
        if group.idle || !group.unused() {
            return;
        }
        group.idle = true;
        self.idle += 1;
        if self.idle <= IDLE_GROUPS {
            return;
        }
        for id in 0..self.groups.len() {
            if self.groups[id].as_ref().is_some_and(|g| g.idle) {
                let group = self.groups[id].take().expect("checked");
                self.ids.remove(&group.name);
                self.free.push(id);
                self.idle -= 1;
            }
        }
    }
}

impl<T: QueueItem> Group<T> {
    fn unused(&self) -> bool {
        self.in_flight == 0
            && self.lanes.iter().all(VecDeque::is_empty)
            && !self.in_ring.iter().any(|&r| r)
    }

    fn at(&self, limit: Option<usize>) -> bool {
        limit.is_some_and(|limit| self.in_flight >= limit)
    }

    /// The items it has queued (stale low-lane entries not counted).
    fn depth(&self, low_set: &Set<T>) -> usize {
        let low = self.lanes[LOW].iter();
        self.lanes[FRONT].len() + low.filter(|item| low_set.contains(item)).count()
    }

    /// When its oldest live entry at the head of a lane was queued (when timed).
    fn oldest(&self, low_set: &Set<T>) -> Option<Instant> {
        let front = self.stamps[FRONT].front().copied();
        let mut low = self.lanes[LOW].iter().zip(&self.stamps[LOW]);
        let low = low
            .find(|(item, _)| low_set.contains(item))
            .map(|(_, at)| *at);
        front.into_iter().chain(low).min()
    }
}
