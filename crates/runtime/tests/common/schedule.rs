//! Random schedules' tools: a seeded generator and a partitionable link to a Lease store.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicU8, AtomicU64, Ordering},
    },
    time::Duration,
};

use futures_util::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use kube::core::Status;
use kube_informer_runtime::lease::{LeaseStore, MemoryLeases};
use tokio::time::Instant;

/// xorshift64*: the schedule is a function of the seed.
#[derive(Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub(crate) fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from + 1))
    }
}

pub(crate) const UP: u8 = 0;
pub(crate) const HANG: u8 = 1;
pub(crate) const FAIL: u8 = 2;

/// One replica's link to the shared Lease store: a request delay, and a partition that
/// hangs requests or fails them. An answer is lost if the link is cut while the request
/// is on the wire (the write landed; the replica never hears).
pub(crate) struct Link {
    pub(crate) life: usize,
    pub(crate) leases: Arc<MemoryLeases>,
    pub(crate) state: AtomicU8,
    pub(crate) delay_ms: AtomicU64,
}

impl Link {
    async fn pass(&self) -> Result<(), kube::Error> {
        match self.state.load(Ordering::SeqCst) {
            HANG => std::future::pending().await,
            FAIL => Err(kube::Error::Api(
                Status::failure("partitioned", "ServiceUnavailable")
                    .with_code(503)
                    .boxed(),
            )),
            _ => Ok(()),
        }
    }

    async fn call<T>(
        &self,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        self.pass().await?;
        let delay = Duration::from_millis(self.delay_ms.load(Ordering::SeqCst));
        tokio::time::sleep(delay).await;
        self.pass().await?;
        let answer = request.await;
        if std::env::var("SCHEDULE_TRACE").is_ok() {
            eprintln!(
                "{:?} life {} lease call ok={}",
                Instant::now(),
                self.life,
                answer.is_ok()
            );
        }
        self.pass().await?;
        answer
    }
}

impl LeaseStore for Link {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Lease>, kube::Error>> {
        Box::pin(self.call(self.leases.get(name)))
    }

    fn create<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(self.call(self.leases.create(lease)))
    }

    fn replace<'a>(
        &'a self,
        name: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Lease, kube::Error>> {
        Box::pin(self.call(self.leases.replace(name, lease)))
    }

    fn list<'a>(
        &'a self,
        label: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Lease>, kube::Error>> {
        Box::pin(self.call(self.leases.list(label, value)))
    }
}
