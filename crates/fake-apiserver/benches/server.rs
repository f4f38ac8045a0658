//! fake-apiserver throughput over loopback HTTP: a LIST of 100k realistic pods, and a watch
//! fan-out of 100k events to 10 watchers. The clients only count bytes and lines, so the
//! server is what is measured.
//!
//! `cargo bench -p fake-apiserver --bench server` (`-- --quick` for 10k pods/events)

use std::time::{Duration, Instant};

use bytes::Bytes;
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, fixtures::realistic_pod};
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::json;

/// GETs `uri`, reading the body as it streams; returns (bytes, newlines) once `lines` lines
/// were read (or the body ended).
async fn read(addr: std::net::SocketAddr, uri: String, lines: usize) -> (u64, usize) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get(uri)
        .header("host", "127.0.0.1")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let mut body = sender.send_request(req).await.unwrap().into_body();
    let (mut bytes, mut newlines) = (0u64, 0usize);
    while newlines < lines {
        let Some(frame) = body.frame().await else {
            break;
        };
        if let Ok(data) = frame.unwrap().into_data() {
            bytes += data.len() as u64;
            newlines += data.iter().filter(|b| **b == b'\n').count();
        }
    }
    (bytes, newlines)
}

fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 10_000 } else { 100_000 };
    let watchers = 10;
    let pods = Gvr::core("pods");

    let server = FakeApiServer::start(ServerConfig::default().history_window(10 * n as u64))
        .await
        .unwrap();
    let started = Instant::now();
    server.seed(&pods, (0..n).map(realistic_pod)).unwrap();
    let seeded = started.elapsed();
    let sample = server
        .get(&pods, Some("team-1"), "web-000001-7d9c5b8f6-x2k4p")
        .unwrap();
    let pod_bytes = serde_json::to_vec(&sample).unwrap().len();
    println!(
        "seeded {n} pods of ~{pod_bytes} bytes JSON in {seeded:.2?} ({:.0} creates/s)",
        n as f64 / seeded.as_secs_f64()
    );

    // LIST: the whole collection, unpaged (rv=0) and paged by 500 as informers do.
    for round in 0..3 {
        let t = Instant::now();
        let (bytes, _) = read(
            server.addr(),
            "/api/v1/pods?resourceVersion=0".into(),
            usize::MAX,
        )
        .await;
        let elapsed = t.elapsed();
        println!(
            "LIST {n} pods (one response): {:.1} MB in {elapsed:.2?} = {:.0} MB/s  [round {round}]",
            bytes as f64 / 1e6,
            mb_per_s(bytes, elapsed)
        );
    }
    let t = Instant::now();
    let mut total = 0u64;
    let mut uri = "/api/v1/pods?limit=500".to_owned();
    // One keep-alive connection for all pages, as a client would.
    let stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    loop {
        sender.ready().await.unwrap();
        let req = Request::get(&uri)
            .header("host", "127.0.0.1")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let body = sender
            .send_request(req)
            .await
            .unwrap()
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes();
        total += body.len() as u64;
        // Only the small metadata head is parsed, to find the continue token.
        let head = &body[..body.len().min(400)];
        let head = String::from_utf8_lossy(head);
        match head
            .split("\"continue\":\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
        {
            Some(token) => uri = format!("/api/v1/pods?limit=500&continue={token}"),
            None => break,
        }
    }
    let elapsed = t.elapsed();
    println!(
        "LIST {n} pods in pages of 500: {:.1} MB in {elapsed:.2?} = {:.0} MB/s",
        total as f64 / 1e6,
        mb_per_s(total, elapsed)
    );

    // WATCH fan-out: n modifications, then `watchers` watches replay them from before.
    let from = server.resource_version();
    let t = Instant::now();
    for i in 0..n {
        let name = format!("web-{i:06}-7d9c5b8f6-x2k4p");
        server
            .patch(
                &pods,
                Some(&format!("team-{}", i % 50)),
                &name,
                json!({"metadata": {"labels": {"rev": "2"}}}),
            )
            .unwrap();
    }
    println!("{n} updates committed in {:.2?}", t.elapsed());
    let t = Instant::now();
    let readers: Vec<_> = (0..watchers)
        .map(|_| {
            tokio::spawn(read(
                server.addr(),
                format!("/api/v1/pods?watch=1&resourceVersion={from}"),
                n,
            ))
        })
        .collect();
    let mut bytes = 0;
    for r in readers {
        let (b, lines) = r.await.unwrap();
        assert_eq!(lines, n, "a watcher missed events");
        bytes += b;
    }
    let elapsed = t.elapsed();
    println!(
        "WATCH fan-out: {n} events x {watchers} watchers = {} events, {:.1} MB in {elapsed:.2?} = {:.0} MB/s, {:.0} events/s",
        n * watchers,
        bytes as f64 / 1e6,
        mb_per_s(bytes, elapsed),
        (n * watchers) as f64 / elapsed.as_secs_f64()
    );
    server.shutdown().await;
}
