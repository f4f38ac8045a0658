//! Where a fleet's clusters come from. Each is a stream of [`ClusterEvent`]s for
//! [`Fleet::run`](super::Fleet::run):
//!
//! | source | members are | engaged | disengaged |
//! |---|---|---|---|
//! | [`cluster_api`] | Cluster API `Cluster`s (`<namespace>/<name>`) | control plane initialized and `<name>-kubeconfig` there | the `Cluster` deleted |
//! | [`ClusterProfiles`] | `ClusterProfile`s of the cluster inventory API (`<namespace>/<name>`) | `ControlPlaneHealthy` and credentials there | the profile deleted |
//! | [`kubeconfig_secrets`] | Secrets labelled [`KUBECONFIG_SECRET_LABEL`]`=true` (the Secret's name) | the Secret there | the Secret deleted |
//! | [`kubeconfig_dir`] | kubeconfig files (the file's stem) | the file there | the file removed |
//! | [`from_code`] | what you say | [`ClusterSender::engage`] | [`ClusterSender::remove`] |
//!
//! The inventory sources (Cluster API, ClusterProfile) follow the inventory object, not
//! the Secrets beside it: only the object going away disengages a member (new credentials
//! with another client certificate engage it anew, as any new identity does: see
//! [`Fleet`](super::Fleet)).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use futures_util::{Stream, stream};
use tokio::sync::mpsc;

pub use self::{
    cluster_api::{CLUSTER_API_GROUP, cluster_api},
    cluster_profile::{
        CLUSTER_PROFILE_GROUP, CONSUMER_LABEL, ClusterProfiles, PROFILE_LABEL, PROFILE_SECRET_KEY,
    },
    secrets::{KUBECONFIG_SECRET_KEY, KUBECONFIG_SECRET_LABEL, kubeconfig_secrets},
};
use super::ClusterEvent;

mod cluster_api;
mod cluster_profile;
mod join;
mod secrets;

/// The label Cluster API puts on the Secrets of a cluster (its kubeconfig, CA, etcd,
/// service-account, proxy and bootstrap-data Secrets): its value is the cluster's name.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// The text under `key` of `secret` (empty when missing: as a kubeconfig it fails to
/// parse, and the error names the member).
fn secret_text(secret: &k8s_openapi::api::core::v1::Secret, key: &str) -> String {
    let value = secret.data.as_ref().and_then(|d| d.get(key));
    value
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .unwrap_or_default()
}

/// An inventory member's name: `<namespace of object>/<name>`.
fn member_name(object: &impl kube::Resource, name: &str) -> String {
    format!(
        "{}/{name}",
        object.meta().namespace.as_deref().unwrap_or_default()
    )
}

/// Why a source cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The hub does not serve the API the source reads (not installed there).
    #[error("the hub does not serve {what}: is it installed?")]
    NotServed {
        /// What is missing.
        what: &'static str,
    },
    /// The hub could not be asked which APIs it serves.
    #[error("cannot read the hub's API groups: {0}")]
    Discovery(#[source] kube::Error),
}

/// Clusters given from code: a [`ClusterSender`] and the stream it feeds.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kube_informer_runtime::fleet::sources;
///
/// let (clusters, source) = sources::from_code();
/// let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
/// clusters.engage("east", client);
/// clusters.remove("east");
/// # drop((clusters, source));
/// # }
/// ```
pub fn from_code() -> (
    ClusterSender,
    impl Stream<Item = ClusterEvent> + Send + 'static,
) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let source = stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (event, receiver))
    });
    (ClusterSender(sender), source)
}

/// Engages and removes clusters of a [`from_code`] source. The source ends when every
/// sender is dropped.
#[derive(Clone, Debug)]
pub struct ClusterSender(mpsc::UnboundedSender<ClusterEvent>);

impl ClusterSender {
    /// Engages `name` with `client` (replacing an engaged member of that name).
    pub fn engage(&self, name: &str, client: kube::Client) {
        self.engage_labelled(name, client, BTreeMap::new());
    }

    /// [`engage`](Self::engage) with `labels` ([`Cluster::labels`](super::Cluster::labels),
    /// for a controller's [cluster filter](super::FleetController::clusters)).
    pub fn engage_labelled(
        &self,
        name: &str,
        client: kube::Client,
        labels: BTreeMap<String, String>,
    ) {
        let name = name.to_owned();
        let _ = self.0.send(ClusterEvent::Client {
            name,
            client,
            labels,
        });
    }

    /// Engages `name` with `kubeconfig`, or rotates its credentials.
    pub fn engage_kubeconfig(&self, name: &str, kubeconfig: impl Into<String>) {
        let (name, kubeconfig) = (name.to_owned(), kubeconfig.into());
        let labels = BTreeMap::new();
        let _ = self.0.send(ClusterEvent::Kubeconfig {
            name,
            kubeconfig,
            labels,
        });
    }

    /// Disengages `name`.
    pub fn remove(&self, name: &str) {
        let name = name.to_owned();
        let _ = self.0.send(ClusterEvent::Remove { name });
    }
}

/// Clusters from the kubeconfig files of `dir` (`*.yaml`, `*.yml`, `*.json`,
/// `*.kubeconfig`; the file's stem is the cluster's name), read again every `every`: a new
/// file engages, a changed one rotates or re-engages, a removed one disengages. A folder
/// that cannot be read is logged and tried again. Kubeconfigs that run an exec plugin or
/// name certificate files (as most of kubectl's do) need a fleet that allows them
/// ([`MemberClients`](super::MemberClients)).
pub fn kubeconfig_dir(
    dir: impl Into<PathBuf>,
    every: Duration,
) -> impl Stream<Item = ClusterEvent> + Send + 'static {
    struct State {
        dir: PathBuf,
        every: Duration,
        known: BTreeMap<String, String>,
        pending: Vec<ClusterEvent>,
        first: bool,
    }
    let state = State {
        dir: dir.into(),
        every,
        known: BTreeMap::new(),
        pending: Vec::new(),
        first: true,
    };
    stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.pending.pop() {
                return Some((event, state));
            }
            if !std::mem::take(&mut state.first) {
                tokio::time::sleep(state.every).await;
            }
            let Some(now) = read_dir(&state.dir) else {
                continue;
            };
            let mut events = Vec::new();
            for (name, text) in &now {
                if state.known.get(name) != Some(text) {
                    let (name, kubeconfig) = (name.clone(), text.clone());
                    let labels = BTreeMap::new();
                    events.push(ClusterEvent::Kubeconfig {
                        name,
                        kubeconfig,
                        labels,
                    });
                }
            }
            for name in state.known.keys().filter(|n| !now.contains_key(*n)) {
                events.push(ClusterEvent::Remove { name: name.clone() });
            }
            state.known = now;
            events.reverse(); // popped from the end: in name order
            state.pending = events;
        }
    })
}

/// The kubeconfig files of `dir` by cluster name; `None` when the folder cannot be read.
fn read_dir(dir: &Path) -> Option<BTreeMap<String, String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "cannot read the kubeconfig folder");
            return None;
        }
    };
    let mut found = BTreeMap::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let wanted = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| ["yaml", "yml", "json", "kubeconfig"].contains(&e));
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if !wanted || stem.starts_with('.') {
            continue;
        }
        // A file being written may be read half: its kubeconfig fails to parse, the error
        // is that cluster's, and the next read gets it whole.
        if let Ok(text) = std::fs::read_to_string(&path) {
            found.insert(stem.to_owned(), text);
        }
    }
    Some(found)
}
