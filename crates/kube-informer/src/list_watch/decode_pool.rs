//! The threads that decode every object headed for a cache.
//!
//! Decoding is moved off the reflector's task (it costs far more than applying an event),
//! but not onto tokio's blocking pool: that pool starts and retires threads as load comes
//! and goes, and under glibc's malloc each thread allocates from an arena of its own. A
//! cache's objects then end up spread over the arenas of whichever threads decoded them —
//! the initial LIST on some, the watch on others — and memory freed in one arena is never
//! reused by allocations made in another. Measured on the benchmark's 10k pods + 100k watch
//! events: a live heap of 520 MB held 1.1 GB of RSS this way, against 485 MB when every
//! object is decoded on the same few long-lived threads (and 509–542 MiB for kube-rs, which
//! decodes in the task that reads the stream). So every LIST page and every watch line is
//! decoded here, on [`decoders`](super::decoders) threads that live as long as someone
//! holds the pool: an object replaced by the watch frees memory that the next decoded
//! object reuses.
//!
//! The pool is shared by every reflector in the process ([`DecodePool::shared`]); it is
//! started by the first holder and stopped when the last one drops it: jobs still queued
//! are dropped unrun (their callers get [`DecodeFailed`]; nobody holds the pool to want
//! them) and the threads are joined after the job each is running — one page at most, so
//! the drop, which may happen on a tokio worker, blocks that long and no longer.
//! A panic in a decoder (a user's `Deserialize`) is caught: the job's caller gets
//! [`DecodeFailed`] and the thread goes on. With no threads
//! ([`set_decoding_threads(0)`](super::set_decoding_threads), which takes effect for the
//! next job even while a pool runs), jobs run on the caller's task: a paused tokio clock
//! then never sees the runtime idle in the middle of a decode.

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc,
    },
    thread::JoinHandle,
};

use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send>;

/// A decoding job that gave no result: it panicked, or the pool stopped first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the decoder gave no result (it panicked, or the decoding threads stopped)")]
pub(crate) struct DecodeFailed;

/// A fixed set of decoding threads (see the module docs).
pub(crate) struct DecodePool {
    jobs: Option<mpsc::Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
    /// Jobs sent that no thread has started yet.
    waiting: Arc<AtomicUsize>,
    /// Set when the pool stops: queued jobs are dropped, not run.
    stopping: Arc<AtomicBool>,
}

/// A pool shared while anyone holds it.
struct Shared(Mutex<Weak<DecodePool>>);

impl Shared {
    fn get(&self, threads: usize) -> Arc<DecodePool> {
        let mut shared = self.0.lock();
        if let Some(pool) = shared.upgrade() {
            return pool;
        }
        let pool = Arc::new(DecodePool::start(threads));
        *shared = Arc::downgrade(&pool);
        pool
    }
}

static SHARED: Shared = Shared(Mutex::new(Weak::new()));

/// Batches waiting for a thread of the process's pool now (see
/// [`decode_backlog`](super::decode_backlog)).
pub(super) fn waiting() -> usize {
    let pool = SHARED.0.lock().upgrade();
    pool.map_or(0, |pool| pool.waiting())
}

/// One batch counted in its pool's backlog while it lives: until a thread starts it, or
/// it is dropped unrun (the pool stopped).
struct Waiting(Arc<AtomicUsize>);

impl Waiting {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl DecodePool {
    /// The process's pool, started if nobody holds it.
    pub(crate) fn shared() -> Arc<Self> {
        SHARED.get(super::decoding_threads())
    }

    pub(super) fn start(threads: usize) -> Self {
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let stopping = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .filter_map(|i| {
                let (receiver, stopping) = (Arc::clone(&receiver), Arc::clone(&stopping));
                std::thread::Builder::new()
                    .name(format!("kube-informer-decode-{i}"))
                    .spawn(move || work(&receiver, &stopping))
                    .map_err(|error| tracing::warn!(%error, "cannot start a decoding thread"))
                    .ok()
            })
            .collect();
        Self {
            jobs: Some(sender),
            threads,
            waiting: Arc::default(),
            stopping,
        }
    }

