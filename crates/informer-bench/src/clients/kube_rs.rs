//! The kube-rs peer as its users write it: `watcher` + `reflector` store, with the events
//! fanned out to K handler tasks over channels.

use std::{sync::Arc, time::Instant};

use futures_util::StreamExt;
use kube::{
    Api,
    runtime::{WatchStreamExt, reflector, watcher},
};
use tokio::sync::mpsc;

use kube_informer_runtime::controller::Watchable;

use super::{Call, Counters, Job};

pub(super) async fn run<K: Watchable>(job: &Job) -> Result<(Instant, Instant), String> {
    let api: Api<K> = Api::all(super::client(&job.url)?);
    let (reader, writer) = reflector::store();
    let counters = Counters::new(job.k);
    let mut senders = Vec::with_capacity(job.k);
    // More than one handler: each its own task, fed through a channel (kube-rs has no
    // handler registry; this is how its users fan a stream out).
    for handler in (0..job.k).filter(|_| job.k > 1) {
        let (tx, mut rx) = mpsc::unbounded_channel::<Arc<watcher::Event<K>>>();
        senders.push(tx);
        let counters = counters.clone();
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                let Some((pod, call)) = classify(&event) else {
                    continue;
                };
                std::hint::black_box(pod.meta().name.as_deref());
                counters.hit(handler, call);
            }
        });
    }
    let stream = watcher(api, watcher::Config::default()).reflect(writer);
    let inline = counters.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                // One handler: handled where the stream is read, as a kube-rs user with one
                // consumer writes it (no channel hop; the fairest case for kube-rs).
                Ok(event) if senders.is_empty() => {
                    if let Some((pod, call)) = classify(&event) {
                        std::hint::black_box(pod.meta().name.as_deref());
                        inline.hit(0, call);
                    }
                }
                Ok(event) => {
                    let event = Arc::new(event);
                    for tx in &senders {
                        let _ = tx.send(event.clone());
                    }
                }
                Err(e) => eprintln!("kube-rs watcher: {e}"),
            }
        }
    });
    reader.wait_until_ready().await.map_err(|e| e.to_string())?;
    let synced = Instant::now();
    counters.wait_all(job.n + job.m).await;
    let done = Instant::now();
    counters.check_exact(job).await?;
    Ok((synced, done))
}

/// The object an event carries and what a handler is called for.
fn classify<K>(event: &watcher::Event<K>) -> Option<(&K, Call)> {
    match event {
        watcher::Event::InitApply(pod) => Some((pod, Call::Initial)),
        watcher::Event::Apply(pod) => Some((pod, Call::Applied)),
        watcher::Event::Delete(pod) => Some((pod, Call::Deleted)),
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}
