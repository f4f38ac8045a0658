//! The clients compared, each run in its own process: it syncs N objects from the server,
//! then counts M watch events in K handlers, and prints one [`Outcome`] line.

mod bound;
mod controller;
mod informer;
mod kube_rs;

use std::{
    fmt,
    str::FromStr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;

use crate::{measure, traffic::Objects, widgets::Widget};

pub(crate) use controller::PODS_PER_OWNER;

/// Which client a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Impl {
    /// serde_json decoding the same bytes into `Pod`s through kube's client; nothing stored.
    Bound,
    /// kube-runtime's watcher + reflector store + K handler tasks.
    KubeRs,
    /// kube-informer with `Arc<Pod>` in the cache.
    Typed,
    /// The same, reading protobuf (issue #28).
    TypedProtobuf,
    /// The same, reading protobuf with `managedFields` skipped (`strip_managed_fields`):
    /// less than the peers keep, so not a like-for-like row (not in the default set).
    TypedProtobufStripped,
    /// What a user gets untuned: a factory informer with `FactoryOptions::default()`
    /// (protobuf, streaming list, managedFields left out).
    TypedDefaults,
    /// The same with a paged LIST in place of the streaming list (not in the default set:
    /// the replay server refuses streaming lists, so both would list there).
    TypedDefaultsPaged,
    /// The same without backpressure (an unbounded queue, handlers never waited for): the
    /// pipeline before issue #24, for a before/after in one run (not in the default set).
    TypedUnbounded,
    /// kube-informer with `Compact<Pod>` in the cache.
    Compact,
    /// kube-informer with `Compact<Pod>` kept as protobuf messages.
    CompactProtobuf,
    /// The same without managedFields (not in the default set: less than the peers keep).
    CompactProtobufStripped,
    /// kube-informer with `Compact<Pod, Zstd>` in the cache.
    CompactZstd,
    /// @kubernetes/client-node's informer, run by Node (see `node/client.js`).
    ClientNode,
    /// An operator: a ReplicaSet controller owning the pods, typed caches (needs the
    /// ReplicaSets `informer-bench operator` seeds; not in the default set).
    Controller,
    /// The same over `Compact<ReplicaSet>` and `Compact<Pod>` caches.
    ControllerCompact,
}

impl Impl {
    /// Every client, in table order.
    pub(crate) const ALL: [Impl; 9] = [
        Impl::Bound,
        Impl::KubeRs,
        Impl::ClientNode,
        Impl::Typed,
        Impl::TypedProtobuf,
        Impl::TypedDefaults,
        Impl::Compact,
        Impl::CompactProtobuf,
        Impl::CompactZstd,
    ];
}

impl Impl {
    /// Whether the client reads any kind as JSON (not only pods: no protobuf, no
    /// ReplicaSets).
    pub(crate) fn reads_any_json_kind(self) -> bool {
        matches!(
            self,
            Impl::Bound
                | Impl::KubeRs
                | Impl::Typed
                | Impl::TypedDefaults
                | Impl::TypedDefaultsPaged
                | Impl::TypedUnbounded
                | Impl::Compact
                | Impl::CompactZstd
                | Impl::ClientNode
        )
    }
}

impl fmt::Display for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Impl::Bound => "bound",
            Impl::KubeRs => "kube-rs",
            Impl::Typed => "typed",
            Impl::TypedProtobuf => "typed+pb",
            Impl::TypedProtobufStripped => "typed+pb-mf",
            Impl::TypedDefaults => "typed-defaults",
            Impl::TypedDefaultsPaged => "typed-defaults-paged",
            Impl::TypedUnbounded => "typed-unbounded",
            Impl::Compact => "compact",
            Impl::CompactProtobuf => "compact+pb",
            Impl::CompactProtobufStripped => "compact+pb-mf",
            Impl::CompactZstd => "compact+zstd",
            Impl::ClientNode => "client-node",
            Impl::Controller => "controller",
            Impl::ControllerCompact => "controller+compact",
        })
    }
}

