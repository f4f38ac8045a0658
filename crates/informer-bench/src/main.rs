//! `informer-bench`: kube-informer against kube-rs, @kubernetes/client-node and a
//! decode-only bound on identical, pre-rendered traffic served over loopback by
//! fake-apiserver's replay server.
//!
//! ```text
//! cargo run --release -p informer-bench -- [--runs 3] [--quick] [--clients typed,compact,...]
//! ```
//!
//! Each client runs in its own process (this program, re-executed with `client ...`), so its
//! peak RSS and CPU time are its own; the server stays in this process. Every scenario runs
//! `--runs` times per client, interleaved, and the table shows medians. See BENCHMARKS.md.

mod clients;
#[cfg(feature = "decoders")]
mod decoders;
mod failover;
mod fairness;
mod fleet;
mod measure;
mod operator;
mod orchestrate;
mod protobuf;
mod sharding;
mod traffic;
mod warm_restart;
mod widgets;

use clap::{Parser, Subcommand};
use clients::{Impl, Job};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Compares kube-informer with kube-rs, @kubernetes/client-node and a decode-only bound on
/// identical pre-rendered traffic, each client in its own process; prints medians.
#[derive(Debug, Parser)]
#[command(name = "informer-bench", version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    plan: PlanArgs,
}

#[derive(Debug, clap::Args)]
struct PlanArgs {
    /// Runs per client and scenario, interleaved (the table shows medians) [default: 3]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    runs: Option<u16>,
    /// Smaller scenarios (2k pods + 20k events; 10k pods sync), one run
    #[arg(long)]
    quick: bool,
    /// Clients to compare: bound, kube-rs, client-node, typed, typed+pb, typed-defaults, compact, compact+pb, compact+zstd
    /// (also: typed+pb-mf and compact+pb-mf, protobuf with managedFields skipped; typed-unbounded)
    /// [default: all; client-node needs node and `npm ci --prefix crates/informer-bench/node`]
    #[arg(long, value_delimiter = ',', value_name = "A,B,...")]
    clients: Option<Vec<Impl>>,
    /// Seed of the rendered traffic
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Write watch events in 64 KiB chunks instead of one by one as a real kube-apiserver
    /// does (the kinder, unrealistic shape earlier tables used)
    #[arg(long)]
    coalesced: bool,
    /// N pods, then M watch events to K handlers (repeatable; replaces the default scenarios)
    #[arg(long = "scenario", value_name = "N:M:K", value_parser = parse_scenario)]
    scenarios: Vec<orchestrate::Scenario>,
    /// The objects served: pods, or `widgets`, a custom resource served as JSON only (the
    /// clients that read protobuf are left out) [default: pods]
    #[arg(long, value_enum)]
    objects: Option<traffic::Objects>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// One client's run against a server (what the orchestrator runs in each child process)
    #[command(hide = true)]
    Client {
        #[arg(long)]
        client: Impl,
        #[arg(long)]
        url: String,
        #[arg(long)]
        n: usize,
        #[arg(long)]
        m: usize,
        #[arg(long, default_value_t = 1)]
        k: usize,
        /// How many of the events are deletes: the handler counts are then checked exactly
        #[arg(long)]
        deletes: Option<usize>,
        /// What the objects are
        #[arg(long, value_enum, default_value_t)]
        objects: traffic::Objects,
    },
    /// A sharded controller as 1, 2 and 4 replicas (processes) on realistic pods: per
    /// replica cache, reconciles, memory and bytes read; rebalancing after a kill and a join
    Sharding {
        /// Pods in the cluster
        #[arg(long, default_value_t = 100_000)]
        pods: usize,
        /// Replica counts to measure, one after the other
        #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
        replicas: Vec<usize>,
        /// The shard Leases' duration in seconds (renew deadline 2/3, retry 1/5 of it)
        #[arg(long, default_value_t = 15)]
        lease_secs: u64,
        /// Sharding modes to measure, back to back: `labels` (the sharder labels each pod),
        /// `ranges` (each replica lists its hash ranges; nothing written)
        #[arg(long, value_delimiter = ',', default_value = "labels,ranges")]
        modes: Vec<String>,
    },
    /// One replica of `sharding` (what it runs in each child process)
    #[command(hide = true)]
    ShardReplica {
        #[arg(long)]
        url: String,
        #[arg(long)]
        shard: String,
        #[arg(long)]
        lease_secs: u64,
        #[arg(long)]
        ranges: bool,
    },
    /// JSON against protobuf on a real kube-apiserver (needs KUBEBUILDER_ASSETS): bytes,
    /// one-core decode rates of LIST and watch, and an informer's first sync with each
    Protobuf {
        /// Realistic pods to create
        #[arg(long, default_value_t = 2_000)]
        pods: usize,
        /// Keep the LIST and watch bodies (JSON and protobuf) in this folder
        #[arg(long, value_name = "DIR")]
        save: Option<std::path::PathBuf>,
        /// Measure the decoding of bodies an earlier `--save` kept, without a server
        #[arg(long, value_name = "DIR", conflicts_with = "save")]
        from: Option<std::path::PathBuf>,
    },
    /// A controller shared by tenants: one namespace's burst against the others' single
    /// changes, fairness off and on: the burst's throughput and the quiet changes' latency
    Fairness {
        /// ConfigMaps the bulk tenant creates at once
        #[arg(long, default_value_t = 5_000)]
        burst: usize,
        /// Quiet tenants (namespaces), each changing one object in turn
        #[arg(long, default_value_t = 20)]
        quiet: usize,
        /// Milliseconds between two quiet changes
        #[arg(long, default_value_t = 50)]
        period_ms: u64,
        /// Milliseconds each reconcile takes
        #[arg(long, default_value_t = 5)]
        work_ms: u64,
        /// Worker counts to measure
        #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
        workers: Vec<usize>,
    },
    /// One fleet controller over many member clusters (fake-apiservers, in this process):
    /// the time to engage them all, memory per member, and reconcile latency with every
    /// member healthy and with one stalled
    Fleet {
        /// Member clusters
        #[arg(long, default_value_t = 20)]
        members: usize,
        /// ConfigMaps in each member
        #[arg(long, default_value_t = 1_000)]
        objects: usize,
        /// The fleet controller's workers
        #[arg(long, default_value_t = 8)]
        workers: usize,
        /// At most this many workers per member
        #[arg(long, default_value_t = 2)]
        per_member: usize,
        /// Changes whose latency is measured, per phase
        #[arg(long, default_value_t = 200)]
        changes: usize,
        /// Milliseconds between two measured changes
        #[arg(long, default_value_t = 10)]
        period_ms: u64,
    },
    /// A fleet under leader election: the leader killed, the standby's takeover with warm
    /// member caches (time, LISTs), against a fleet controller without them
    FleetFailover {
        /// Member clusters
        #[arg(long, default_value_t = 20)]
        members: usize,
        /// ConfigMaps in each member
        #[arg(long, default_value_t = 1_000)]
        objects: usize,
        /// The Lease's duration, in seconds (renewed within half of it)
        #[arg(long, default_value_t = 4)]
        lease_s: u64,
    },
    /// An operator's memory: a ReplicaSet controller owning N pods, typed and compact,
    /// beside the peers' informers of the same pods and the factory's streaming first sync
    /// beside a paged LIST, on one fake-apiserver
    Operator {
        /// Pods in the cluster (100 per ReplicaSet)
        #[arg(long, default_value_t = 50_000)]
        pods: usize,
        /// Runs per client, interleaved (the table shows medians)
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
        runs: u16,
        /// Clients to compare [default: client-node, kube-rs, typed-defaults,
        /// typed-defaults-paged, compact+pb, controller, controller+compact]
        #[arg(long, value_delimiter = ',', value_name = "A,B,...")]
        clients: Option<Vec<Impl>>,
    },
    /// Warm restarts: an informer with a cache directory started cold and then warm (from
    /// its snapshot, after changes while down), each in its own process: time to synced,
    /// client CPU, bytes from the server; realistic pods on fake-apiserver and ConfigMaps
    /// on a real kube-apiserver (KUBEBUILDER_ASSETS)
    WarmRestart {
        /// Realistic pods on fake-apiserver (0: skip)
        #[arg(long, default_value_t = 50_000)]
        pods: usize,
        /// ConfigMaps on the real kube-apiserver (0: skip)
        #[arg(long, default_value_t = 20_000)]
        configmaps: usize,
        /// Cold and warm starts per server (the table shows medians)
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
        runs: u16,
        /// Objects changed while the informer is down, before each warm start
        #[arg(long, default_value_t = 100)]
        changes: usize,
    },
    /// One start of `warm-restart` (what it runs in each child process)
    #[command(hide = true)]
    WarmClient {
        #[arg(long)]
        kind: String,
        #[arg(long)]
        url: Option<String>,
        #[arg(long)]
        kubeconfig: Option<std::path::PathBuf>,
        #[arg(long)]
        dir: std::path::PathBuf,
    },
    /// serde_json against simd-json and sonic-rs on the same pods
    #[cfg(feature = "decoders")]
    Decoders {
        /// Watch events to decode
        #[arg(default_value_t = 20_000)]
        events: usize,
    },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Client {
            client,
            url,
            n,
            m,
            k,
            deletes,
            objects,
        }) => clients::run(&Job {
            client,
            url,
            n,
            m,
            k: k.max(1),
            deletes,
            objects,
        }),
        Some(Command::Sharding {
            pods,
            replicas,
            lease_secs,
            modes,
        }) => sharding::run(&sharding::Plan {
            pods,
            replicas,
            lease: std::time::Duration::from_secs(lease_secs),
            modes,
        }),
        Some(Command::ShardReplica {
            url,
            shard,
            lease_secs,
            ranges,
        }) => sharding::replica::run(&sharding::replica::Replica {
            url,
            shard,
            lease: std::time::Duration::from_secs(lease_secs),
            ranges,
        }),
        Some(Command::Protobuf { pods, save, from }) => match from {
            Some(dir) => protobuf::measure_saved(&dir, pods),
            None => protobuf::run(pods, save.as_deref()),
        },
        Some(Command::Fairness {
            burst,
            quiet,
            period_ms,
            work_ms,
            workers,
        }) => fairness::run(&fairness::Plan {
            burst,
            quiet: quiet.max(1),
            period: std::time::Duration::from_millis(period_ms),
            work: std::time::Duration::from_millis(work_ms),
            workers,
        }),
        Some(Command::Fleet {
            members,
            objects,
            workers,
            per_member,
            changes,
            period_ms,
        }) => fleet::run(&fleet::Plan {
            members: members.max(2),
            objects,
            workers,
            per_member,
            changes,
            period: std::time::Duration::from_millis(period_ms),
        }),
        Some(Command::FleetFailover {
            members,
            objects,
            lease_s,
        }) => failover::run(&failover::Plan {
            members: members.max(1),
            objects,
            lease: std::time::Duration::from_secs(lease_s.max(2)),
        }),
        Some(Command::Operator {
            pods,
            runs,
            clients,
        }) => operator::run(&operator::Plan {
            pods: pods.max(1),
            runs: usize::from(runs),
            clients: clients.unwrap_or_else(|| operator::Plan::CLIENTS.to_vec()),
        }),
        Some(Command::WarmRestart {
            pods,
            configmaps,
            runs,
            changes,
        }) => warm_restart::run(&warm_restart::Plan {
            pods,
            configmaps,
            runs: usize::from(runs),
            changes,
        }),
        Some(Command::WarmClient {
            kind,
            url,
            kubeconfig,
            dir,
        }) => warm_restart::client(&kind, url.as_deref(), kubeconfig.as_deref(), &dir),
        #[cfg(feature = "decoders")]
        Some(Command::Decoders { events }) => decoders::run(events),
        None => orchestrate::run(&plan(cli.plan)),
    };
    if let Err(message) = result {
        eprintln!("informer-bench: {message}");
        std::process::exit(2);
    }
}

fn parse_scenario(value: &str) -> Result<orchestrate::Scenario, String> {
    let parts: Vec<usize> = value
        .split(':')
        .map(|p| p.parse().map_err(|_| format!("{p:?} is not a number")))
        .collect::<Result<_, _>>()?;
    let [n, m, k] = parts[..] else {
        return Err("expected N:M:K".into());
    };
    Ok(orchestrate::Scenario { n, m, k: k.max(1) })
}

fn plan(args: PlanArgs) -> orchestrate::Plan {
    let mut plan = if args.quick {
        orchestrate::Plan::quick()
    } else {
        orchestrate::Plan::full()
    };
    if let Some(runs) = args.runs {
        plan.runs = usize::from(runs);
    }
    if let Some(seed) = args.seed {
        plan.seed = seed;
    }
    if args.coalesced {
        plan.shape = fake_apiserver::replay::WatchShape::Coalesced;
    }
    if let Some(clients) = args.clients {
        plan.clients = clients;
    }
    if !args.scenarios.is_empty() {
        plan.scenarios = args.scenarios;
    }
    if let Some(objects) = args.objects {
        plan.objects = objects;
    }
    plan
}
