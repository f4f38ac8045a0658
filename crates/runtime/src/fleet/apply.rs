//! How a [`Fleet`] applies its source: engaging members (a client and a factory each),
//! rotating their tokens in place, relabelling them, and disengaging them — a member's
//! informers stopped and awaited beside the event loop, so one slow shutdown never holds
//! back the next member's engagement.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use futures_util::{Stream, StreamExt, future::BoxFuture, stream::FuturesUnordered};
use kube_informer::factory::SharedInformerFactory;
use tokio_util::sync::CancellationToken;

use super::{Cluster, ClusterEvent, Engaged, Fleet, MemberError, member};

/// How a fleet makes its members' clients from kubeconfigs (a client given from code,
/// [`ClusterEvent::Client`], is the caller's own).
///
/// - **Timeouts**, so that a member whose API server accepts connections and never
///   answers cannot hold a request for ever: connecting, default 10 s; between two reads
///   of a response, counted from the request's last write, default 190 s — above the
///   informers' watch idle limit (3 minutes), so a quiet watch is resumed by its reflector
///   rather than cut by the client. Reconciles have their own, shorter deadline
///   ([`FleetController`](super::FleetController)).
/// - **What a kubeconfig may ask of the operator's process**: by default nothing but data —
///   a kubeconfig that runs a command (`exec`, `auth-provider`) or reads a local file (a
///   token file, a certificate or key by path) is refused, since whoever can write the
///   Secret it came from would otherwise run code or read files in the operator. Allow
///   them for sources you trust ([`allow_exec`](Self::allow_exec) for a
///   [`ClusterProfiles`](super::sources::ClusterProfiles) access provider, whose exec plugin
///   is yours; [`allow_local_files`](Self::allow_local_files) for a folder of kubeconfigs
///   that name certificate files). An exec plugin runs off the event loop, for 30 s at most.
///
/// A client that could not be built (a plugin or network that failed, a plugin that did
/// not finish) is tried again with backoff, 5 s doubling to 5 minutes, until it works or
/// a newer kubeconfig for the member arrives.
///
/// ```
/// use std::time::Duration;
/// use kube_informer::factory::FactoryOptions;
/// use kube_informer_runtime::fleet::{Fleet, MemberClients};
///
/// let clients = MemberClients::default()
///     .timeouts(Some(Duration::from_secs(5)), Some(Duration::from_secs(190)))
///     .allow_exec(true);
/// let fleet = Fleet::with_clients(FactoryOptions::default(), clients);
/// # let _ = fleet;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberClients {
    connect: Option<Duration>,
    read: Option<Duration>,
    allowed: member::Allowed,
}

impl Default for MemberClients {
    fn default() -> Self {
        Self {
            connect: Some(Duration::from_secs(10)),
            read: Some(Duration::from_secs(190)),
            allowed: member::Allowed::default(),
        }
    }
}

impl MemberClients {
    /// The timeouts of connecting and of reading a response (`None`: none).
    #[must_use]
    pub fn timeouts(mut self, connect: Option<Duration>, read: Option<Duration>) -> Self {
        self.connect = connect;
        self.read = read;
        self
    }

    /// Whether a kubeconfig may run a command to get credentials (`exec`,
    /// `auth-provider`; default `false`).
    #[must_use]
    pub fn allow_exec(mut self, allow: bool) -> Self {
        self.allowed.exec = allow;
        self
    }

    /// Whether a kubeconfig may read the operator's files (`tokenFile`,
    /// `client-certificate`, `client-key`, `certificate-authority`; default `false`).
    #[must_use]
    pub fn allow_local_files(mut self, allow: bool) -> Self {
        self.allowed.local_files = allow;
        self
    }

    fn apply(self, config: &mut kube::Config) {
        config.connect_timeout = self.connect;
        config.read_timeout = self.read;
        config.reset_reader_on_write = self.read.is_some();
    }
}

/// How long building one member's client (its exec plugin) may take.
const BUILD_TIMEOUT: Duration = Duration::from_secs(30);
/// The first and the longest wait before a client that could not be built is tried again.
const RETRY_FIRST: Duration = Duration::from_secs(5);
const RETRY_MOST: Duration = Duration::from_secs(300);

/// What applying one event did.
#[derive(Default)]
struct Applied {
    /// The factory of a member it disengaged, to stop.
    stopping: Option<SharedInformerFactory>,
    /// Its client could not be built for now: try the event again later.
    retry: bool,
}

/// Events to apply again, by member: when, and the wait after that.
#[derive(Default)]
struct Retries(BTreeMap<String, (ClusterEvent, tokio::time::Instant, Duration)>);

impl Retries {
    /// Records how applying `event` went: a newer event replaces a pending retry.
    fn record(&mut self, event: &ClusterEvent, retry: bool) {
        let name = event.name().to_owned();
        let previous = self.0.remove(&name).map(|(_, _, wait)| wait);
        if retry {
            let wait = previous.map_or(RETRY_FIRST, |w| (w * 2).min(RETRY_MOST));
            let at = tokio::time::Instant::now() + wait;
            self.0.insert(name, (event.clone(), at, wait));
        }
    }

