//! Kubeconfigs, `kube::Config`s and clients for a server URL that trust the environment's CA
//! and authenticate with its admin token.

use base64::Engine as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::Error;

/// A server as a client sees it: the kubeconfig, the config derived from it, and a client.
pub(crate) struct Endpoint {
    pub(crate) url: String,
    pub(crate) kubeconfig: Kubeconfig,
    pub(crate) config: kube::Config,
    pub(crate) client: kube::Client,
}

impl Endpoint {
    /// `name` names the cluster, user and context in the kubeconfig.
    pub(crate) async fn new(
        name: &str,
        url: String,
        ca_pem: &str,
        token: &str,
    ) -> Result<Endpoint, Error> {
        let kubeconfig = kubeconfig(name, &url, ca_pem, token);
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &KubeConfigOptions::default())
                .await
                .map_err(|source| Error::Kubeconfig {
                    server: url.clone(),
                    source,
                })?;
        let client = client(&config)?;
        Ok(Endpoint {
            url,
            kubeconfig,
            config,
            client,
        })
    }

    /// A client that never retries by itself: readiness polls see every answer.
    pub(crate) fn client_without_retries(&self) -> Result<kube::Client, Error> {
        let mut config = self.config.clone();
        config.default_retry = false;
        client(&config)
    }
}

pub(crate) fn client(config: &kube::Config) -> Result<kube::Client, Error> {
    kube::Client::try_from(config.clone()).map_err(|source| Error::Client {
        server: config.cluster_url.to_string(),
        source,
    })
}

fn kubeconfig(name: &str, url: &str, ca_pem: &str, token: &str) -> Kubeconfig {
    let ca_data = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let value = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {
            "server": url,
            "certificate-authority-data": ca_data,
        }}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    });
    serde_json::from_value(value).expect("a kubeconfig built from known fields")
}

/// The kubeconfig as a file: JSON, which is YAML too (kubectl and client-go read it).
pub(crate) fn to_file_contents(kubeconfig: &Kubeconfig) -> String {
    serde_json::to_string_pretty(kubeconfig).expect("a kubeconfig serializes")
}
