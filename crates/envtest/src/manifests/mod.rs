//! An operator's manifests installed into the environment, as controller-runtime's envtest
//! installs them (`CRDInstallOptions`, `WebhookInstallOptions`): CustomResourceDefinitions
//! and Mutating/ValidatingWebhookConfigurations read from files or folders (YAML with any
//! number of documents, or JSON), created, and waited for until the API server serves them.
//!
//! Webhook configurations (and the conversion webhooks of CRDs) are pointed at a local
//! webhook server: every `clientConfig` becomes `url: https://127.0.0.1:PORT/<its path>` with
//! the environment's own CA as `caBundle`, so a test serves its webhooks with the
//! certificate in [`LocalWebhooks::cert_dir`] on [`LocalWebhooks::address`] and the real
//! API server calls them.

mod apply;
mod read;
mod rewrite;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

pub(crate) use self::apply::{install_crds, install_webhooks};
pub use self::read::Manifest;
use crate::{Environment, Error, ServingCerts};

/// How long installed CRDs may take to be served.
const SERVED_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

impl Environment {
    /// Installs the CRDs at `path` (a file or a folder, as [`EnvironmentOptions::crds`]
    /// reads it) and waits until each is established and in discovery. Their names.
    ///
    /// [`EnvironmentOptions::crds`]: crate::EnvironmentOptions::crds
    ///
    /// # Errors
    /// [`Error::Manifest`] for a path or file that cannot be used, [`Error::Install`] for an
    /// object the server refused or did not serve within a minute.
    pub async fn install_crds(&self, path: impl AsRef<Path>) -> Result<Vec<String>, Error> {
        let paths = [path.as_ref().to_owned()];
        install_crds(&self.client(), &paths, &self.local_webhooks, SERVED_WITHIN).await
    }

    /// Installs the webhook configurations at `path` (as [`EnvironmentOptions::webhooks`]
    /// reads it), each webhook pointed at [`local_webhooks`](Self::local_webhooks). Their
    /// names. The API server starts calling a new configuration within about a second
    /// (it reads them through its own informer).
    ///
    /// [`EnvironmentOptions::webhooks`]: crate::EnvironmentOptions::webhooks
    ///
    /// # Errors
    /// As [`install_crds`](Self::install_crds).
    pub async fn install_webhooks(&self, path: impl AsRef<Path>) -> Result<Vec<String>, Error> {
        let paths = [path.as_ref().to_owned()];
        install_webhooks(&self.client(), &paths, &self.local_webhooks).await
    }

    /// Where the installed webhook configurations call: serve your webhooks there.
    pub fn local_webhooks(&self) -> &LocalWebhooks {
        &self.local_webhooks
    }
}

/// Where the environment's webhook configurations send their requests: a port on
/// `127.0.0.1` reserved at start, and a certificate for it signed by a CA that the
/// configurations trust. Serve your webhooks there (controller-runtime's
/// `LocalServingHost`, `LocalServingPort`, `LocalServingCertDir`).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use kube_envtest::{Environment, EnvironmentOptions};
///
/// let options = EnvironmentOptions::new()
///     .crds("config/crd/bases")
///     .webhooks("config/webhook/manifests.yaml");
/// let Some(env) = Environment::start_or_skip(options).await? else { return Ok(()) };
/// let webhooks = env.local_webhooks();
/// // e.g. kube-informer-runtime's WebhookServer::new(ServingCert::from_dir(webhooks.cert_dir()))
/// //          .address(webhooks.address())
/// println!("serve on {} with {}", webhooks.address(), webhooks.cert_dir().display());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct LocalWebhooks {
    port: u16,
    cert_dir: PathBuf,
    certs: ServingCerts,
}

impl LocalWebhooks {
    pub(crate) fn new(port: u16, cert_dir: PathBuf) -> Result<Self, Error> {
        let certs = ServingCerts::for_loopback()?;
        certs
            .write_to(&cert_dir)
            .map_err(|e| Error::io("writing the webhook serving certificate", &cert_dir, e))?;
        Ok(Self {
            port,
            cert_dir,
            certs,
        })
    }

    /// `127.0.0.1:PORT`: where to serve.
    pub fn address(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The folder with `tls.crt` and `tls.key` to serve with (and `ca.crt`).
    pub fn cert_dir(&self) -> &Path {
        &self.cert_dir
    }

    /// The CA and serving certificate (PEM), for a client that calls the server directly.
    pub fn certs(&self) -> &ServingCerts {
        &self.certs
    }

    /// The URL a webhook at `path` is called on.
    pub fn url(&self, path: &str) -> String {
        let path = path.strip_prefix('/').unwrap_or(path);
        format!("https://127.0.0.1:{}/{path}", self.port)
    }
}
