//! The streaming-list path: a WATCH with `sendInitialEvents=true`, its initial state
//! collected aside until the `k8s.io/initial-events-end` bookmark, then one `replace`.

use std::{collections::HashMap, sync::Arc};

use kube::{Resource, api::WatchEvent};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    ListFrom, Reflector, ReflectorError, Run, Stop,
    error::{Reaction, react, refuses_streaming},
    watch::{Next, Opened},
};
use crate::{
    ObjectKey,
    list_watch::{ListerWatcher, WatchStream},
    meta_namespace_key,
};

/// The annotation on the bookmark that ends a streaming list's initial state.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// A streaming list: the initial state collected aside, replaced at once at the end
    /// bookmark; returns the still-open watch to continue with.
    pub(super) async fn streaming_sync(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
    ) -> Result<Option<WatchStream<K>>, Stop> {
        let from = match run.list_from {
            ListFrom::LastSynced => run.resource_version.clone(),
            _ => String::new(),
        };
        let params = self.watch_params(run, true);
        let mut stream = match self.open_watch(cancel, &params, &from).await {
            Opened::Stream(stream) => stream,
            Opened::Cancelled => return Err(Stop::Cancelled),
            Opened::TimedOut => return Err(self.wait_for(cancel, run, Reaction::Retry).await),
            Opened::Failed(source) => {
                if let kube::Error::Api(status) = &source
                    && refuses_streaming(status.code, &status.message)
                {
                    return Err(self.refused(run, source.to_string()));
                }
                let reaction = react(&source);
                if matches!(reaction, Reaction::Gone | Reaction::TooLarge) {
                    run.list_from = ListFrom::Consistent;
                }
                self.report(ReflectorError::Watch {
                    resource: self.name.clone(),
                    source,
                });
                return Err(self.wait_for(cancel, run, reaction).await);
            }
        };
        let mut initial: HashMap<ObjectKey, Arc<K>> = HashMap::new();
        loop {
            let event = match self.next_event(cancel, &mut stream).await {
                Next::Cancelled => return Err(Stop::Cancelled),
                Next::Idle => return Err(Stop::Resync),
                Next::Ended => {
                    let reason = "the stream ended before the initial-events-end bookmark";
                    return Err(self.refused(run, reason.into()));
                }
                Next::Broke => return Err(self.wait_for(cancel, run, Reaction::Retry).await),
                Next::Event(event) => event,
            };
            match event {
                WatchEvent::Added(obj) | WatchEvent::Modified(obj) if !self.in_share(&obj) => {}
                WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                    match meta_namespace_key(&obj) {
                        Ok(key) => {
                            initial.insert(key, Arc::new(obj));
                        }
                        Err(source) => self.report(ReflectorError::InvalidObject {
                            resource: self.name.clone(),
                            source,
                        }),
                    }
                }
                WatchEvent::Deleted(obj) => {
                    if let Ok(key) = meta_namespace_key(&obj) {
                        initial.remove(&key);
                    }
                }
                WatchEvent::Bookmark(bookmark) => {
                    self.shared.health.lock().heard();
                    let ended = bookmark
                        .metadata
                        .annotations
                        .get(INITIAL_EVENTS_END)
                        .is_some_and(|v| v == "true");
                    if !ended {
                        continue;
                    }
                    let rv = bookmark.metadata.resource_version;
                    if !self.usable(&rv, "initial-events-end bookmark") {
                        let reason = format!("the initial-events-end bookmark had version {rv:?}");
                        return Err(self.refused(run, reason));
                    }
                    // kube-apiserver 1.36 echoes no shard selector on watches: a streaming
                    // list never confirms one.
                    self.check_echo(None, None);
                    self.replace(initial.into_values().collect(), &rv);
                    self.synced(run, rv);
                    return Ok(Some(stream));
                }
                WatchEvent::Error(status) => {
                    if refuses_streaming(status.code, &status.message) {
                        let reason =
                            format!("{} {}: {}", status.code, status.reason, status.message);
                        return Err(self.refused(run, reason));
                    }
                    self.report(self.status_error(&status));
                    let retry_after = status.details.as_ref().map_or(0, |d| d.retry_after_seconds);
                    let reaction = super::error::react_to_status(
                        status.code,
                        &status.reason,
                        status.message.contains("Too large resource version"),
                        retry_after,
                    );
                    if matches!(reaction, Reaction::Gone | Reaction::TooLarge) {
                        run.list_from = ListFrom::Consistent;
                    }
                    return Err(self.wait_for(cancel, run, reaction).await);
                }
            }
        }
    }

    /// The server refused a streaming list: this sync uses a LIST (at once), and streaming
    /// is tried again after the retry period.
    fn refused(&self, run: &mut Run, reason: String) -> Stop {
        run.streaming_refused = Some(Instant::now());
        self.report(ReflectorError::StreamingListUnsupported {
            resource: self.name.clone(),
            reason,
        });
        Stop::Resync
    }
}
