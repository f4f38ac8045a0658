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
mod measure;
mod orchestrate;
mod traffic;

use clients::{Impl, Job};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: informer-bench [--runs N] [--quick] [--clients a,b,...] [--seed S] [--scenario N:M:K ...]
       informer-bench client --client NAME --url URL --n N --m M --k K
       informer-bench decoders [EVENTS]   (with --features decoders)

clients: bound, kube-rs, client-node, typed, compact, compact+zstd (default: all;
  client-node needs node and `npm ci --prefix crates/informer-bench/node`)
--quick: smaller scenarios (2k pods + 20k events; 10k pods sync), one run
--scenario N:M:K: N pods, then M watch events to K handlers (repeatable; replaces the defaults)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    #[cfg(feature = "decoders")]
    if args.first().map(String::as_str) == Some("decoders") {
        let events = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(20_000);
        if let Err(message) = decoders::run(events) {
            eprintln!("informer-bench: {message}");
            std::process::exit(2);
        }
        return;
    }
    let result = if args.first().map(String::as_str) == Some("client") {
        parse_job(&args[1..]).and_then(|job| clients::run(&job))
    } else {
        parse_plan(&args).and_then(|plan| orchestrate::run(&plan))
    };
    if let Err(message) = result {
        eprintln!("informer-bench: {message}");
        if message.starts_with("--") || message.contains("flag") || message.contains("argument") {
            eprintln!("\n{USAGE}");
        }
        std::process::exit(2);
    }
}

/// Reads `--name value` pairs.
fn flags(args: &[String]) -> Result<Vec<(&str, Option<&str>)>, String> {
    let mut out = Vec::new();
    let mut it = args.iter().peekable();
    while let Some(arg) = it.next() {
        let name = arg
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {arg:?}"))?;
        let value = match it.peek() {
            Some(v) if !v.starts_with("--") => it.next().map(String::as_str),
            _ => None,
        };
        out.push((name, value));
    }
    Ok(out)
}

fn number(name: &str, value: Option<&str>) -> Result<usize, String> {
    value
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("--{name} needs a number"))
}

fn parse_job(args: &[String]) -> Result<Job, String> {
    let mut job = Job {
        client: Impl::Typed,
        url: String::new(),
        n: 0,
        m: 0,
        k: 1,
    };
    for (name, value) in flags(args)? {
        match name {
            "client" => job.client = value.unwrap_or_default().parse()?,
            "url" => job.url = value.unwrap_or_default().to_owned(),
            "n" => job.n = number(name, value)?,
            "m" => job.m = number(name, value)?,
            "k" => job.k = number(name, value)?.max(1),
            _ => return Err(format!("unknown flag --{name}")),
        }
    }
    if job.url.is_empty() {
        return Err("client needs --url".into());
    }
    Ok(job)
}

fn parse_plan(args: &[String]) -> Result<orchestrate::Plan, String> {
    let mut plan = if args.iter().any(|a| a == "--quick") {
        orchestrate::Plan::quick()
    } else {
        orchestrate::Plan::full()
    };
    let mut runs = None;
    let mut custom = false;
    for (name, value) in flags(args)? {
        match name {
            "runs" => runs = Some(number(name, value)?.max(1)),
            "quick" => {}
            "seed" => plan.seed = number(name, value)? as u64,
            "clients" => {
                plan.clients = value
                    .unwrap_or_default()
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?;
            }
            "scenario" => {
                let parts: Vec<usize> = value
                    .unwrap_or_default()
                    .split(':')
                    .map(|p| p.parse().map_err(|_| "--scenario needs N:M:K".to_owned()))
                    .collect::<Result<_, _>>()?;
                let [n, m, k] = parts[..] else {
                    return Err("--scenario needs N:M:K".into());
                };
                if !custom {
                    plan.scenarios.clear();
                    custom = true;
                }
                plan.scenarios
                    .push(orchestrate::Scenario { n, m, k: k.max(1) });
            }
            "help" => return Err("help".into()),
            _ => return Err(format!("unknown flag --{name}")),
        }
    }
    if let Some(runs) = runs {
        plan.runs = runs;
    }
    Ok(plan)
}
