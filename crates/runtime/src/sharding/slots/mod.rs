//! Range sharding's handover protocol (issue #57): the hash space of KEP-5866's
//! `shardSelector` cut into [`SLOTS`] equal slots, each held by one replica at a time, moved
//! between replicas without two ever serving one slot at once — and without writing to any
//! sharded object: the only object written is the ring's slot table, a Lease of its own.
//!
//! # The table
//!
//! The Lease `<ring>-slot-table` keeps, in one annotation, each slot's **holder** (the
//! replica that may serve it) and, while it moves, its **next** holder, with each replica's
//! check-in count. Every write to it is a compare-and-swap on its resourceVersion.
//!
//! - The **coordinator** (the replica elected on `<ring>-slot-coordinator`) reads the table, *then*
//!   reads the shard Leases ([`LiveShards`](super::LiveShards)), then writes its plan
//!   ([`SlotTable::plan`]) against the version it read: a dead holder's slots get a live
//!   holder at once; a live holder's slot that must move for balance gets a `next`; a move
//!   towards a replica that died is cancelled.
//! - A **replica** serves a slot only while the table it last read names it holder with no
//!   `next`. Once it (re)takes its shard Lease it first *checks in* (a write to the table),
//!   and serves what the table it wrote says. A slot with a `next` is narrowed away (its
//!   watch no longer selects it, its reconciles finish) and only then handed over: the
//!   replica itself writes `holder = next`.
//!
//! # Why two replicas never serve one slot
//!
//! A slot's holder changes only (a) by its holder's own handover write, made after it
//! stopped serving the slot, or (b) by the coordinator, when the holder's Lease looked dead.
//! For (b): the shard Lease argument ([`LiveShards`](super::LiveShards)) says the holder has
//! stopped serving — it halts at its renew deadline, before any observer counts it dead. It
//! could come back between the coordinator's reads and its write; but coming back means
//! taking its Lease and then checking in, a write to the table. If that check-in came
//! before the coordinator read the table, the coordinator's later read of the Leases sees
//! the retaken Lease (alive, so nothing moves); if it came after, the coordinator's write,
//! made against the older version, fails. And the replica serves only what a table written
//! after its check-in names it holder of. So the new holder starts only once the old one
//! has stopped, whatever the order of events, lost answers or partitions.

mod coordinator;
mod reconcile;
mod replica;
mod share;
mod table;
#[cfg(test)]
mod tests;

use std::ops::Range;

use kube_informer::list_watch::{HASH_SPACE_END, ShardField, ShardSelector};

pub(crate) use self::{
    coordinator::coordinate_once,
    reconcile::reconcile_in_slots,
    replica::{SlotServer, serve_slots},
    share::RangeShare,
    table::TableStore,
};

/// The slots the hash space is cut into. 64 keeps every share of up to eight replicas
/// within one slot of fair (3 replicas: 21, 21 and 22 slots, each within 5% of a third),
/// and a replica's selector at most 32 ranges.
pub(crate) const SLOTS: usize = 64;

/// A set of slots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct SlotSet(u64);

impl SlotSet {
    pub(crate) const EMPTY: Self = Self(0);

    pub(crate) fn insert(&mut self, slot: usize) {
        self.0 |= 1 << slot;
    }

    pub(crate) fn contains(self, slot: usize) -> bool {
        self.0 & (1 << slot) != 0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub(crate) fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    pub(crate) fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    pub(crate) fn minus(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    pub(crate) fn iter(self) -> impl Iterator<Item = usize> {
        (0..SLOTS).filter(move |slot| self.contains(*slot))
    }

    /// The hash ranges of these slots, adjacent slots merged.
    pub(crate) fn ranges(self) -> Vec<Range<u128>> {
        let mut ranges: Vec<Range<u128>> = Vec::new();
        for slot in self.iter() {
            let range = slot_range(slot);
            match ranges.last_mut() {
                Some(last) if last.end == range.start => last.end = range.end,
                _ => ranges.push(range),
            }
        }
        ranges
    }

    /// The shard selector of these slots over `field`; `None` for no slot.
    pub(crate) fn selector(self, field: ShardField) -> Option<ShardSelector> {
        ShardSelector::with_ranges(field, self.ranges()).ok()
    }
}

impl FromIterator<usize> for SlotSet {
    fn from_iter<I: IntoIterator<Item = usize>>(slots: I) -> Self {
        let mut set = Self::EMPTY;
        for slot in slots {
            set.insert(slot);
        }
        set
    }
}

/// The slot a hash falls in.
pub(crate) fn slot_of(hash: u64) -> usize {
    (u128::from(hash) * SLOTS as u128 / HASH_SPACE_END) as usize
}

/// The hashes of `slot`: `[slot, slot + 1) × 2^64 / SLOTS`.
pub(crate) fn slot_range(slot: usize) -> Range<u128> {
    let width = HASH_SPACE_END / SLOTS as u128;
    slot as u128 * width..(slot as u128 + 1) * width
}
