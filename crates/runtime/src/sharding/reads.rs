//! Where a sharder reads the live shards from, each tick: always a read of the shard
//! Leases that started after the tick asked — a plan is never made on an older one (a
//! shard that died and came back must be seen alive before its objects are given away) —
//! shared, when many sharders run side by side (a fleet's members), by every ask made
//! before it started.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use super::{LiveShards, Ring};

/// Where a sharder's rounds read the live shards from: each tick, a read of the shard
/// Leases made after the tick asked (a plan is never made on an older one: a shard that
/// died and came back must be seen alive before its objects are given away).
pub(crate) enum Shards<'a> {
    /// Reads the shard Leases itself.
    Observe(&'a LiveShards),
    /// Shares reads with the sharders of the other sets (see [`SharedReads`]).
    Shared(&'a SharedReads<'a>),
}

impl Shards<'_> {
    pub(super) async fn now(&self) -> Result<Ring, kube::Error> {
        match self {
            Self::Observe(live) => live.observe().await,
            Self::Shared(reads) => reads.observe().await,
        }
    }
}

/// Reads of the shard Leases shared by the sharders of many sets (a fleet's members): a
/// sharder that asks takes the first read that *started after it asked* — as fresh as one
/// it would have made itself — so fifty members' sharders ticking together cost one or two
/// small LISTs, never a plan on an older read.
pub(crate) struct SharedReads<'a> {
    live: &'a LiveShards,
    /// Asks so far; a read started when this was `n` serves every ask numbered below `n`.
    asks: AtomicU64,
    /// The last read: the asks it serves, and its ring or why it failed (a failure is
    /// shared too: fifty sharders do not each wait for a failing read in turn). One read
    /// at a time (FIFO).
    last: tokio::sync::Mutex<Option<(u64, Result<Ring, String>)>>,
}

