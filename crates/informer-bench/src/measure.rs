//! What a client process reports about itself: peak resident memory, CPU time and context
//! switches (Linux `/proc`), read just before it exits.

use std::time::Duration;

/// Peak resident set size of this process (`VmHWM`), in KiB.
pub(crate) fn peak_rss_kib() -> u64 {
    status_field("VmHWM:")
}

/// Resident set size of this process now (`VmRSS`), in KiB.
pub(crate) fn rss_kib() -> u64 {
    status_field("VmRSS:")
}

fn status_field(name: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of this process so far.
pub(crate) fn cpu_time() -> Duration {
    // Fields 14 and 15 of /proc/self/stat, after the parenthesised command name, in clock
    // ticks; the kernel's ABI fixes USER_HZ at 100 ticks per second.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// Context switches (voluntary and not) of this process's threads so far: the sum over
/// `/proc/self/task/*/status` (threads that have exited are not counted; the clients' keep
/// theirs to the end).
pub(crate) fn context_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .map(|status| {
            status
                .lines()
                .filter(|l| {
                    l.starts_with("voluntary_ctxt_switches:")
                        || l.starts_with("nonvoluntary_ctxt_switches:")
                })
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}
