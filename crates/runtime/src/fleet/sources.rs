//! Where a fleet's clusters come from: kubeconfig Secrets in the hub, a folder of
//! kubeconfig files, or code. Each is a stream of [`ClusterEvent`]s for
//! [`Fleet::run`](super::Fleet::run).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use futures_util::{Stream, StreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube_informer::{
    Selectors,
    factory::{InformerSpec, SharedInformerFactory},
    informer::{HandlerOptions, Notification},
};
use tokio::sync::mpsc;

use super::ClusterEvent;

/// The label Cluster API puts on a cluster's kubeconfig Secret: its value is the cluster's
/// name.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

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
        let name = name.to_owned();
        let _ = self.0.send(ClusterEvent::Client { name, client });
    }

    /// Engages `name` with `kubeconfig`, or rotates its credentials.
    pub fn engage_kubeconfig(&self, name: &str, kubeconfig: impl Into<String>) {
        let (name, kubeconfig) = (name.to_owned(), kubeconfig.into());
        let _ = self.0.send(ClusterEvent::Kubeconfig { name, kubeconfig });
    }

    /// Disengages `name`.
    pub fn remove(&self, name: &str) {
        let name = name.to_owned();
        let _ = self.0.send(ClusterEvent::Remove { name });
    }
}

/// Clusters from the kubeconfig Secrets in the hub's `namespace` that carry
/// [`CLUSTER_NAME_LABEL`] (as Cluster API makes them: `<name>-kubeconfig`, the kubeconfig
/// under `value`; `kubeconfig` is read too). Created or changed: engaged, or its
/// credentials rotated; deleted: disengaged. Start `hub` after this call; the stream ends
/// when its informer stops.
pub fn kubeconfig_secrets(
    hub: &SharedInformerFactory,
    namespace: &str,
) -> impl Stream<Item = ClusterEvent> + Send + 'static {
    let selectors = Selectors::default()
        .in_namespace(namespace)
        .labels(CLUSTER_NAME_LABEL);
    let informer = hub.informer_with::<Secret>(InformerSpec::new().selectors(selectors));
    let notifications = informer.stream(HandlerOptions::default().name("fleet-kubeconfigs"));
    notifications.filter_map(|notification| async move {
        match notification {
            Notification::Add { object, .. } | Notification::Update { new: object, .. } => {
                Some(from_secret(&object))
            }
            Notification::Delete(gone) => Some(ClusterEvent::Remove {
                name: cluster_name(gone.object().as_ref()),
            }),
        }
    })
}

fn cluster_name(secret: &Secret) -> String {
    secret
        .labels()
        .get(CLUSTER_NAME_LABEL)
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| {
            let name = secret.name_any();
            name.strip_suffix("-kubeconfig").unwrap_or(&name).to_owned()
        })
}

/// A Secret's cluster and kubeconfig (an empty one, which fails to parse, when it has
/// neither key: the error names the cluster).
fn from_secret(secret: &Secret) -> ClusterEvent {
    let data = secret.data.as_ref();
    let value = ["value", "kubeconfig"]
        .iter()
        .find_map(|key| data.and_then(|d| d.get(*key)));
    let kubeconfig = value
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .unwrap_or_default();
    ClusterEvent::Kubeconfig {
        name: cluster_name(secret),
        kubeconfig,
    }
}

/// Clusters from the kubeconfig files of `dir` (`*.yaml`, `*.yml`, `*.json`,
/// `*.kubeconfig`; the file's stem is the cluster's name), read again every `every`: a new
/// file engages, a changed one rotates or re-engages, a removed one disengages. A folder
/// that cannot be read is logged and tried again.
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
                    events.push(ClusterEvent::Kubeconfig { name, kubeconfig });
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
