//! The WATCH path: opening watches within a deadline, feeding their events into the sink,
//! and deciding after each one ends whether to resume, back off or relist.

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt;
use kube::{
    Resource,
    api::{WatchEvent, WatchParams},
    core::Status,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    ListFrom, Reflector, ReflectorError, Run, Stop,
    error::{Reaction, react, react_to_status},
};
use crate::{
    KeyError,
    fifo::DeltaSink,
    list_watch::{ListerWatcher, WatchStream},
};

/// What opening a watch gave.
pub(super) enum Opened<K> {
    Stream(WatchStream<K>),
    Cancelled,
    /// No response headers within the deadline (already reported).
    TimedOut,
    /// The request failed (not reported yet: the caller knows how to word it).
    Failed(kube::Error),
}

/// What waiting on a watch stream gave.
pub(super) enum Next<K> {
    Cancelled,
    /// Nothing for longer than the idle limit (already reported).
    Idle,
    /// The stream ended.
    Ended,
    /// The stream broke (already reported).
    Broke,
    Event(WatchEvent<K>),
}

/// How one watch ended.
enum WatchEnd {
    Cancelled,
    Closed { events: usize },
    Gone,
    TooLarge,
    Failed(Reaction),
    Idle,
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// Opens a watch from `resource_version`, within the open deadline.
    pub(super) async fn open_watch(
        &self,
        cancel: &CancellationToken,
        params: &WatchParams,
        resource_version: &str,
    ) -> Opened<K> {
        #[cfg(feature = "metrics")]
        self.metric(|m, name| m.watch_started(name));
        let limit = self.options.watch_open_timeout;
        let opened = tokio::select! {
            () = cancel.cancelled() => return Opened::Cancelled,
            opened = tokio::time::timeout(limit, self.lw.watch(params, resource_version)) => opened,
        };
        match opened {
            Ok(Ok(stream)) => {
                self.shared.health.lock().watching = true;
                self.heard.reached_server();
                Opened::Stream(stream)
            }
            Ok(Err(source)) => Opened::Failed(source),
            Err(_) => {
                self.report(ReflectorError::Timeout {
                    resource: self.name.clone(),
                    request: "WATCH",
                    after: limit,
                });
                Opened::TimedOut
            }
        }
    }

    pub(super) fn status_error(&self, status: &Status) -> ReflectorError {
        ReflectorError::WatchStatus {
            resource: self.name.clone(),
            code: status.code,
            reason: status.reason.clone(),
            message: status.message.clone(),
        }
    }

    /// The next event of `stream`, unless cancelled, idle for too long, ended or broken
    /// (the last two reported).
    pub(super) async fn next_event(
        &self,
        cancel: &CancellationToken,
        stream: &mut WatchStream<K>,
    ) -> Next<K> {
        let next = tokio::select! {
            () = cancel.cancelled() => return Next::Cancelled,
            next = tokio::time::timeout(self.options.idle_timeout, stream.next()) => next,
        };
        let next = match next {
            Err(_) => {
                let idle = self.options.idle_timeout;
                self.report(ReflectorError::Idle {
                    resource: self.name.clone(),
                    idle,
                });
                Next::Idle
            }
            Ok(None) => Next::Ended,
            Ok(Some(Err(source))) => {
                self.report(ReflectorError::Watch {
                    resource: self.name.clone(),
                    source,
                });
                Next::Broke
            }
            Ok(Some(Ok(event))) => return Next::Event(event),
        };
        self.shared.health.lock().watching = false;
        next
    }

