//! The decode-only bound: the same requests through kube's client, every object decoded
//! into its type (a `Pod`, or the custom resource) and dropped at once; no cache, no
//! handlers.

use std::time::Instant;

use futures_util::StreamExt;
use kube::{
    Api,
    api::{ListParams, WatchEvent, WatchParams},
};

use kube_informer_runtime::controller::Watchable;

use super::Job;

pub(super) async fn run<K: Watchable>(job: &Job) -> Result<(Instant, Instant), String> {
    let api: Api<K> = Api::all(super::client(&job.url)?);
    let mut params = ListParams::default().limit(500);
    let mut listed = 0;
    let resource_version = loop {
        let page = api.list(&params).await.map_err(|e| e.to_string())?;
        listed += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break page.metadata.resource_version.unwrap_or_default(),
        }
    };
    if listed != job.n {
        return Err(format!("listed {listed} objects, expected {}", job.n));
    }
    let synced = Instant::now();
    let mut seen = 0;
    if job.m > 0 {
        let params = WatchParams::default();
        let mut stream = api
            .watch(&params, &resource_version)
            .await
            .map_err(|e| e.to_string())?
            .boxed();
        while seen < job.m {
            match stream.next().await {
                Some(Ok(
                    WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_),
                )) => {
                    seen += 1;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.to_string()),
                None => return Err(format!("watch ended after {seen} events")),
            }
        }
    }
    Ok((synced, Instant::now()))
}
