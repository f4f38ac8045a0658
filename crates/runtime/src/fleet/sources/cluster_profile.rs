//! Members from the cluster inventory API of sig-multicluster (KEP-4322, KEP-5339): each
//! `ClusterProfile` (`multicluster.x-k8s.io/v1alpha1`) a cluster manager publishes in the
//! hub is a member once its `ControlPlaneHealthy` condition is `True`, reached either
//! through a kubeconfig Secret made for this consumer, or through one of the profile's
//! access providers (its server and CA, with an exec plugin of yours for the credentials).

use futures_util::{Stream, StreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind},
    config::ExecConfig,
    discovery::Scope,
};
use kube_informer::{
    Selectors,
    factory::{InformerSpec, SharedInformerFactory},
    informer::{HandlerOptions, Notification},
};
use serde_json::{Value, json};

use super::{
    join::{Input, Join},
    member_name, secret_text,
};
use crate::fleet::ClusterEvent;

/// The cluster inventory API's group.
pub const CLUSTER_PROFILE_GROUP: &str = "multicluster.x-k8s.io";
/// The label naming the consumer a kubeconfig Secret is made for.
pub const CONSUMER_LABEL: &str = "x-k8s.io/cluster-inventory-consumer";
/// The label naming the `ClusterProfile` a kubeconfig Secret reaches.
pub const PROFILE_LABEL: &str = "x-k8s.io/cluster-profile";
/// The key of a consumer's kubeconfig Secret that holds the kubeconfig.
pub const PROFILE_SECRET_KEY: &str = "Config";

/// How a member's credentials are found.
#[derive(Clone, Debug)]
enum Credentials {
    /// Secrets labelled for `consumer` and the profile, the kubeconfig under `Config`.
    Secrets { consumer: String },
    /// The profile's access provider `provider` (server, CA), with `exec` for credentials.
    Access {
        provider: String,
        exec: Box<ExecConfig>,
    },
}

/// Members from the `ClusterProfile`s in the hub, named `<namespace>/<name>` as
/// multicluster-runtime's cluster-inventory provider names them: engaged once a profile's
/// `ControlPlaneHealthy` condition is `True` and its credentials are there, given new
/// credentials when they change, labelled with the profile's labels, and disengaged when
/// the profile is deleted — a condition turning `False` later leaves the member engaged
/// (its health shows it). Call [`source`](Self::source) before starting the hub's factory.
///
/// ```no_run
/// # fn demo(hub: &kube_informer::factory::SharedInformerFactory) {
/// use kube_informer_runtime::fleet::sources::ClusterProfiles;
///
/// // Kubeconfig Secrets a cluster manager makes for the consumer "my-operator".
/// let source = ClusterProfiles::with_secrets("my-operator").namespace("fleet").source(hub);
/// # let _ = source;
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ClusterProfiles {
    namespace: Option<String>,
    credentials: Credentials,
}

impl ClusterProfiles {
    /// Credentials from the Secrets in a profile's namespace labelled
    /// [`CONSUMER_LABEL`]`=consumer` and [`PROFILE_LABEL`]`=<profile>`, the kubeconfig under
    /// [`PROFILE_SECRET_KEY`].
    pub fn with_secrets(consumer: &str) -> Self {
        Self {
            namespace: None,
            credentials: Credentials::Secrets {
                consumer: consumer.to_owned(),
            },
        }
    }

    /// Credentials from the profile's access provider `provider` (`status.accessProviders`,
    /// or the older `status.credentialProviders`): its `cluster` (server, CA, proxy) with
    /// `exec` as the user — the plugin that gets a token for that provider (KEP-5339). The
    /// cluster's extensions stay (the plugin reads its per-cluster configuration there,
    /// with `provideClusterInfo`). The fleet must allow exec plugins
    /// ([`MemberClients::allow_exec`](crate::fleet::MemberClients::allow_exec)): refused by
    /// default, since a kubeconfig Secret's writer could otherwise run code in the operator.
    ///
    /// ```
    /// use kube::config::ExecConfig;
    /// use kube_informer_runtime::fleet::sources::ClusterProfiles;
    ///
    /// let exec = ExecConfig {
    ///     api_version: Some("client.authentication.k8s.io/v1".into()),
    ///     command: Some("/usr/local/bin/gke-gcloud-auth-plugin".into()),
    ///     ..ExecConfig::default()
    /// };
    /// let profiles = ClusterProfiles::with_access_provider("google", exec);
    /// # let _ = profiles;
    /// ```
    pub fn with_access_provider(provider: &str, exec: ExecConfig) -> Self {
        Self {
            namespace: None,
            credentials: Credentials::Access {
                provider: provider.to_owned(),
                exec: Box::new(exec),
            },
        }
    }

