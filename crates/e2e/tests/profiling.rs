//! `/debug/pprof/profile` on a manager's metrics port (feature `profiling`, opted in with
//! `ManagerOptions::profiling`): a CPU profile in pprof's protobuf format, as `go tool pprof`
//! reads it, with the functions that burned the CPU in it; bad lengths refused; a profile
//! whose client went away ended at once; and nothing served without the option. (Behind secure metrics: secure_metrics_real.rs.)

use std::time::{Duration, Instant};

use fake_apiserver::{FakeApiServer, ServerConfig};
use kube_informer_runtime::{CancellationToken, Manager, ManagerOptions};
use pprof::protos::{Message as _, Profile};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    task::JoinSet,
};

/// `GET path`: the status and the body.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let code = std::str::from_utf8(&response[9..12])
        .unwrap()
        .parse()
        .unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    (code, response[split + 4..].to_vec())
}

/// Spins until `until`, in a function a profile can name.
#[inline(never)]
fn burn_cpu_for_the_profile(until: Instant) -> u64 {
    let mut x = 1u64;
    while Instant::now() < until {
        for i in 0..10_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
        }
    }
    x
}

async fn manager(
    server: &FakeApiServer,
    options: ManagerOptions,
) -> (std::net::SocketAddr, JoinSet<()>, CancellationToken) {
    let manager = Manager::new(server.client().unwrap(), options)
        .await
        .unwrap();
    let mut endpoints = manager.endpoints();
    let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
    let mut running = JoinSet::new();
    let stop = graceful.clone();
    running.spawn(async move { manager.run_until(graceful, force).await.unwrap() });
    let addr = endpoints.wait_for(Option::is_some).await.unwrap().unwrap();
    (addr, running, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_profile_in_pprof_format_names_the_busy_function() {
    let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
    let (addr, mut running, stop) =
        manager(&server, ManagerOptions::for_tests().profiling(true)).await;

    let (code, body) = get(addr, "/debug/pprof/profile?seconds=0").await;
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    // A thread busy through the whole profile.
    let until = Instant::now() + Duration::from_secs(3);
    let busy = std::thread::spawn(move || burn_cpu_for_the_profile(until));
    let (code, body) = get(addr, "/debug/pprof/profile?seconds=2").await;
    busy.join().unwrap();
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let profile = Profile::decode(&body[..]).expect("a pprof protobuf");
    let text = |i: i64| profile.string_table[usize::try_from(i).unwrap()].as_str();
    let types: Vec<(&str, &str)> = profile
        .sample_type
        .iter()
        .map(|t| (text(t.ty), text(t.unit)))
        .collect();
    // As Go's CPU profiles: samples, and CPU time.
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert!(!profile.sample.is_empty(), "no samples");
    assert!(
        profile
            .string_table
            .iter()
            .any(|s| s.contains("burn_cpu_for_the_profile")),
        "the busy function is not in the profile"
    );

    // A client that goes away mid-profile ends it: the next profile may start at once,
    // not five minutes later (the profiling thread outlived its request before).
    let abandoned = loop {
        let mut abandoned = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = "GET /debug/pprof/profile?seconds=300 HTTP/1.1\r\nHost: x\r\n\r\n";
        abandoned.write_all(request.as_bytes()).await.unwrap();
        let mut answer = [0u8; 64];
        tokio::select! {
            // Answered at once: a probe held the slot first (409). Ask again.
            _ = abandoned.read(&mut answer) => {}
            // Probes refused: the 300 s profile holds the slot.
            () = until_code(addr, 409, "the 300 s profile running") => break abandoned,
        }
    };
    drop(abandoned);
    until_code(addr, 200, "a new profile once the abandoned one ended").await;

    stop.cancel();
    running.join_next().await.unwrap().unwrap();
}

/// Asks for a one-second profile until one is answered `code` (a hang guard of a minute).
async fn until_code(addr: std::net::SocketAddr, code: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if get(addr, "/debug/pprof/profile?seconds=1").await.0 == code {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

#[tokio::test]
async fn without_the_option_no_profile_is_served() {
    let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
    let (addr, mut running, stop) = manager(&server, ManagerOptions::for_tests()).await;
    let (code, _) = get(addr, "/debug/pprof/profile?seconds=1").await;
    assert_eq!(code, 404);
    stop.cancel();
    running.join_next().await.unwrap().unwrap();
}
