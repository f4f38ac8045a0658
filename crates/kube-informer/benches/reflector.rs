//! Time from start to synced for 10k and 100k realistic pods served by fake-apiserver, through
//! reflector -> RealFifo -> store, by streaming list and by LIST; compared with a decode-only
//! baseline (serde_json decoding the same watch bytes into `Pod`s on one core).
//!
//! `cargo bench -p kube-informer --bench reflector` (`-- --quick`: 10k pods only)

use std::{
    convert::Infallible,
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, fixtures::realistic_pod};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::WatchEvent};
use kube_informer::{
    Store,
    fifo::{DeltaQueue, ProcessError, RealFifo},
    informer::apply_deltas,
    reflector::{Reflector, ReflectorOptions},
};
use tokio_util::sync::CancellationToken;

/// Runs a reflector until the store holds `n` pods; returns the time it took.
async fn sync(server: &FakeApiServer, n: usize, streaming: bool) -> Duration {
    let store: Store<Pod> = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store.clone())));
    let api: Api<Pod> = Api::all(server.client().unwrap());
    let reflector = Reflector::new(
        api,
        fifo.clone(),
        ReflectorOptions::default().streaming_lists(streaming),
    );
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    // The informer's part: apply what is popped.
    while store.len() < n {
        fifo.pop(|deltas, initial| {
            apply_deltas(&store, deltas, initial);
            Ok::<(), ProcessError<Infallible>>(())
        })
        .await
        .unwrap();
    }
    let elapsed = started.elapsed();
    cancel.cancel();
    run.await.unwrap();
    elapsed
}

/// The bytes of a streaming list of everything (what the reflector decodes).
async fn watch_bytes(server: &FakeApiServer, n: usize) -> Vec<u8> {
    let stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let uri = "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
    let req = hyper::Request::get(uri)
        .header("host", "127.0.0.1")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let mut body = sender.send_request(req).await.unwrap().into_body();
    let mut bytes = Vec::new();
    let mut lines = 0;
    while lines <= n {
        let frame = body.frame().await.unwrap().unwrap();
        if let Ok(data) = frame.into_data() {
            lines += data.iter().filter(|b| **b == b'\n').count();
            bytes.extend_from_slice(&data);
        }
    }
    bytes
}

/// Decode-only baseline: each line into a `WatchEvent<Pod>`, on this thread; `keep` keeps
/// the pods (as any cache must) instead of dropping each at once.
fn decode_only(bytes: &[u8], keep: bool) -> (usize, Duration) {
    let started = Instant::now();
    let mut kept = Vec::new();
    let mut pods = 0;
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        if let WatchEvent::Added(pod) = serde_json::from_slice::<WatchEvent<Pod>>(line).unwrap() {
            pods += 1;
            if keep {
                kept.push(pod);
            } else {
                std::hint::black_box(&pod);
            }
        }
    }
    let elapsed = started.elapsed();
    drop(kept);
    (pods, elapsed)
}

/// kube's watch stream alone: decode every event, keep nothing.
async fn kube_stream_only(server: &FakeApiServer, n: usize) -> Duration {
    use futures_util::StreamExt;
    let api: Api<Pod> = Api::all(server.client().unwrap());
    let params = kube::api::WatchParams {
        send_initial_events: true,
        ..Default::default()
    };
    let started = Instant::now();
    let mut stream = api.watch(&params, "").await.unwrap().boxed();
    let mut seen = 0;
    while seen < n {
        if let WatchEvent::Added(pod) = stream.next().await.unwrap().unwrap() {
            std::hint::black_box(pod);
            seen += 1;
        }
    }
    started.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[usize] = if quick { &[10_000] } else { &[10_000, 100_000] };
    for &n in sizes {
        let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
        server
            .seed(&Gvr::core("pods"), (0..n).map(realistic_pod))
            .unwrap();
        let bytes = watch_bytes(&server, n).await;
        let mb = bytes.len() as f64 / 1e6;
        let (decoded, dropped) = decode_only(&bytes, false);
        assert_eq!(decoded, n);
        println!(
            "{n} pods, {mb:.0} MB: decode-only, dropping each pod: {dropped:.2?} = {:.0} pods/s ({:.0} MB/s)",
            n as f64 / dropped.as_secs_f64(),
            mb / dropped.as_secs_f64()
        );
        let (_, base) = decode_only(&bytes, true);
        let base_rate = n as f64 / base.as_secs_f64();
        println!(
            "  decode-only, keeping the pods (the bound for a cache): {base:.2?} = {base_rate:.0} pods/s ({:.0} MB/s)",
            mb / base.as_secs_f64()
        );
        let kube_only = kube_stream_only(&server, n).await;
        println!(
            "  kube's watch stream alone: {kube_only:.2?} = {:.0} pods/s",
            n as f64 / kube_only.as_secs_f64()
        );
        for streaming in [true, false] {
            let took = sync(&server, n, streaming).await;
            let rate = n as f64 / took.as_secs_f64();
            println!(
                "  synced by {}: {took:.2?} = {rate:.0} pods/s, {:.0}% of the decode-only bound",
                if streaming { "streaming list" } else { "LIST" },
                100.0 * rate / base_rate
            );
        }
        server.shutdown().await;
    }
}
