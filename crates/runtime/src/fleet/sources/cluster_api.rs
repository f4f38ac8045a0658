//! Members from Cluster API: each `Cluster` (`cluster.x-k8s.io`, v1beta2 or v1beta1) is a
//! member once its control plane is up, reached through the kubeconfig Cluster API writes
//! for it, the Secret `<name>-kubeconfig` (key `value`) beside it. Only the `Cluster` going
//! away disengages a member: the many other Secrets Cluster API keeps in the same namespace
//! with the same label (`<name>-ca`, `-etcd`, `-sa`, `-proxy`, a bootstrap-data Secret per
//! Machine, made and deleted on every rollout) are never read as kubeconfigs.

use futures_util::{Stream, StreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind},
    discovery::Scope,
};
use kube_informer::{
    Selectors,
    factory::{InformerSpec, SharedInformerFactory},
    informer::{HandlerOptions, Notification},
};
use serde_json::Value;

use super::{
    CLUSTER_NAME_LABEL, SourceError,
    join::{Input, Join},
    member_name, secret_text,
};
use crate::fleet::ClusterEvent;

/// Cluster API's API group.
pub const CLUSTER_API_GROUP: &str = "cluster.x-k8s.io";

/// The suffix of the Secret that holds a cluster's kubeconfig (`<name>-kubeconfig`).
const KUBECONFIG_SUFFIX: &str = "-kubeconfig";

/// Members from the Cluster API `Cluster`s of the hub's `namespace` (`None`: every
/// namespace), each named `<namespace>/<name>`, as multicluster-runtime's Cluster API
/// provider names them:
///
/// - **engaged** once the `Cluster`'s control plane is initialized (v1beta2
///   `status.initialization.controlPlaneInitialized`; v1beta1 `status.controlPlaneReady`,
///   the `ControlPlaneInitialized` condition, or `status.phase: Provisioned`) and its
///   Secret `<name>-kubeconfig` holds a kubeconfig under `value`;
/// - **given new credentials** when that Secret changes (a rotated token keeps the
///   member's informers; see [`Fleet`](crate::fleet::Fleet));
/// - **labelled** with the `Cluster`'s labels ([`Cluster::labels`](crate::fleet::Cluster::labels)),
///   for a controller's [cluster filter](crate::fleet::FleetController::clusters);
/// - **disengaged** when the `Cluster` is deleted (from its deletion timestamp on).
///
/// No other Secret touches a member, and the kubeconfig Secret deleted leaves an engaged
/// member running on the credentials it has. Asks the hub which version of `Cluster` it
/// serves (v1beta2 first); [`SourceError::NotServed`] when it serves none (Cluster API is
/// not installed). Call before starting `hub`; the stream ends when its informers stop.
/// The other Secrets are cached without their data (Cluster API's CA and service-account
/// keys are not held in the operator's memory).
///
/// ```no_run
/// # async fn demo(hub: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
/// use kube_informer_runtime::fleet::{Fleet, sources};
///
/// let hub_factory = SharedInformerFactory::new(hub, FactoryOptions::default());
/// let source = sources::cluster_api(&hub_factory, Some("clusters")).await?;
/// hub_factory.start();
/// let fleet = Fleet::new(FactoryOptions::default());
/// # let _ = (fleet, source);
/// # Ok(()) }
/// ```
pub async fn cluster_api(
    hub: &SharedInformerFactory,
    namespace: Option<&str>,
) -> Result<impl Stream<Item = ClusterEvent> + Send + 'static, SourceError> {
    let version = served_version(hub.client()).await?;
    let gvk = GroupVersionKind::gvk(CLUSTER_API_GROUP, &version, "Cluster");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "clusters");
    let scoped = |selectors: Selectors| match namespace {
        Some(namespace) => selectors.in_namespace(namespace),
        None => selectors,
    };
    let clusters = hub.dynamic_informer_with(
        &resource,
        Scope::Namespaced,
        InformerSpec::new().selectors(scoped(Selectors::default())),
    );
    let secrets = hub.informer_with::<Secret>(
        InformerSpec::new()
            .selectors(scoped(Selectors::default().labels(CLUSTER_NAME_LABEL)))
            .transform(keep_kubeconfigs_only),
    );
    let options = || HandlerOptions::default().name("fleet-cluster-api");
    let clusters = clusters.stream(options()).map(from_cluster);
    let secrets = secrets
        .stream(options())
        .filter_map(|n| async move { from_secret(n) });
    let mut join = Join::default();
    Ok(stream::select(clusters, secrets).flat_map(move |input| stream::iter(join.apply(input))))
}

