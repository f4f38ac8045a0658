//! The kube-rs peer as its users write it: `watcher` + `reflector` store, with the events
//! fanned out to K handler tasks over channels.

use std::{sync::Arc, time::Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    runtime::{WatchStreamExt, reflector, watcher},
};
use tokio::sync::mpsc;

use super::{Counters, Job};

pub(super) async fn run(job: &Job) -> Result<(Instant, Instant), String> {
    let api: Api<Pod> = Api::all(super::client(&job.url)?);
    let (reader, writer) = reflector::store();
    let counters = Counters::new(job.k);
    let mut senders = Vec::with_capacity(job.k);
    for handler in 0..job.k {
        let (tx, mut rx) = mpsc::unbounded_channel::<Arc<watcher::Event<Pod>>>();
        senders.push(tx);
        let counters = counters.clone();
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                match &*event {
                    watcher::Event::Apply(pod)
                    | watcher::Event::Delete(pod)
                    | watcher::Event::InitApply(pod) => {
                        std::hint::black_box(pod.metadata.name.as_deref());
                        counters.hit(handler);
                    }
                    watcher::Event::Init | watcher::Event::InitDone => {}
                }
            }
        });
    }
    let stream = watcher(api, watcher::Config::default()).reflect(writer);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
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
    Ok((synced, Instant::now()))
}