    /// Only the profiles (and Secrets) of `namespace` (default: every namespace).
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// The members, as a source for [`Fleet::run`](crate::fleet::Fleet::run). Start `hub`
    /// after this call; the stream ends when its informers stop.
    pub fn source(
        self,
        hub: &SharedInformerFactory,
    ) -> impl Stream<Item = ClusterEvent> + Send + use<> {
        let gvk = GroupVersionKind::gvk(CLUSTER_PROFILE_GROUP, "v1alpha1", "ClusterProfile");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "clusterprofiles");
        let scoped = |selectors: Selectors| match &self.namespace {
            Some(namespace) => selectors.in_namespace(namespace.clone()),
            None => selectors,
        };
        let options = || HandlerOptions::default().name("fleet-cluster-profiles");
        let profiles = hub.dynamic_informer_with(
            &resource,
            Scope::Namespaced,
            InformerSpec::new().selectors(scoped(Selectors::default())),
        );
        let access = match &self.credentials {
            Credentials::Access { provider, exec } => Some((provider.clone(), (**exec).clone())),
            Credentials::Secrets { .. } => None,
        };
        let profiles = profiles
            .stream(options())
            .flat_map(move |n| stream::iter(from_profile(&n, access.as_ref())));
        let secrets = match &self.credentials {
            Credentials::Secrets { consumer } => {
                let selector = format!("{CONSUMER_LABEL}={consumer},{PROFILE_LABEL}");
                let informer = hub.informer_with::<Secret>(
                    InformerSpec::new().selectors(scoped(Selectors::default().labels(selector))),
                );
                let secrets = informer.stream(options());
                secrets.flat_map(|n| stream::iter(from_secret(n))).boxed()
            }
            Credentials::Access { .. } => stream::empty().boxed(),
        };
        let mut join = Join::default();
        stream::select(profiles, secrets).flat_map(move |input| stream::iter(join.apply(input)))
    }
}

/// A profile's change: itself, and with an access provider its credentials too.
fn from_profile(
    notification: &Notification<DynamicObject>,
    access: Option<&(String, ExecConfig)>,
) -> Vec<Input> {
    let profile = notification.object();
    let name = member_name(&**profile, &profile.name_any());
    if matches!(notification, Notification::Delete(_)) {
        let mut gone = vec![Input::ObjectGone { name: name.clone() }];
        if access.is_some() {
            // The credentials came from the profile: they go with it.
            gone.push(Input::Credentials {
                name,
                kubeconfig: None,
            });
        }
        return gone;
    }
    let status = &profile.data["status"];
    let healthy = status["conditions"].as_array().is_some_and(|conditions| {
        conditions
            .iter()
            .any(|c| c["type"] == "ControlPlaneHealthy" && c["status"] == "True")
    });
    let mut inputs = Vec::new();
    if let Some((provider, exec)) = access {
        let kubeconfig = provider_cluster(status, provider).map(|c| kubeconfig(c, exec));
        inputs.push(Input::Credentials {
            name: name.clone(),
            kubeconfig,
        });
    }
    inputs.push(Input::Object {
        name,
        ready: healthy,
        deleting: profile.metadata.deletion_timestamp.is_some(),
        labels: profile.labels().clone(),
    });
    inputs
}

/// The `cluster` of the profile's access provider `provider` (`accessProviders` first,
/// then the deprecated `credentialProviders`).
fn provider_cluster<'a>(status: &'a Value, provider: &str) -> Option<&'a Value> {
    ["accessProviders", "credentialProviders"]
        .iter()
        .filter_map(|list| status[list].as_array())
        .flatten()
        .find(|p| p["name"] == provider)
        .map(|p| &p["cluster"])
}

