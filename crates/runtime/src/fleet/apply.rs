//! How a [`Fleet`] applies its source: engaging members (a client and a factory each),
//! rotating their tokens in place, relabelling them, and disengaging them — a member's
//! informers stopped and awaited beside the event loop, so one slow shutdown never holds
//! back the next member's engagement.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use futures_util::{Stream, StreamExt, future::BoxFuture, stream::FuturesUnordered};
use kube_informer::factory::SharedInformerFactory;
use tokio_util::sync::CancellationToken;

use super::{Cluster, ClusterEvent, Engaged, Fleet, MemberError, member};

/// The timeouts of the clients a fleet makes from kubeconfigs, so that a member whose API
/// server accepts connections and never answers cannot hold a request for ever. A client
/// given from code ([`ClusterEvent::Client`]) keeps its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientTimeouts {
    /// Connecting (TCP and TLS): default 10 s.
    pub connect: Option<Duration>,
    /// Between two reads of a response, counted from the request's last write: default
    /// 190 s, above the informers' watch idle limit (3 minutes) so that a quiet watch is
    /// resumed by its reflector rather than cut by the client. Reconciles have their own,
    /// shorter deadline ([`FleetController`](super::FleetController)).
    pub read: Option<Duration>,
}

impl Default for ClientTimeouts {
    fn default() -> Self {
        Self {
            connect: Some(Duration::from_secs(10)),
            read: Some(Duration::from_secs(190)),
        }
    }
}

impl ClientTimeouts {
    /// Timeouts of `connect` and `read` (`None`: none).
    pub fn new(connect: Option<Duration>, read: Option<Duration>) -> Self {
        Self { connect, read }
    }

    fn apply(self, config: &mut kube::Config) {
        config.connect_timeout = self.connect;
        config.read_timeout = self.read;
        config.reset_reader_on_write = self.read.is_some();
    }
}

/// Members' informers being stopped while the fleet goes on.
type Stopping = FuturesUnordered<BoxFuture<'static, ()>>;

impl Fleet {
    /// Applies `source`'s events until it ends or `cancel`; then disengages every member
    /// (its informers stopped and awaited). A disengaged member's informers stop beside
    /// the event loop: the next event does not wait for them. Dropping the future instead
    /// disengages every member too, without waiting (each member's informers stop at their
    /// next await).
    pub async fn run(
        &self,
        source: impl Stream<Item = ClusterEvent> + Send,
        cancel: CancellationToken,
    ) {
        let mut guard = DisengageOnDrop {
            fleet: Some(self),
            stopping: Vec::new(),
        };
        let mut stopping = Stopping::new();
        let mut source = std::pin::pin!(source);
        loop {
            let event = tokio::select! {
                () = cancel.cancelled() => break,
                Some(()) = stopping.next(), if !stopping.is_empty() => {
                    if stopping.is_empty() {
                        guard.stopping.clear();
                    }
                    continue;
                }
                event = source.next() => event,
            };
            let Some(event) = event else { break };
            if let Some(factory) = self.apply_event(event).await {
                guard.stopping.push(factory.clone());
                stopping.push(Box::pin(async move { factory.shutdown().await }));
            }
            self.inner.applied.send_modify(|n| *n += 1);
        }
        let names: Vec<String> = self.inner.engaged.lock().keys().cloned().collect();
        for name in names {
            if let Some(factory) = self.disengage(&name) {
                stopping.push(Box::pin(async move { factory.shutdown().await }));
            }
        }
        while stopping.next().await.is_some() {}
        guard.fleet = None;
    }

    /// How many source events have been applied, as it grows: a test (or a health check)
    /// waits on it to know an event took effect.
    pub fn applied(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.applied.subscribe()
    }

    /// Applies one event; a member it disengages has its informers stopped and awaited
    /// before this returns.
    pub async fn apply(&self, event: ClusterEvent) {
        if let Some(factory) = self.apply_event(event).await {
            factory.shutdown().await;
        }
        self.inner.applied.send_modify(|n| *n += 1);
    }