impl FromStr for Impl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Impl::ALL
            .into_iter()
            .chain([
                Impl::TypedUnbounded,
                Impl::TypedDefaultsPaged,
                Impl::TypedProtobufStripped,
                Impl::CompactProtobufStripped,
                Impl::Controller,
                Impl::ControllerCompact,
            ])
            .find(|i| i.to_string() == s)
            .ok_or_else(|| {
                format!("unknown client {s:?} (bound, kube-rs, client-node, typed, typed+pb, typed+pb-mf, typed-unbounded, compact, compact+pb, compact+pb-mf, compact+zstd, typed-defaults, typed-defaults-paged, controller, controller+compact)")
            })
    }
}

/// What one client run is asked to do.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// The client.
    pub(crate) client: Impl,
    /// The replay server's URL.
    pub(crate) url: String,
    /// Objects listed.
    pub(crate) n: usize,
    /// Watch events after the list.
    pub(crate) m: usize,
    /// Counting handlers.
    pub(crate) k: usize,
    /// How many of the events are deletes, when known: the counts are then checked exactly.
    pub(crate) deletes: Option<usize>,
    /// What the objects are.
    pub(crate) objects: Objects,
}

/// What one client run measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// From the start of the client to a synced cache.
    pub(crate) sync: Duration,
    /// From synced to every handler having counted every event.
    pub(crate) watch: Duration,
    /// Peak resident memory, KiB.
    pub(crate) peak_rss_kib: u64,
    /// CPU time (user + system).
    pub(crate) cpu: Duration,
    /// Context switches, voluntary and not (thread hand-offs).
    pub(crate) switches: u64,
}

impl Outcome {
    /// One line, parsed back by [`Outcome::parse`].
    pub(crate) fn line(&self) -> String {
        format!(
            "outcome sync_s={:.6} watch_s={:.6} peak_rss_kib={} cpu_s={:.3} switches={}",
            self.sync.as_secs_f64(),
            self.watch.as_secs_f64(),
            self.peak_rss_kib,
            self.cpu.as_secs_f64(),
            self.switches
        )
    }

    /// Reads a line written by [`Outcome::line`].
    pub(crate) fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix("outcome ")?;
        let mut out = Outcome::default();
        for field in rest.split_whitespace() {
            let (name, value) = field.split_once('=')?;
            let secs = || value.parse::<f64>().ok().map(Duration::from_secs_f64);
            match name {
                "sync_s" => out.sync = secs()?,
                "watch_s" => out.watch = secs()?,
                "cpu_s" => out.cpu = secs()?,
                "peak_rss_kib" => out.peak_rss_kib = value.parse().ok()?,
                "switches" => out.switches = value.parse().ok()?,
                _ => return None,
            }
        }
        Some(out)
    }
}

/// What a handler was called for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Call {
    /// An object of the first sync.
    Initial,
    /// A later add or update (kube-rs cannot tell the two apart: `Apply`).
    Applied,
    /// A delete.
    Deleted,
}

/// Handler counters: per handler, calls by [`Call`].
#[derive(Clone)]
pub(crate) struct Counters(Arc<Vec<[AtomicUsize; 3]>>);

impl Counters {
    pub(crate) fn new(k: usize) -> Self {
        Self(Arc::new((0..k).map(|_| Default::default()).collect()))
    }

