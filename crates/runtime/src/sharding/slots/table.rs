//! The slot table ([`SlotTable`]): each slot's holder and next holder, kept in one
//! annotation of the ring's Lease `<ring>-slot-table` ([`TableStore`]), and the
//! coordinator's plan over it.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::api::coordination::v1::Lease;
use serde::{Deserialize, Serialize};

use super::{SLOTS, SlotSet};
use crate::lease::LeaseStore;

/// The annotation holding the table.
pub(super) const ANNOTATION: &str = "sharding.kube-informer.dev/slots";

/// Who holds each slot, and where it is moving.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SlotTable {
    /// Each slot's holder (`None`: nobody yet).
    holders: Vec<Option<String>>,
    /// Slots moving, to their next holder.
    #[serde(default)]
    pub(super) moving: BTreeMap<usize, String>,
    /// Each replica's check-ins (see the module docs).
    #[serde(default)]
    checkins: BTreeMap<String, u64>,
}

impl Default for SlotTable {
    fn default() -> Self {
        Self {
            holders: vec![None; SLOTS],
            moving: BTreeMap::new(),
            checkins: BTreeMap::new(),
        }
    }
}

impl SlotTable {
    /// The slots `replica` may serve: held, not moving.
    pub(crate) fn serving(&self, replica: &str) -> SlotSet {
        self.held_by(replica)
            .minus(self.moving.keys().copied().collect())
    }

    /// The slots `replica` holds, moving or not.
    pub(crate) fn held_by(&self, replica: &str) -> SlotSet {
        (0..SLOTS)
            .filter(|slot| self.holders[*slot].as_deref() == Some(replica))
            .collect()
    }

    /// The slots `replica` holds that are moving away.
    pub(crate) fn leaving(&self, replica: &str) -> SlotSet {
        self.held_by(replica).minus(self.serving(replica))
    }

    /// Each slot's holder.
    #[cfg(test)]
    pub(crate) fn holder(&self, slot: usize) -> Option<&str> {
        self.holders[slot].as_deref()
    }

    /// Whether every slot has a holder and none is moving.
    #[cfg(test)]
    pub(crate) fn settled(&self) -> bool {
        self.moving.is_empty() && self.holders.iter().all(Option::is_some)
    }

    /// `replica` checks in.
    fn check_in(&mut self, replica: &str) {
        *self.checkins.entry(replica.to_owned()).or_default() += 1;
    }

    /// `replica` hands `slots` (moving away from it) to their next holders.
    pub(super) fn hand_over(&mut self, replica: &str, slots: SlotSet) {
        for slot in slots.iter() {
            if self.holders[slot].as_deref() == Some(replica)
                && let Some(next) = self.moving.remove(&slot)
            {
                self.holders[slot] = Some(next);
            }
        }
    }

    /// The table the coordinator writes when `live` (sorted, no duplicates) are the live
    /// replicas: a dead holder's slots go to a live replica at once (it has stopped); moves
    /// towards dead replicas are cancelled; then slots move (marked, not yet handed over)
    /// from replicas over their fair share to those under it, until every replica holds
    /// `SLOTS / N` or one more. Moves in flight count for their destination, so planning
    /// again changes nothing. Deterministic: every coordinator plans alike.
    pub(crate) fn plan(&self, live: &[String]) -> Self {
        let mut next = self.clone();
        if live.is_empty() {
            return next;
        }
        let is_live = |r: &str| live.iter().any(|l| l == r);
        next.moving.retain(|_, to| is_live(to));
        for slot in 0..SLOTS {
            if next.holders[slot].as_deref().is_none_or(|h| !is_live(h)) {
                next.holders[slot] = next.moving.remove(&slot);
            }
        }
        let holders = next.holders.clone();
        next.checkins
            .retain(|r, _| is_live(r) || holders.iter().any(|h| h.as_deref() == Some(r)));
        // How many slots each live replica ends up with, once the moves are done.
        let mut counts: BTreeMap<String, usize> = live.iter().map(|r| (r.clone(), 0)).collect();
        for slot in 0..SLOTS {
            if let Some(owner) = next.moving.get(&slot).or(next.holders[slot].as_ref()) {
                *counts.get_mut(owner).expect("live") += 1;
            }
        }
        // Fair shares: the replicas holding most keep the extra slots (fewest moves).
        let mut by_load: Vec<&String> = live.iter().collect();
        by_load.sort_by(|a, b| counts[*b].cmp(&counts[*a]).then(a.cmp(b)));
        let (base, extra) = (SLOTS / live.len(), SLOTS % live.len());
        let target: BTreeMap<String, usize> = by_load
            .iter()
            .enumerate()
            .map(|(i, r)| ((*r).clone(), base + usize::from(i < extra)))
            .collect();
        // The replica furthest under its share (first by name among equals).
        let neediest = |counts: &BTreeMap<String, usize>| -> Option<String> {
            live.iter()
                .filter(|r| counts[*r] < target[*r])
                .max_by(|a, b| {
                    let (need_a, need_b) = (target[*a] - counts[*a], target[*b] - counts[*b]);
                    need_a.cmp(&need_b).then(b.cmp(a))
                })
                .cloned()
        };
        // Unheld slots first: nobody serves them, so they are given at once.
        for slot in 0..SLOTS {
            if next.holders[slot].is_none()
                && let Some(to) = neediest(&counts)
            {
                *counts.get_mut(&to).expect("live") += 1;
                next.holders[slot] = Some(to);
            }
        }
        // Then moves away from those over their share, their highest slots first.
        for slot in (0..SLOTS).rev() {
            let Some(holder) = next.holders[slot].clone() else {
                continue;
            };
            if next.moving.contains_key(&slot) || counts[&holder] <= target[&holder] {
                continue;
            }
            if let Some(to) = neediest(&counts) {
                *counts.get_mut(&holder).expect("live") -= 1;
                *counts.get_mut(&to).expect("live") += 1;
                next.moving.insert(slot, to);
            }
        }
        next
    }
}