    /// Watches from the synced version until a relist is needed.
    pub(super) async fn watch_loop(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
        mut next: Option<WatchStream<K>>,
    ) -> Stop {
        loop {
            let started = Instant::now();
            let (stream, asked) = match next.take() {
                Some(stream) => (stream, self.options.watch_timeout.0),
                None => {
                    if let Err(stop) = self.nudge_catching_up(cancel, run).await {
                        return stop;
                    }
                    let params = self.watch_params(run, false);
                    let asked = Duration::from_secs(params.timeout.map_or(0, u64::from));
                    match self
                        .open_watch(cancel, &params, &run.resource_version)
                        .await
                    {
                        Opened::Stream(stream) => (stream, asked),
                        Opened::Cancelled => return Stop::Cancelled,
                        Opened::TimedOut => match self.wait_for(cancel, run, Reaction::Retry).await
                        {
                            Stop::Cancelled => return Stop::Cancelled,
                            Stop::Resync => continue,
                        },
                        Opened::Failed(source) => {
                            let reaction = react(&source);
                            self.report(ReflectorError::Watch {
                                resource: self.name.clone(),
                                source,
                            });
                            match reaction {
                                Reaction::Gone => {
                                    return self.wait_for(cancel, run, Reaction::Retry).await;
                                }
                                Reaction::TooLarge => {
                                    run.list_from = ListFrom::Consistent;
                                    return self.wait_for(cancel, run, Reaction::Retry).await;
                                }
                                other => match self.wait_for(cancel, run, other).await {
                                    Stop::Cancelled => return Stop::Cancelled,
                                    Stop::Resync => continue,
                                },
                            }
                        }
                    }
                }
            };
            let end = self.consume(cancel, stream, run).await;
            #[cfg(feature = "metrics")]
            self.metric(|m, name| {
                let reason = match &end {
                    WatchEnd::Cancelled => return,
                    WatchEnd::Closed { .. } => "closed",
                    WatchEnd::Gone => "gone",
                    WatchEnd::TooLarge => "too_large",
                    WatchEnd::Failed(_) => "error",
                    WatchEnd::Idle => "idle",
                };
                m.watch_ended(name, reason);
            });
            let reaction = match end {
                WatchEnd::Cancelled => return Stop::Cancelled,
                // Relist (at the last synced version, or consistently), after the backoff
                // as client-go does between list-and-watch cycles: a server answering every
                // watch with a 410 is not relisted in a hot loop.
                WatchEnd::Gone => return self.wait_for(cancel, run, Reaction::Retry).await,
                WatchEnd::TooLarge => {
                    run.list_from = ListFrom::Consistent;
                    return self.wait_for(cancel, run, Reaction::Retry).await;
                }
                WatchEnd::Idle => continue,
                WatchEnd::Closed { events } => {
                    let elapsed = started.elapsed();
                    let short = self.options.short_watch.min(asked / 2);
                    if elapsed >= short {
                        continue; // a watch that lasted: resume at once
                    }
                    self.report(ReflectorError::EarlyWatchEnd {
                        resource: self.name.clone(),
                        elapsed,
                        events,
                    });
                    Reaction::Retry
                }
                WatchEnd::Failed(reaction) => reaction,
            };
            if let Stop::Cancelled = self.wait_for(cancel, run, reaction).await {
                return Stop::Cancelled;
            }
        }
    }

    /// Feeds one watch into the sink until it ends.
    async fn consume(
        &self,
        cancel: &CancellationToken,
        mut stream: WatchStream<K>,
        run: &mut Run,
    ) -> WatchEnd {
        let mut events = 0;
        loop {
            // Backpressure: while the queue is full, read nothing more. The decoder stops
            // pulling the body, the socket's receive window closes and the API server holds
            // the events (it may end a watch that stays blocked: that is resumed as usual).
            if let Some(room) = self.sink.full() {
                let waited = Instant::now();
                tokio::select! {
                    () = cancel.cancelled() => return WatchEnd::Cancelled,
                    () = room => {}
                }
                #[cfg(feature = "metrics")]
                self.metric(|m, name| m.held_back(name, waited.elapsed().as_secs_f64()));
                #[cfg(not(feature = "metrics"))]
                let _ = waited;
            }
            let event = match self.next_event(cancel, &mut stream).await {
                Next::Cancelled => return WatchEnd::Cancelled,
                Next::Idle => return WatchEnd::Idle,
                Next::Ended => return WatchEnd::Closed { events },
                Next::Broke => return WatchEnd::Failed(Reaction::Retry),
                Next::Event(event) => event,
            };
            self.shared.health.lock().heard();
            match event {
                WatchEvent::Added(obj) => self.deliver(run, obj, |sink, o| sink.add(o)),
                WatchEvent::Modified(obj) => self.deliver(run, obj, |sink, o| sink.update(o)),
                WatchEvent::Deleted(obj) => self.deliver(run, obj, |sink, o| sink.delete(o)),
                WatchEvent::Bookmark(bookmark) => {
                    let rv = bookmark.metadata.resource_version;
                    if self.usable(&rv, "bookmark") {
                        self.heard.heard(&rv, true);
                        self.sink.bookmark(&rv);
                        self.set_synced(run, rv);
                    }
                    continue;
                }
                WatchEvent::Error(status) => {
                    self.report(self.status_error(&status));
                    let too_large = status.message.contains("Too large resource version");
                    let retry_after = status.details.as_ref().map_or(0, |d| d.retry_after_seconds);
                    return match react_to_status(
                        status.code,
                        &status.reason,
                        too_large,
                        retry_after,
                    ) {
                        Reaction::Gone => WatchEnd::Gone,
                        Reaction::TooLarge => WatchEnd::TooLarge,
                        other => WatchEnd::Failed(other),
                    };
                }
            }
            events += 1;
        }
    }

    /// Queues one watched object with `push`, then advances the version to its own.
    fn deliver(
        &self,
        run: &mut Run,
        obj: K,
        push: impl FnOnce(&dyn DeltaSink<K>, Arc<K>) -> Result<(), KeyError>,
    ) {
        let resource_version = obj.meta().resource_version.clone().unwrap_or_default();
        self.heard.heard(&resource_version, false);
        if !self.in_share(&obj) {
            // Not this reflector's (a server that ignored the shard selector): never
            // cached, but the watch has read past it.
            if self.usable(&resource_version, "watch event") {
                self.set_synced(run, resource_version);
            }
            return;
        }
        if let Err(source) = push(self.sink.as_ref(), Arc::new(obj)) {
            self.report(ReflectorError::InvalidObject {
                resource: self.name.clone(),
                source,
            });
            return;
        }
        if self.usable(&resource_version, "watch event") {
            self.set_synced(run, resource_version);
        }
    }
}