    pub(crate) fn hit(&self, handler: usize, call: Call) {
        self.0[handler][call as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn total(counts: &[AtomicUsize; 3]) -> usize {
        counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Waits until every handler counted at least `target` calls.
    pub(crate) async fn wait_all(&self, target: usize) {
        while self.0.iter().any(|c| Self::total(c) < target) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// After [`wait_all`](Self::wait_all): every handler saw exactly the `n` listed
    /// objects, the `m` events of which `deletes` were deletes — no more, no fewer (a
    /// client that double-delivered or mislabelled would otherwise pass on "at least").
    pub(crate) async fn check_exact(&self, job: &Job) -> Result<(), String> {
        let Some(deletes) = job.deletes else {
            return Ok(());
        };
        tokio::time::sleep(Duration::from_millis(200)).await; // let stragglers arrive
        let expected = [job.n, job.m - deletes, deletes];
        for (handler, counts) in self.0.iter().enumerate() {
            let got = counts.each_ref().map(|c| c.load(Ordering::Relaxed));
            if got != expected {
                return Err(format!(
                    "handler {handler} counted (initial, applied, deleted) = {got:?}, the traffic has {expected:?}"
                ));
            }
        }
        Ok(())
    }
}

/// Runs `job` in this process and prints its outcome.
pub(crate) fn run(job: &Job) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let outcome = runtime.block_on(async {
        let started = Instant::now();
        let (synced, done) = match job.objects {
            Objects::Pods => run_pods(job).await?,
            Objects::Widgets => run_objects::<Widget>(job).await?,
        };
        Ok::<_, String>(Outcome {
            sync: synced - started,
            watch: done - synced,
            peak_rss_kib: measure::peak_rss_kib(),
            cpu: measure::cpu_time(),
            switches: measure::context_switches(),
        })
    })?;
    println!("{}", outcome.line());
    // Exit without tearing the caches down: freeing is not part of any figure.
    std::process::exit(0);
}

/// `job` over pods: every client.
async fn run_pods(job: &Job) -> Result<(Instant, Instant), String> {
    match job.client {
        Impl::TypedProtobuf => informer::run_typed_protobuf(job).await,
        Impl::TypedProtobufStripped => informer::run_typed_protobuf_stripped(job).await,
        Impl::CompactProtobuf => informer::run_compact_protobuf(job).await,
        Impl::CompactProtobufStripped => informer::run_compact_protobuf_stripped(job).await,
        Impl::Controller => controller::run_typed(job).await,
        Impl::ControllerCompact => controller::run_compact(job).await,
        _ => run_objects::<Pod>(job).await,
    }
}

/// `job` over objects of any kind, served as JSON (the clients that ask for protobuf or
/// need ReplicaSets are pods only).
async fn run_objects<K: kube_informer_runtime::controller::Watchable>(
    job: &Job,
) -> Result<(Instant, Instant), String> {
    match job.client {
        Impl::Bound => bound::run::<K>(job).await,
        Impl::KubeRs => kube_rs::run::<K>(job).await,
        Impl::Typed => informer::run_typed::<K>(job).await,
        Impl::TypedDefaults => informer::run_typed_defaults::<K>(job).await,
        Impl::TypedDefaultsPaged => informer::run_typed_defaults_paged::<K>(job).await,
        Impl::TypedUnbounded => informer::run_typed_unbounded::<K>(job).await,
        Impl::Compact => informer::run_compact::<K>(job).await,
        Impl::CompactZstd => informer::run_compact_zstd::<K>(job).await,
        Impl::ClientNode => Err("client-node runs under node, not in this process".into()),
        other => Err(format!(
            "{other} reads protobuf or ReplicaSets: pods only, not {}",
            K::plural(&())
        )),
    }
}

/// A kube client for the replay server.
pub(crate) fn client(url: &str) -> Result<kube::Client, String> {
    let uri = url.parse().map_err(|e| format!("bad url {url}: {e}"))?;
    kube::Client::try_from(kube::Config::new(uri)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(deletes: Option<usize>) -> Job {
        Job {
            client: Impl::Typed,
            url: String::new(),
            n: 2,
            m: 3,
            k: 1,
            deletes,
            objects: Objects::Pods,
        }
    }

    #[tokio::test]
    async fn counts_are_checked_exactly_by_kind() {
        let counters = Counters::new(1);
        for call in [
            Call::Initial,
            Call::Initial,
            Call::Applied,
            Call::Applied,
            Call::Deleted,
        ] {
            counters.hit(0, call);
        }
        counters.wait_all(5).await;
        assert!(counters.check_exact(&job(Some(1))).await.is_ok());
        let mislabelled = counters.check_exact(&job(Some(2))).await.unwrap_err();
        assert!(mislabelled.contains("[2, 2, 1]"), "{mislabelled}");
        counters.hit(0, Call::Applied); // a duplicate delivery
        assert!(counters.check_exact(&job(Some(1))).await.is_err());
        assert!(
            counters.check_exact(&job(None)).await.is_ok(),
            "unknown: not checked"
        );
    }
}
