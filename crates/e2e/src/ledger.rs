//! [`Ledger`]: who reconciles what, for the scenarios that prove no object is reconciled by
//! two replicas at once (sharded managers, in label and in range mode).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use parking_lot::Mutex;

/// Each key's replica while a reconcile of it runs, every overlap seen, who reconciled each
/// key last, and the keys whose reconciles take long.
#[derive(Default)]
pub struct Ledger {
    /// The replica reconciling each key now.
    pub running: HashMap<String, String>,
    /// Every time a replica started on a key another one was reconciling.
    pub overlaps: Vec<String>,
    /// Who reconciled each key last.
    pub last: BTreeMap<String, String>,
    /// Keys whose reconciles take long (so they run when their object moves).
    pub slow: BTreeSet<String>,
    /// Keys reconciled as deleted, with the replica.
    pub gone: Vec<String>,
}

/// A reconcile in the ledger: out of it when dropped (it ended, or its replica was killed).
struct InLedger {
    ledger: Arc<Mutex<Ledger>>,
    key: String,
}

impl Drop for InLedger {
    fn drop(&mut self) {
        self.ledger.lock().running.remove(&self.key);
    }
}

impl Ledger {
    /// `replica` reconciles `key`, as the sharding scenarios' reconcile does (knowing
    /// nothing of sharding): recorded while it runs, 300 ms for a key in [`slow`](Self::slow)
    /// unless `replica` is `joining` (slow where an object leaves, quick where it arrives:
    /// a newcomer that did not wait for the handover would overlap), else 20 ms.
    pub async fn reconcile(ledger: &Arc<Mutex<Self>>, key: String, replica: &str, joining: &str) {
        let in_ledger = {
            let mut locked = ledger.lock();
            if let Some(other) = locked.running.insert(key.clone(), replica.to_owned()) {
                locked
                    .overlaps
                    .push(format!("{key}: {other} and {replica}"));
            }
            InLedger {
                ledger: ledger.clone(),
                key: key.clone(),
            }
        };
        let slow = replica != joining && ledger.lock().slow.contains(&key);
        tokio::time::sleep(Duration::from_millis(if slow { 300 } else { 20 })).await;
        drop(in_ledger);
        ledger.lock().last.insert(key, replica.to_owned());
    }
}