    /// Applies `event`; returns the factory of a member it disengaged, to stop.
    async fn apply_event(&self, event: ClusterEvent) -> Option<SharedInformerFactory> {
        match event {
            ClusterEvent::Remove { name } => {
                self.inner.errors.lock().remove(&name);
                self.disengage(&name)
            }
            ClusterEvent::Client {
                name,
                client,
                labels,
            } => {
                let gone = self.disengage(&name);
                self.engage(&name, client, labels, None, None);
                gone
            }
            ClusterEvent::Kubeconfig {
                name,
                kubeconfig,
                labels,
            } => {
                let mut parsed = match member::parse(&kubeconfig).await {
                    Ok(parsed) => parsed,
                    Err(error) => {
                        self.failed(&name, &error);
                        return None;
                    }
                };
                if self.rotate(&name, &parsed, &labels) {
                    return None;
                }
                self.inner.timeouts.apply(&mut parsed.config);
                let identity = parsed.identity.clone();
                match member::client(parsed) {
                    Ok((client, cell)) => {
                        let gone = self.disengage(&name);
                        self.engage(&name, client, labels, Some(identity), Some(cell));
                        gone
                    }
                    Err(error) => {
                        self.failed(&name, &error);
                        None
                    }
                }
            }
        }
    }

    /// Same server, same identity: only the token (and the labels) move; the client, its
    /// connections and the informers stay. `false`: not the engaged member's identity.
    fn rotate(
        &self,
        name: &str,
        parsed: &member::Parsed,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        let relabelled = {
            let mut engaged = self.inner.engaged.lock();
            let Some(e) = engaged.get_mut(name) else {
                return false;
            };
            let Some(cell) = e
                .token
                .as_ref()
                .filter(|_| e.identity.as_ref() == Some(&parsed.identity))
            else {
                return false;
            };
            member::set_token(cell, parsed.token.as_deref());
            (*e.cluster.labels != *labels).then(|| {
                e.cluster.labels = Arc::new(labels.clone());
                e.cluster.clone()
            })
        };
        self.inner.errors.lock().remove(name);
        tracing::info!(cluster = %name, "member credentials rotated in place");
        if let Some(cluster) = relabelled {
            self.inner.clusters.send_modify(|clusters| {
                clusters.insert(name.to_owned(), cluster);
            });
        }
        true
    }

    fn failed(&self, name: &str, error: &MemberError) {
        let kept = self.inner.engaged.lock().contains_key(name);
        tracing::error!(cluster = %name, %error, kept, "cannot use this cluster's kubeconfig");
        self.inner
            .errors
            .lock()
            .insert(name.to_owned(), error.to_string());
    }

    fn engage(
        &self,
        name: &str,
        client: kube::Client,
        labels: BTreeMap<String, String>,
        identity: Option<String>,
        token: Option<member::TokenCell>,
    ) {
        let generation =
            1 + (self.inner.generations).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let factory = SharedInformerFactory::new(client.clone(), self.inner.options.clone());
        let cluster = Cluster {
            name: name.into(),
            client,
            factory,
            disengaged: CancellationToken::new(),
            generation,
            labels: Arc::new(labels),
        };
        tracing::info!(cluster = %name, generation, "cluster engaged");
        self.inner.errors.lock().remove(name);
        let engaged = Engaged {
            cluster: cluster.clone(),
            identity,
            token,
        };
        self.inner.engaged.lock().insert(name.to_owned(), engaged);
        self.inner.clusters.send_modify(|clusters| {
            clusters.insert(name.to_owned(), cluster);
        });
    }

    /// Disengages every member at once, without waiting for their informers.
    fn disengage_now(&self) {
        let engaged = std::mem::take(&mut *self.inner.engaged.lock());
        self.inner.clusters.send_modify(BTreeMap::clear);
        for (name, engaged) in engaged {
            engaged.cluster.disengaged.cancel();
            engaged.cluster.factory.shutdown_now();
            tracing::info!(cluster = %name, "cluster disengaged (the fleet's run was dropped)");
        }
    }

    /// Takes `name` out of the fleet: consumers see it gone and its token is cancelled (so
    /// they stop their work for it first); returns its factory, whose informers the caller
    /// stops.
    fn disengage(&self, name: &str) -> Option<SharedInformerFactory> {
        let engaged = self.inner.engaged.lock().remove(name)?;
        self.inner.clusters.send_modify(|clusters| {
            clusters.remove(name);
        });
        engaged.cluster.disengaged.cancel();
        tracing::info!(cluster = %name, "cluster disengaged");
        Some(engaged.cluster.factory)
    }
}

/// Disengages every member, and stops the informers of those still stopping, if
/// [`Fleet::run`] is dropped before it has done so itself.
struct DisengageOnDrop<'a> {
    fleet: Option<&'a Fleet>,
    stopping: Vec<SharedInformerFactory>,
}

impl Drop for DisengageOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(fleet) = self.fleet {
            fleet.disengage_now();
            for factory in &self.stopping {
                factory.shutdown_now();
            }
        }
    }
}