/// The version of `Cluster` the hub serves: v1beta2 if it does, else v1beta1.
async fn served_version(hub: &kube::Client) -> Result<String, SourceError> {
    let groups = hub
        .list_api_groups()
        .await
        .map_err(SourceError::Discovery)?;
    let served: Vec<String> = groups
        .groups
        .iter()
        .filter(|g| g.name == CLUSTER_API_GROUP)
        .flat_map(|g| g.versions.iter().map(|v| v.version.clone()))
        .collect();
    ["v1beta2", "v1beta1"]
        .into_iter()
        .find(|v| served.iter().any(|s| s == v))
        .map(str::to_owned)
        .ok_or(SourceError::NotServed {
            what: "Cluster API's Cluster (cluster.x-k8s.io v1beta2 or v1beta1)",
        })
}

fn from_cluster(notification: Notification<DynamicObject>) -> Input {
    let cluster = notification.object();
    let name = member_name(&**cluster, &cluster.name_any());
    if matches!(notification, Notification::Delete(_)) {
        return Input::ObjectGone { name };
    }
    Input::Object {
        ready: control_plane_up(&cluster.data["status"]),
        deleting: cluster.metadata.deletion_timestamp.is_some(),
        labels: cluster.labels().clone(),
        name,
    }
}

/// Whether a `Cluster`'s status (v1beta2 or v1beta1) says its control plane answers.
fn control_plane_up(status: &Value) -> bool {
    let yes = |pointer: &str| status.pointer(pointer) == Some(&Value::Bool(true));
    let initialized = status["conditions"].as_array().is_some_and(|conditions| {
        conditions
            .iter()
            .any(|c| c["type"] == "ControlPlaneInitialized" && c["status"] == "True")
    });
    yes("/initialization/controlPlaneInitialized")
        || yes("/controlPlaneReady")
        || initialized
        || status["phase"] == "Provisioned"
}

/// The cluster whose kubeconfig `secret` is: named `<cluster>-kubeconfig` *and* labelled
/// with that cluster (`<cluster>-user-kubeconfig`, which some providers add, is not).
fn kubeconfig_of_cluster(secret: &Secret) -> Option<String> {
    let name = secret.name_any();
    let cluster = name.strip_suffix(KUBECONFIG_SUFFIX)?;
    let labelled = secret.labels().get(CLUSTER_NAME_LABEL)?;
    (labelled == cluster).then(|| cluster.to_owned())
}

/// A kubeconfig Secret's change, as its cluster's credentials; `None` for any other
/// Secret.
fn from_secret(notification: Notification<Secret>) -> Option<Input> {
    let secret = notification.object();
    let cluster = kubeconfig_of_cluster(secret)?;
    let name = member_name(&**secret, &cluster);
    let gone = matches!(notification, Notification::Delete(_));
    let kubeconfig = (!gone).then(|| secret_text(secret, "value"));
    Some(Input::Credentials { name, kubeconfig })
}

/// Drops the data of every Secret but a kubeconfig: CA, etcd, service-account and proxy
/// keys and bootstrap data stay out of the cache.
fn keep_kubeconfigs_only(mut secret: Secret) -> Secret {
    if kubeconfig_of_cluster(&secret).is_none() {
        secret.data = None;
        secret.string_data = None;
    }
    secret
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_control_plane_is_up_by_either_version_s_word() {
        let v1beta2 =
            json!({"initialization": {"controlPlaneInitialized": true}, "phase": "Provisioning"});
        assert!(control_plane_up(&v1beta2));
        assert!(control_plane_up(&json!({"controlPlaneReady": true})));
        assert!(control_plane_up(&json!({"phase": "Provisioned"})));
        let condition =
            json!({"conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]});
        assert!(control_plane_up(&condition));
        for not_yet in [
            json!(null),
            json!({"phase": "Provisioning", "initialization": {"controlPlaneInitialized": false}}),
            json!({"conditions": [{"type": "ControlPlaneInitialized", "status": "False"}]}),
        ] {
            assert!(!control_plane_up(&not_yet), "{not_yet}");
        }
    }

    #[test]
    fn other_secrets_are_not_credentials_and_keep_no_data() {
        let secret = |name: &str| -> Secret {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "capi", "labels": {CLUSTER_NAME_LABEL: "web"}},
                "data": {"value": "a2luZDogQ29uZmln"},
            }))
            .unwrap()
        };
        let add = |s: Secret| Notification::Add {
            object: std::sync::Arc::new(s),
            is_in_initial_list: false,
        };
        for other in [
            "web-ca",
            "web-etcd",
            "web-sa",
            "web-proxy",
            "web-md-0-x7k2p",
        ] {
            assert!(from_secret(add(secret(other))).is_none(), "{other}");
            assert!(
                keep_kubeconfigs_only(secret(other)).data.is_none(),
                "{other}"
            );
        }
        let kubeconfig = keep_kubeconfigs_only(secret("web-kubeconfig"));
        assert_eq!(
            from_secret(add(kubeconfig)),
            Some(Input::Credentials {
                name: "capi/web".into(),
                kubeconfig: Some("kind: Config".into()),
            })
        );
    }
}