    /// Jobs sent that no thread has started yet.
    pub(super) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Runs `decode` on one of the pool's threads; the result arrives when it is done.
    /// Without a thread to run it (none wanted, or none could be started), it runs here.
    pub(crate) fn run<R, F>(
        &self,
        decode: F,
    ) -> impl Future<Output = Result<R, DecodeFailed>> + Send + use<R, F>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            // The receiver may be gone (the stream was dropped): nothing to tell.
            let _ = done.send(decode());
        });
        let unsent = match &self.jobs {
            // `set_decoding_threads(0)` holds from the next job on, even while a pool runs.
            Some(jobs) if !self.threads.is_empty() && super::decoding_threads() > 0 => {
                // Counted until a thread starts it, or it is dropped unrun (pool stopped).
                let waiting = Waiting::new(&self.waiting);
                let job: Job = Box::new(move || {
                    drop(waiting);
                    job();
                });
                jobs.send(job).err().map(|e| e.0)
            }
            _ => Some(job),
        };
        if let Some(job) = unsent {
            let _ = catch_unwind(AssertUnwindSafe(job));
        }
        async move { result.await.map_err(|_| DecodeFailed) }
    }

    #[cfg(test)]
    fn threads(&self) -> usize {
        self.threads.len()
    }
}

/// A decoding thread: jobs until the pool is dropped; a panicking job is that job's loss.
fn work(receiver: &Mutex<mpsc::Receiver<Job>>, stopping: &AtomicBool) {
    loop {
        // One thread waits in `recv` at a time, the others for the lock: either way idle.
        let Ok(job) = receiver.lock().recv() else {
            return;
        };
        if stopping.load(Ordering::SeqCst) {
            // Dropped unrun, and the rest with the receiver: their callers get
            // `DecodeFailed` now rather than the drop waiting for all of them.
            return;
        }
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            tracing::error!("a decoder panicked: the watch or LIST it decoded for is retried");
        }
    }
}

