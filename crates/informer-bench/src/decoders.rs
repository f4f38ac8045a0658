//! `informer-bench decoders`: one core decoding the benchmark's watch lines into
//! `WatchEvent<Pod>` with serde_json, sonic-rs and simd-json (and into compact objects with
//! serde_json), best of three passes.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::WatchEvent;
use kube_informer::compact::Compact;

use crate::traffic;

fn best_of_three(lines: &[Vec<u8>], mut decode: impl FnMut(&[u8]) -> bool) -> Duration {
    (0..3)
        .map(|_| {
            let started = Instant::now();
            for line in lines {
                assert!(decode(line), "a line did not decode");
            }
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Prints events/s and MB/s per decoder.
pub(crate) fn run(events: usize) -> Result<(), String> {
    let traffic = traffic::render_objects(traffic::Objects::Pods, 1000, events, 8);
    let lines: Vec<Vec<u8>> = traffic.events.iter().map(|e| e.line.to_vec()).collect();
    let bytes: usize = lines.iter().map(Vec::len).sum();
    let report = |name: &str, took: Duration| {
        println!(
            "| {name} | {:.0} | {:.0} |",
            lines.len() as f64 / took.as_secs_f64(),
            bytes as f64 / took.as_secs_f64() / 1e6
        );
    };
    println!("| decoder, one core | events/s | MB/s |\n|---|---:|---:|");
    report(
        "serde_json (from_slice) → WatchEvent<Pod>",
        best_of_three(&lines, |l| {
            serde_json::from_slice::<WatchEvent<Pod>>(l).is_ok()
        }),
    );
    report(
        "serde_json, UTF-8 checked once (from_str) → WatchEvent<Pod>",
        best_of_three(&lines, |l| {
            std::str::from_utf8(l).is_ok_and(|t| serde_json::from_str::<WatchEvent<Pod>>(t).is_ok())
        }),
    );
    report(
        "sonic-rs → WatchEvent<Pod>",
        best_of_three(&lines, |l| {
            sonic_rs::from_slice::<WatchEvent<Pod>>(l).is_ok()
        }),
    );
    let mut scratch = Vec::new();
    report(
        "simd-json → WatchEvent<Pod>",
        best_of_three(&lines, |l| {
            scratch.clear();
            scratch.extend_from_slice(l);
            simd_json::serde::from_slice::<WatchEvent<Pod>>(&mut scratch).is_ok()
        }),
    );
    report(
        "serde_json → WatchEvent<Compact<Pod>>",
        best_of_three(&lines, |l| {
            serde_json::from_slice::<WatchEvent<Compact<Pod>>>(l).is_ok()
        }),
    );
    Ok(())
}