/// How long a request for the table may take before it is abandoned (an error; the round
/// is made again): a request that never answers must not stop a replica from handing a
/// slot over, nor the coordinator from planning.
const REQUEST_LIMIT: Duration = Duration::from_secs(10);

/// `call`, abandoned after [`REQUEST_LIMIT`].
async fn limited<T>(call: impl Future<Output = Result<T, kube::Error>>) -> Result<T, kube::Error> {
    tokio::time::timeout(REQUEST_LIMIT, call)
        .await
        .unwrap_or_else(|_| {
            let hung = format!("the slot table: no answer within {REQUEST_LIMIT:?}");
            Err(kube::Error::Service(hung.into()))
        })
}

/// Where the table is read and written: the Lease `<ring>-slot-table`.
#[derive(Clone)]
pub(crate) struct TableStore {
    store: Arc<dyn LeaseStore>,
    name: String,
}

/// The table as read, with the version a write must be made against (`None`: no Lease
/// yet).
pub(crate) struct Read {
    pub(crate) table: SlotTable,
    version: Option<Lease>,
}

impl TableStore {
    pub(crate) fn new(store: Arc<dyn LeaseStore>, ring: &str) -> Self {
        Self {
            store,
            name: format!("{ring}-slot-table"),
        }
    }

    /// Reads the table (empty when there is none yet). A table that does not parse is an
    /// error, never an empty table: that would hand every slot out again.
    pub(crate) async fn read(&self) -> Result<Read, kube::Error> {
        let Some(lease) = limited(self.store.get(&self.name)).await? else {
            return Ok(Read {
                table: SlotTable::default(),
                version: None,
            });
        };
        let text = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION))
            .cloned()
            .unwrap_or_default();
        let table = match text.is_empty() {
            true => SlotTable::default(),
            false => serde_json::from_str::<SlotTable>(&text)
                .ok()
                .filter(|t| t.holders.len() == SLOTS)
                .ok_or_else(|| {
                    let why = format!("the slot table {} does not parse: {text:.200}", self.name);
                    kube::Error::Service(why.into())
                })?,
        };
        Ok(Read {
            table,
            version: Some(lease),
        })
    }

    /// Writes `table` against the version `read` (409 if it changed since).
    pub(crate) async fn write(
        &self,
        read: &Read,
        table: &SlotTable,
    ) -> Result<SlotTable, kube::Error> {
        let text = serde_json::to_string(table).map_err(kube::Error::SerdeError)?;
        let mut lease = read.version.clone().unwrap_or_else(|| {
            let mut lease = Lease::default();
            lease.metadata.name = Some(self.name.clone());
            lease
        });
        lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION.to_owned(), text);
        match read.version {
            Some(_) => limited(self.store.replace(&self.name, &lease)).await?,
            None => limited(self.store.create(&lease)).await?,
        };
        Ok(table.clone())
    }

    /// `replica` checks in: the table as written with its check-in.
    pub(crate) async fn check_in(&self, replica: &str) -> Result<SlotTable, kube::Error> {
        let read = self.read().await?;
        let mut table = read.table.clone();
        table.check_in(replica);
        self.write(&read, &table).await
    }

    /// `replica` hands `slots` over, against the version `read`.
    pub(crate) async fn hand_over(
        &self,
        read: &Read,
        replica: &str,
        slots: SlotSet,
    ) -> Result<SlotTable, kube::Error> {
        let mut table = read.table.clone();
        table.hand_over(replica, slots);
        self.write(read, &table).await
    }
}