    /// When the next retry is due.
    fn next(&self) -> Option<tokio::time::Instant> {
        self.0.values().map(|(_, at, _)| *at).min()
    }

    /// The events due now (kept, with their waits, until applied and recorded again).
    fn due(&mut self) -> Vec<ClusterEvent> {
        let now = tokio::time::Instant::now();
        let due = self.0.values().filter(|(_, at, _)| *at <= now);
        due.map(|(event, _, _)| event.clone()).collect()
    }
}

impl ClusterEvent {
    /// The member it is about.
    fn name(&self) -> &str {
        match self {
            Self::Kubeconfig { name, .. } | Self::Client { name, .. } | Self::Remove { name } => {
                name
            }
        }
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
        let mut retries = Retries::default();
        let mut source = std::pin::pin!(source);
        loop {
            let retry_at = retries.next();
            let events = tokio::select! {
                () = cancel.cancelled() => break,
                Some(()) = stopping.next(), if !stopping.is_empty() => {
                    if stopping.is_empty() {
                        guard.stopping.clear();
                    }
                    continue;
                }
                () = tokio::time::sleep_until(retry_at.unwrap_or_else(tokio::time::Instant::now)), if retry_at.is_some() => retries.due(),
                event = source.next() => match event {
                    Some(event) => vec![event],
                    None => break,
                },
            };
            for event in events {
                let applied = self.apply_event(event.clone()).await;
                retries.record(&event, applied.retry);
                if let Some(factory) = applied.stopping {
                    guard.stopping.push(factory.clone());
                    stopping.push(Box::pin(async move { factory.shutdown().await }));
                }
                self.inner.applied.send_modify(|n| *n += 1);
            }
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

    /// How many source events have been applied, as it grows: a test waits on it to know
    /// an event took effect (feature `testing`).
    #[cfg(feature = "testing")]
    pub fn applied(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.applied.subscribe()
    }

    /// Applies `event`: the factory of a member it disengaged, to stop, and whether to
    /// try it again later.
    async fn apply_event(&self, event: ClusterEvent) -> Applied {
        match event {
            ClusterEvent::Remove { name } => {
                self.inner.errors.lock().remove(&name);
                Applied {
                    stopping: self.disengage(&name),
                    retry: false,
                }
            }
            ClusterEvent::Client {
                name,
                client,
                labels,
            } => {
                let gone = self.disengage(&name);
                self.engage(&name, client, labels, None, None);
                Applied {
                    stopping: gone,
                    retry: false,
                }
            }
            ClusterEvent::Kubeconfig {
                name,
                kubeconfig,
                labels,
            } => {
                let clients = self.inner.clients;
                let mut parsed = match member::parse(&kubeconfig, clients.allowed).await {
                    Ok(parsed) => parsed,
                    Err(error) => return self.failed(&name, &error),
                };
                if self.rotate(&name, &parsed, &labels) {
                    return Applied::default();
                }
                clients.apply(&mut parsed.config);
                let identity = parsed.identity.clone();
                match build(parsed).await {
                    Ok((client, cell)) => {
                        let gone = self.disengage(&name);
                        self.engage(&name, client, labels, Some(identity), Some(cell));
                        Applied {
                            stopping: gone,
                            retry: false,
                        }
                    }
                    Err(error) => self.failed(&name, &error),
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

    /// Records why `name`'s kubeconfig cannot be used; tried again later if that may help.
    fn failed(&self, name: &str, error: &MemberError) -> Applied {
        let (kept, retry) = (
            self.inner.engaged.lock().contains_key(name),
            error.is_transient(),
        );
        tracing::error!(cluster = %name, %error, kept, retry, "cannot use this cluster's kubeconfig");
        self.inner
            .errors
            .lock()
            .insert(name.to_owned(), error.to_string());
        Applied {
            stopping: None,
            retry,
        }
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
            // Reconciles write through it: their writes are recorded (read your own writes).
            client: crate::controller::recording_client(client),
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

/// Builds a member's client; one whose kubeconfig runs a command (which blocks until the
/// command ends) is built on a blocking thread, for [`BUILD_TIMEOUT`] at most. A plugin
/// that never ends keeps its thread until it does: a thread cannot be cancelled.
async fn build(parsed: member::Parsed) -> Result<(kube::Client, member::TokenCell), MemberError> {
    if !parsed.runs_a_command {
        return member::client(parsed);
    }
    let building = tokio::task::spawn_blocking(move || member::client(parsed));
    match tokio::time::timeout(BUILD_TIMEOUT, building).await {
        Ok(Ok(built)) => built,
        Ok(Err(panicked)) => Err(MemberError::Client(kube::Error::Service(Box::new(
            panicked,
        )))),
        Err(_) => Err(MemberError::TimedOut(BUILD_TIMEOUT)),
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
