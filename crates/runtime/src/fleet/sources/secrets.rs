//! Members from kubeconfig Secrets that opt in with a label: the generic source, for
//! kubeconfigs made by hand or by a tool that is not a cluster inventory (multicluster-
//! runtime's kubeconfig provider reads the same Secrets).

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube_informer::{
    Selectors,
    factory::{InformerSpec, SharedInformerFactory},
    informer::{HandlerOptions, Notification},
};

use super::ClusterEvent;

/// The label a kubeconfig Secret opts in with (value `true`), as multicluster-runtime's
/// kubeconfig provider reads it.
pub const KUBECONFIG_SECRET_LABEL: &str = "sigs.k8s.io/multicluster-runtime-kubeconfig";

/// The key that holds the kubeconfig.
pub const KUBECONFIG_SECRET_KEY: &str = "kubeconfig";

/// Members from the Secrets in the hub's `namespace` labelled
/// [`KUBECONFIG_SECRET_LABEL`]`=true`, each named after its Secret, the kubeconfig under
/// [`KUBECONFIG_SECRET_KEY`]: created or changed, engaged (or its credentials rotated);
/// deleted, disengaged. The Secret's labels are the member's
/// ([`Cluster::labels`](crate::fleet::Cluster::labels)). No other Secret is read — for Cluster API's Secrets use
/// [`cluster_api`](super::cluster_api), which follows the `Cluster`s. Start `hub` after
/// this call; the stream ends when its informer stops.
///
/// ```no_run
/// # fn demo(hub: &kube_informer::factory::SharedInformerFactory) {
/// use kube_informer_runtime::fleet::sources;
///
/// // kubectl create secret generic east --from-file=kubeconfig=east.yaml -n fleet-system
/// // kubectl label secret east -n fleet-system sigs.k8s.io/multicluster-runtime-kubeconfig=true
/// let source = sources::kubeconfig_secrets(hub, "fleet-system");
/// # let _ = source;
/// # }
/// ```
pub fn kubeconfig_secrets(
    hub: &SharedInformerFactory,
    namespace: &str,
) -> impl Stream<Item = ClusterEvent> + Send + 'static {
    let selectors = Selectors::default()
        .in_namespace(namespace)
        .labels(format!("{KUBECONFIG_SECRET_LABEL}=true"));
    let informer = hub.informer_with::<Secret>(InformerSpec::new().selectors(selectors));
    let notifications = informer.stream(HandlerOptions::default().name("fleet-kubeconfigs"));
    notifications.map(|notification| match notification {
        Notification::Add { object, .. } | Notification::Update { new: object, .. } => {
            from_secret(&object)
        }
        Notification::Delete(gone) => ClusterEvent::Remove {
            name: gone.object().name_any(),
        },
    })
}

/// A Secret's cluster and kubeconfig (an empty one, which fails to parse, when the key is
/// missing: the error names the cluster).
fn from_secret(secret: &Secret) -> ClusterEvent {
    ClusterEvent::Kubeconfig {
        name: secret.name_any(),
        kubeconfig: super::secret_text(secret, KUBECONFIG_SECRET_KEY),
        labels: secret.labels().clone(),
    }
}