impl Drop for DecodePool {
    fn drop(&mut self) {
        // Each thread ends after the job it runs (a page at most); queued jobs are dropped.
        self.stopping.store(true, Ordering::SeqCst);
        self.jobs.take();
        let me = std::thread::current().id();
        for thread in self.threads.drain(..) {
            if thread.thread().id() != me {
                let _ = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures_util::FutureExt;

    use super::*;

    /// A job holding one of the pool's threads until `release` is sent to (or dropped);
    /// returns once the job runs.
    fn hold(
        pool: &DecodePool,
    ) -> (
        impl Future<Output = Result<(), DecodeFailed>> + use<>,
        std::sync::mpsc::Sender<()>,
    ) {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (started, on_thread) = std::sync::mpsc::channel::<()>();
        let busy = pool.run(move || {
            started.send(()).unwrap();
            let _ = held.recv();
        });
        on_thread.recv().unwrap();
        (busy, release)
    }

    /// Jobs behind a busy thread are the backlog until one starts them; a pool stopped with
    /// jobs still queued leaves none counted.
    #[tokio::test]
    async fn the_backlog_counts_jobs_no_thread_has_started() {
        let pool = DecodePool::start(1);
        let (busy, release) = hold(&pool);
        assert_eq!(pool.waiting(), 0, "the running job is not waiting");
        let queued: Vec<_> = (0..3).map(|i| pool.run(move || i)).collect();
        assert_eq!(pool.waiting(), 3);
        release.send(()).unwrap();
        busy.await.unwrap();
        assert_eq!(futures_util::future::join_all(queued).await.len(), 3);
        assert_eq!(pool.waiting(), 0);
        // Stopped with jobs still queued: however they end, none stays counted.
        let count = pool.waiting.clone();
        let (_busy, release) = hold(&pool);
        let _unrun: Vec<_> = (0..2).map(|i| pool.run(move || i)).collect();
        assert_eq!(count.load(Ordering::Relaxed), 2);
        drop(release);
        drop(pool);
        assert_eq!(count.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn jobs_run_on_the_pool_and_a_panic_costs_only_its_job() {
        let pool = DecodePool::start(2);
        assert_eq!(pool.threads(), 2);
        let name = pool
            .run(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap();
        assert!(name.unwrap().starts_with("kube-informer-decode-"));
        let panicked = pool.run(|| -> u32 { panic!("a user's Deserialize panicked") });
        assert_eq!(panicked.await, Err(DecodeFailed));
        // Both threads still serve.
        let results = futures_util::future::join_all((0..8).map(|i| pool.run(move || i * 2))).await;
        assert_eq!(
            results.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
            (0..8).map(|i| i * 2).collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn without_threads_jobs_run_on_the_callers_thread_and_a_panic_costs_only_its_job() {
        let pool = DecodePool::start(0);
        assert_eq!(pool.threads(), 0);
        let here = std::thread::current().id();
        let decoding = pool.run(move || std::thread::current().id() == here);
        assert_eq!(
            decoding.now_or_never(),
            Some(Ok(true)),
            "done before it is awaited"
        );
        let panicked = pool.run(|| -> u32 { panic!("a user's Deserialize panicked") });
        assert_eq!(panicked.await, Err(DecodeFailed));
        assert_eq!(pool.run(|| 7).await, Ok(7));
    }

    #[tokio::test]
    async fn dropping_the_pool_joins_its_threads() {
        static ENDED: AtomicUsize = AtomicUsize::new(0);
        struct Guard;
        impl Drop for Guard {
            fn drop(&mut self) {
                ENDED.fetch_add(1, Ordering::SeqCst);
            }
        }
        let pool = DecodePool::start(3);
        // A guard on each thread's stack, dropped when the thread ends.
        let barrier = Arc::new(std::sync::Barrier::new(3));
        let parked: Vec<_> = (0..3)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                pool.run(move || {
                    barrier.wait(); // one job per thread
                    thread_local!(static GUARD: Guard = const { Guard });
                    GUARD.with(|_| {});
                })
            })
            .collect();
        futures_util::future::join_all(parked).await;
        drop(pool);
        assert_eq!(ENDED.load(Ordering::SeqCst), 3);
    }

    /// Stopping waits for the jobs running, never for the queue: queued jobs are dropped
    /// unrun and their callers told. (It ran every queued job first, on the thread that
    /// dropped the pool — a tokio worker.)
    #[tokio::test]
    async fn a_stopped_pool_runs_no_queued_job() {
        let pool = DecodePool::start(1);
        let (busy, release) = hold(&pool);
        let ran = Arc::new(AtomicUsize::new(0));
        let queued: Vec<_> = (0..50)
            .map(|_| {
                let ran = Arc::clone(&ran);
                pool.run(move || ran.fetch_add(1, Ordering::SeqCst))
            })
            .collect();
        let stopping = Arc::clone(&pool.stopping);
        let stopper = std::thread::spawn(move || drop(pool));
        // The drop is under way; it cannot end while the running job holds.
        while !stopping.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        release.send(()).unwrap();
        stopper.join().unwrap();
        assert_eq!(busy.await, Ok(()), "the running job finished");
        let results = futures_util::future::join_all(queued).await;
        assert_eq!(ran.load(Ordering::SeqCst), 0, "no queued job ran");
        assert!(results.iter().all(|r| *r == Err(DecodeFailed)));
    }

    #[test]
    fn a_shared_pool_lives_while_held_and_restarts_after() {
        let shared = Shared(Mutex::new(Weak::new()));
        let first = shared.get(2);
        let second = shared.get(2);
        assert!(Arc::ptr_eq(&first, &second));
        let weak = Arc::downgrade(&first);
        drop((first, second));
        assert!(weak.upgrade().is_none(), "stopped with its last holder");
        let again = shared.get(2);
        assert_eq!(again.threads(), 2);
    }
}