/// A kubeconfig of `cluster` (a kubeconfig's cluster entry, its extensions kept) with
/// `exec` as its user.
fn kubeconfig(cluster: &Value, exec: &ExecConfig) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "member", "cluster": cluster}],
        "users": [{"name": "member", "user": {"exec": exec}}],
        "contexts": [{"name": "member", "context": {"cluster": "member", "user": "member"}}],
        "current-context": "member",
    })
    .to_string()
}

/// A consumer Secret's change, as the credentials of the profile it names — and, when it
/// was relabelled to another profile, the old one's credentials gone.
fn from_secret(notification: Notification<Secret>) -> Vec<Input> {
    let secret = notification.object();
    let of = |s: &Secret| {
        let profile = s.labels().get(PROFILE_LABEL)?;
        Some(member_name(s, profile))
    };
    let mut inputs = Vec::new();
    if let Notification::Update { old, new } = &notification
        && let Some(before) = of(old)
        && of(new).as_ref() != Some(&before)
    {
        inputs.push(Input::Credentials {
            name: before,
            kubeconfig: None,
        });
    }
    let Some(name) = of(secret) else {
        return inputs;
    };
    let gone = matches!(notification, Notification::Delete(_));
    let kubeconfig = (!gone).then(|| secret_text(secret, PROFILE_SECRET_KEY));
    inputs.push(Input::Credentials { name, kubeconfig });
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_provider_gives_a_kubeconfig_with_the_exec_plugin() {
        let status = json!({"accessProviders": [
            {"name": "other", "cluster": {"server": "https://other"}},
            {"name": "google", "cluster": {"server": "https://1.2.3.4", "certificate-authority-data": "Q0E=",
                "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "member-1"}}]}},
        ]});
        let exec = ExecConfig {
            api_version: Some("client.authentication.k8s.io/v1".into()),
            command: Some("plugin".into()),
            ..ExecConfig::default()
        };
        let cluster = provider_cluster(&status, "google").expect("found");
        let text = kubeconfig(cluster, &exec);
        let parsed = kube::config::Kubeconfig::from_yaml(&text).expect("a kubeconfig");
        let entry = parsed.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(entry.server.as_deref(), Some("https://1.2.3.4"));
        assert_eq!(entry.certificate_authority_data.as_deref(), Some("Q0E="));
        let extensions = entry.extensions.as_ref().expect("kept for the plugin");
        assert_eq!(extensions[0].extension["audience"], "member-1");
        let user = parsed.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(
            user.exec.as_ref().unwrap().command.as_deref(),
            Some("plugin")
        );
        assert!(provider_cluster(&status, "missing").is_none());
        let old = json!({"credentialProviders": [{"name": "google", "cluster": {"server": "https://old"}}]});
        assert_eq!(
            provider_cluster(&old, "google").unwrap()["server"],
            "https://old"
        );
    }

    #[test]
    fn a_consumer_secret_relabelled_to_another_profile_moves_its_credentials() {
        let secret = |profile: &str| {
            let secret: Secret = serde_json::from_value(json!({
                "metadata": {"name": "s", "namespace": "fleet",
                    "labels": {PROFILE_LABEL: profile, CONSUMER_LABEL: "me"}},
                "data": {PROFILE_SECRET_KEY: "a2luZDogQ29uZmln"},
            }))
            .unwrap();
            std::sync::Arc::new(secret)
        };
        let moved = from_secret(Notification::Update {
            old: secret("a"),
            new: secret("b"),
        });
        assert_eq!(
            moved,
            [
                Input::Credentials {
                    name: "fleet/a".into(),
                    kubeconfig: None,
                },
                Input::Credentials {
                    name: "fleet/b".into(),
                    kubeconfig: Some("kind: Config".into()),
                },
            ]
        );
        let same = from_secret(Notification::Update {
            old: secret("b"),
            new: secret("b"),
        });
        assert_eq!(same.len(), 1, "no profile left: {same:?}");
    }
}
