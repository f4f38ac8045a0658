//! The Prometheus `process_*` metrics every dashboard starts with, named as the Go and
//! Python clients name them, read from `/proc/self` at each scrape (Linux; elsewhere none
//! are exported). A [`Manager`](crate::manager::Manager) registers them.
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `process_cpu_seconds_total` | counter | user and system CPU time spent |
//! | `process_resident_memory_bytes` | gauge | resident memory (RSS) |
//! | `process_virtual_memory_bytes` | gauge | virtual memory size |
//! | `process_open_fds` | gauge | open file descriptors |
//! | `process_max_fds` | gauge | the soft limit of open file descriptors |
//! | `process_start_time_seconds` | gauge | when the process started, in Unix seconds |
//! | `process_threads` | gauge | OS threads |
//!
//! ```
//! use prometheus_client::registry::Registry;
//! use kube_informer_runtime::process_metrics;
//!
//! let mut registry = Registry::default();
//! process_metrics::register(&mut registry);
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
//! # #[cfg(target_os = "linux")]
//! assert!(text.contains("process_resident_memory_bytes "));
//! ```

use prometheus_client::registry::Registry;

/// Registers the `process_*` metrics in `registry` (on Linux; a no-op elsewhere).
pub fn register(registry: &mut Registry) {
    #[cfg(target_os = "linux")]
    registry.register_collector(Box::new(linux::Process));
    #[cfg(not(target_os = "linux"))]
    let _ = registry;
}

#[cfg(target_os = "linux")]
mod linux {
    use prometheus_client::{
        collector::Collector,
        encoding::{DescriptorEncoder, EncodeMetric},
        metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    };

    /// Reads `/proc/self` when scraped.
    #[derive(Debug)]
    pub(super) struct Process;

    /// What one scrape read; a file that could not be read leaves its metric out.
    #[derive(Default)]
    struct Read {
        cpu_seconds: Option<f64>,
        resident: Option<f64>,
        virtual_size: Option<f64>,
        open_fds: Option<f64>,
        max_fds: Option<f64>,
        start_time: Option<f64>,
        threads: Option<f64>,
    }

    fn read() -> Read {
        let Ok(me) = procfs::process::Process::myself() else {
            return Read::default();
        };
        let mut read = Read::default();
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second() as f64;
            read.cpu_seconds = Some((stat.utime + stat.stime) as f64 / ticks);
            read.resident = Some((stat.rss * procfs::page_size()) as f64);
            read.virtual_size = Some(stat.vsize as f64);
            read.threads = Some(stat.num_threads as f64);
            read.start_time = procfs::boot_time_secs()
                .ok()
                .map(|boot| boot as f64 + stat.starttime as f64 / ticks);
        }
        read.open_fds = me.fd_count().ok().map(|n| n as f64);
        read.max_fds = me
            .limits()
            .ok()
            .and_then(|l| match l.max_open_files.soft_limit {
                procfs::process::LimitValue::Value(v) => Some(v as f64),
                procfs::process::LimitValue::Unlimited => None,
            });
        read
    }

    impl Collector for Process {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let read = read();
            if let Some(seconds) = read.cpu_seconds {
                let counter = ConstCounter::new(seconds);
                let help = "Total user and system CPU time spent in seconds";
                let metric = encoder.encode_descriptor(
                    "process_cpu_seconds",
                    help,
                    None,
                    MetricType::Counter,
                )?;
                counter.encode(metric)?;
            }
            let gauges = [
                (
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes",
                    read.resident,
                ),
                (
                    "process_virtual_memory_bytes",
                    "Virtual memory size in bytes",
                    read.virtual_size,
                ),
                (
                    "process_open_fds",
                    "Number of open file descriptors",
                    read.open_fds,
                ),
                (
                    "process_max_fds",
                    "Maximum number of open file descriptors",
                    read.max_fds,
                ),
                (
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds",
                    read.start_time,
                ),
                ("process_threads", "Number of OS threads", read.threads),
            ];
            for (name, help, value) in gauges {
                if let Some(value) = value {
                    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                    ConstGauge::new(value).encode(metric)?;
                }
            }
            Ok(())
        }
    }
}