impl<'a> SharedReads<'a> {
    pub(crate) fn new(live: &'a LiveShards) -> Self {
        Self {
            live,
            asks: AtomicU64::new(0),
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// The live shards, from a read started after this call.
    pub(crate) async fn observe(&self) -> Result<Ring, kube::Error> {
        let ask = self.asks.fetch_add(1, SeqCst);
        let mut last = self.last.lock().await;
        if let Some((serves, read)) = &*last
            && ask < *serves
        {
            return read.clone().map_err(|why| {
                let shared = std::io::Error::other(format!("reading the shard Leases: {why}"));
                kube::Error::Service(Box::new(shared))
            });
        }
        let serves = self.asks.load(SeqCst);
        let read = self.live.observe().await;
        let kept = read.as_ref().map(Ring::clone).map_err(ToString::to_string);
        *last = Some((serves, kept));
        read
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, atomic::AtomicUsize};

    use futures_util::future::BoxFuture;
    use k8s_openapi::api::coordination::v1::Lease;
    use tokio::sync::Semaphore;

    use super::*;
    use crate::lease::LeaseStore;

    /// Leases of the ring `web`: its `n`th LIST (from 1) answers the shard `s<n>` alive,
    /// once the gate lets it through.
    struct Gated {
        lists: AtomicUsize,
        gate: Semaphore,
        /// The LIST that fails (0: none).
        failing: usize,
    }

    impl Gated {
        fn failing(n: usize) -> Self {
            Self {
                lists: AtomicUsize::new(0),
                gate: Semaphore::new(0),
                failing: n,
            }
        }
    }

    impl Default for Gated {
        fn default() -> Self {
            Self::failing(0)
        }
    }

    impl LeaseStore for Gated {
        fn get<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>> {
            Box::pin(async { unreachable!("the observer only lists") })
        }
        fn create<'a>(&'a self, _: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
            Box::pin(async { unreachable!("the observer only lists") })
        }
        fn replace<'a>(
            &'a self,
            _: &'a str,
            _: &'a Lease,
        ) -> BoxFuture<'a, Result<Lease, kube::Error>> {
            Box::pin(async { unreachable!("the observer only lists") })
        }
        fn list<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
        ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>> {
            Box::pin(async move {
                let n = self.lists.fetch_add(1, SeqCst) + 1;
                self.gate.acquire().await.expect("open").forget();
                if n == self.failing {
                    let down = std::io::Error::other("the hub is down");
                    return Err(kube::Error::Service(Box::new(down)));
                }
                let lease: Lease = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("web-s{n}"), "resourceVersion": "1"},
                    "spec": {"holderIdentity": format!("s{n}"), "leaseDurationSeconds": 15},
                }))
                .expect("a Lease");
                Ok(vec![lease])
            })
        }
    }

    fn shards(ring: &Ring) -> Vec<&str> {
        ring.shards().collect()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_read_serves_the_asks_made_before_it_started_and_no_later_one() {
        a_read_serves_the_asks_made_before_it_started(Gated::default()).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_read_is_shared_too() {
        a_read_serves_the_asks_made_before_it_started(Gated::failing(2)).await;
    }

    /// A read that never answers (a partition the connection does not see) is abandoned
    /// within the limit, as an error shared by the asks it serves; the next ask reads anew.
    /// Without the limit a sharder's rounds stopped for good and a dead shard's objects
    /// stayed where they were.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_read_that_never_answers_is_abandoned_and_the_next_one_reads_again() {
        let store = Arc::new(Gated::default());
        let live = LiveShards::new(store.clone(), "web");
        let reads = SharedReads::new(&live);
        let started = tokio::time::Instant::now();
        let limit = crate::sharding::membership::READ_LIMIT;
        let hung = tokio::time::timeout(limit * 2, reads.observe())
            .await
            .expect("abandoned within the limit, not left hanging");
        let error = hung.expect_err("no answer is an error").to_string();
        assert!(error.contains("no answer within 5s"), "{error}");
        assert_eq!(started.elapsed(), limit);
        // The abandoned LIST took the first answer; the next read gets its own.
        store.gate.add_permits(1);
        assert_eq!(shards(&reads.observe().await.unwrap()), ["s2"]);
        assert_eq!(store.lists.load(SeqCst), 2);
    }

    async fn a_read_serves_the_asks_made_before_it_started(store: Gated) {
        let failing = store.failing == 2;
        let store = Arc::new(store);
        let live = LiveShards::new(store.clone(), "web");
        let reads = SharedReads::new(&live);
        let started = |n: usize| {
            let store = store.clone();
            async move {
                while store.lists.load(SeqCst) < n {
                    tokio::task::yield_now().await;
                }
            }
        };
        // `a` starts read 1; `b` and `c` ask while it is under way, so read 1 is too old
        // for them; they share read 2.
        let a = reads.observe();
        let b = async {
            started(1).await;
            reads.observe().await
        };
        let c = async {
            started(1).await;
            reads.observe().await
        };
        let open = async {
            started(1).await;
            for _ in 0..10 {
                tokio::task::yield_now().await; // `b` and `c` asked and wait
            }
            store.gate.add_permits(2);
        };
        let (a, b, c, ()) = tokio::join!(a, b, c, open);
        assert_eq!(shards(&a.unwrap()), ["s1"]);
        if failing {
            assert!(b.is_err() && c.is_err(), "read 2 failed for both");
        } else {
            let (b, c) = (b.unwrap(), c.unwrap());
            assert_eq!(shards(&b), ["s2"], "b was served a read older than its ask");
            assert_eq!(shards(&c), ["s2"], "c was served a read older than its ask");
        }
        assert_eq!(store.lists.load(SeqCst), 2, "b and c shared one read");
        // Asked after read 2: a read of its own.
        store.gate.add_permits(1);
        assert_eq!(shards(&reads.observe().await.unwrap()), ["s3"]);
    }
}
