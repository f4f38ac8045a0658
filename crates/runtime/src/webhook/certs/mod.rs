//! Webhook certificates without cert-manager: the manager makes a CA and a serving
//! certificate, keeps them in a Secret (so every replica serves the same), writes the CA
//! bundle into the webhook configurations and CRD conversion webhooks that call it, and
//! rotates both before they expire — the CA with an overlap, so the API server trusts the
//! new CA before any replica serves a certificate signed by it.
//!
//! ```no_run
//! # async fn demo(client: kube::Client, mut manager: kube_informer_runtime::Manager) -> Result<(), Box<dyn std::error::Error>> {
//! use kube_informer_runtime::{tls::ServingCert, webhook::{WebhookServer, certs::WebhookCerts}};
//!
//! // The Service `webhook-service` in `system` fronts the webhook server's pods.
//! let certs = WebhookCerts::for_service(client, "system", "webhook-service", "webhook-server-cert")
//!     .validating("validating-webhook-configuration")
//!     .mutating("mutating-webhook-configuration")
//!     .conversion("widgets.example.com");
//! certs.provision().await?; // the Secret, the files, the caBundles: before the server binds
//! let server = WebhookServer::new(ServingCert::from_dir(certs.dir())).bind().await?;
//! manager.add_webhook_certs(certs); // checks every minute, on every replica
//! manager.add_webhooks(server);
//! # Ok(()) }
//! ```
//!
//! # How rotation stays invisible
//!
//! A certificate is renewed when a third of its life is left (defaults: CA 10 years,
//! serving certificate 1 year). The serving certificate is signed by a CA already in the
//! bundle, so renewing it is safe at once. A CA is rolled in two steps: a next CA joins the
//! bundle (and the bundle is injected), and only once every named configuration has been
//! seen holding it for [`overlap`](WebhookCerts::overlap) (default 10 minutes) does it
//! sign the serving certificate. While the bundle cannot be injected (RBAC without
//! `update`, a GitOps tool reverting it) the roll waits and the old CA keeps signing; each
//! failure is logged as an error and counted in
//! `webhook_certificate_injection_failures_total{target, reason}`. An old CA stays in the
//! bundle until it expires, and a bundle made afresh (the Secret deleted) keeps every CA
//! the configurations already trust. Each replica writes the Secret's certificate to its files,
//! which the webhook server re-reads ([`ServingCert::reload_every`](crate::tls::ServingCert::reload_every)).
//!
//! Replicas share the work without an election: each check reads the Secret, decides from
//! it and the time alone, and writes with the `resourceVersion` it read. Of two replicas
//! deciding at once one write wins; the other reads the winner's and finds nothing left to
//! do. A `caBundle` someone else changed is written back at the next check.
//!
//! Needs: `get`, `create`, `update` on the Secret's namespace's `secrets`; `get`, `update`
//! on the named webhook configurations and CRDs (the manager's
//! [`rbac`](crate::Manager::rbac) lists them).

mod inject;
mod metrics;
mod pki;
mod plan;
mod secret;
#[cfg(test)]
mod tests;

pub(crate) use self::metrics::register_metrics;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use tokio_util::sync::CancellationToken;

use self::{inject::Targets, plan::CertSpec, plan::Stored};

/// Why the certificates could not be made, stored, or injected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// Reading or writing the Secret failed.
    #[error("the webhook certificates' Secret: {0}")]
    Secret(#[source] kube::Error),
    /// Other writers kept changing an object first (the Secret, or one the bundle goes
    /// into); the next check tries again.
    #[error("{what} changed under each of {tries} writes")]
    Contended {
        /// The object.
        what: String,
        /// How many writes were tried.
        tries: usize,
    },
    /// A key or certificate could not be made.
    #[error("making a webhook certificate: {0}")]
    Generate(#[source] rcgen::Error),
    /// The CA bundle could not be written into a webhook configuration or CRD.
    #[error("injecting the webhook CA bundle: {0}")]
    Inject(#[source] kube::Error),
    /// The certificate files could not be written.
    #[error("writing {}: {source}", path.display())]
    Files {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// How many times a read-and-write that lost to another writer is made again.
const WRITES: usize = 5;

/// Runs `attempt` (read an object, decide, write it back with the resourceVersion read)
/// until it is done: `Ok(None)` is a write that lost to another writer (409 Conflict, see
/// [`lost_race`]) and reads again, from what that writer left. After [`WRITES`] lost
/// writes it gives up with [`CertError::Contended`] on `what`; the next check tries again.
async fn write_again_on_conflict<T, F>(
    what: impl FnOnce() -> String,
    mut attempt: impl FnMut() -> F,
) -> Result<T, CertError>
where
    F: Future<Output = Result<Option<T>, CertError>>,
{
    for _ in 0..WRITES {
        if let Some(done) = attempt().await? {
            return Ok(done);
        }
    }
    Err(CertError::Contended {
        what: what(),
        tries: WRITES,
    })
}

/// A write's result, with a 409 Conflict (another writer first, on update; on create, it
/// created the object first) as `Ok(None)`, to be read and made again.
fn lost_race<T>(written: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match written {
        Ok(written) => Ok(Some(written)),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
        Err(error) => Err(error),
    }
}

/// A webhook server's certificates, made and rotated by the manager (see the
/// [module docs](self)).
#[derive(Clone)]
pub struct WebhookCerts {
    client: kube::Client,
    namespace: String,
    secret: String,
    spec: CertSpec,
    targets: Targets,
    cert_dir: PathBuf,
    check_every: Duration,
    /// What this replica last wrote into each target (to tell a revert).
    written: Arc<inject::Written>,
    /// The CA that signed the serving certificate this replica last wrote to its files.
    serving_ca: Arc<parking_lot::Mutex<Option<String>>>,
}

impl std::fmt::Debug for WebhookCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookCerts")
            .field("namespace", &self.namespace)
            .field("secret", &self.secret)
            .field("spec", &self.spec)
            .field("targets", &self.targets)
            .field("cert_dir", &self.cert_dir)
            .finish_non_exhaustive()
    }
}

impl WebhookCerts {
    /// Certificates for `dns_names` (and IP addresses), kept in the Secret `secret` in
    /// `namespace`.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        secret: &str,
        dns_names: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            client,
            namespace: namespace.to_owned(),
            secret: secret.to_owned(),
            spec: CertSpec {
                name: secret.to_owned(),
                names: dns_names.into_iter().map(Into::into).collect(),
                ca_validity: Duration::from_secs(10 * 365 * 86_400),
                serving_validity: Duration::from_secs(365 * 86_400),
                overlap: Duration::from_secs(600),
            },
            targets: Targets::default(),
            cert_dir: std::env::temp_dir().join("k8s-webhook-server/serving-certs"),
            check_every: Duration::from_secs(60),
            written: Arc::default(),
            serving_ca: Arc::default(),
        }
    }

    /// Certificates for the Service `service` in `namespace` (the names the API server
    /// calls it by: `service.namespace.svc` and the shorter and longer forms), kept in the
    /// Secret `secret` there.
    pub fn for_service(client: kube::Client, namespace: &str, service: &str, secret: &str) -> Self {
        let names = [
            format!("{service}.{namespace}.svc"),
            format!("{service}.{namespace}.svc.cluster.local"),
            format!("{service}.{namespace}"),
            service.to_owned(),
        ];
        Self::new(client, namespace, secret, names)
    }

    /// Injects the CA bundle into every webhook of this MutatingWebhookConfiguration.
    #[must_use]
    pub fn mutating(mut self, name: &str) -> Self {
        self.targets.mutating.push(name.to_owned());
        self
    }

    /// Injects the CA bundle into every webhook of this ValidatingWebhookConfiguration.
    #[must_use]
    pub fn validating(mut self, name: &str) -> Self {
        self.targets.validating.push(name.to_owned());
        self
    }

    /// Injects the CA bundle into this CRD's conversion webhook.
    #[must_use]
    pub fn conversion(mut self, crd: &str) -> Self {
        self.targets.conversions.push(crd.to_owned());
        self
    }

    /// Where `tls.crt`, `tls.key` and `ca.crt` are written for the webhook server (default
    /// `$TMPDIR/k8s-webhook-server/serving-certs`, controller-runtime's folder).
    #[must_use]
    pub fn cert_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cert_dir = dir.into();
        self
    }

    /// How long a CA lasts (default 10 years; rolled when a third is left).
    #[must_use]
    pub fn ca_validity(mut self, lasts: Duration) -> Self {
        self.spec.ca_validity = lasts;
        self
    }

    /// How long a serving certificate lasts (default 1 year, never past its CA; renewed
    /// when a third is left).
    #[must_use]
    pub fn serving_validity(mut self, lasts: Duration) -> Self {
        self.spec.serving_validity = lasts;
        self
    }

    /// How long a next CA is trusted before it signs (default 10 minutes; at most a sixth
    /// of the CA's life): longer than the API servers take to see a new `caBundle`.
    #[must_use]
    pub fn overlap(mut self, overlap: Duration) -> Self {
        self.spec.overlap = overlap;
        self
    }

    /// How often the certificates are checked (default 1 minute).
    #[must_use]
    pub fn check_every(mut self, period: Duration) -> Self {
        self.check_every = period;
        self
    }

    /// What the checks need: the Secret's namespace's `secrets`, and each kind of object the
    /// bundle goes into (RBAC rules here name no objects, so cluster-wide).
    pub(crate) fn permissions(&self) -> crate::rbac::Rbac {
        use crate::rbac::Verb::{Create, Get, Update};
        let mut rbac = crate::rbac::Rbac::default();
        let namespace = std::slice::from_ref(&self.namespace);
        rbac.allow("", "secrets", namespace, &[Get, Create, Update]);
        let reg = "admissionregistration.k8s.io";
        let kinds = [
            (reg, "mutatingwebhookconfigurations", &self.targets.mutating),
            (
                reg,
                "validatingwebhookconfigurations",
                &self.targets.validating,
            ),
            (
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                &self.targets.conversions,
            ),
        ];
        for (group, resource, names) in kinds {
            if !names.is_empty() {
                rbac.allow(group, resource, &[], &[Get, Update]);
            }
        }
        rbac
    }

    /// The folder the webhook server reads its certificate from.
    pub fn dir(&self) -> &Path {
        &self.cert_dir
    }

    /// One check: the Secret made or rotated as needed, the files written, the CA bundle
    /// injected. Call it before the webhook server binds (it reads the files).
    ///
    /// # Errors
    /// [`CertError`]: the Secret could not be read or written, a certificate made, a file
    /// written, or the bundle injected.
    pub async fn provision(&self) -> Result<(), CertError> {
        self.check(unix_now).await
    }

    /// [`provision`](Self::provision) at the time `now` tells (Unix seconds).
    async fn check(&self, now: impl Fn() -> i64) -> Result<(), CertError> {
        // What the configurations trust before anything is written: a next CA is promoted
        // only once they have all held it for the overlap.
        let trusted = inject::observe(&self.client, &self.targets).await;
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let (stored, steps) =
            secret::settle(&api, &self.secret, &self.spec, &trusted, &now).await?;
        for step in &steps {
            tracing::info!(secret = %self.secret, ?step, "webhook certificates changed");
            metrics::changed(*step);
        }
        metrics::record_expiry(&stored);
        use base64::Engine as _;
        let bundle = base64::engine::general_purpose::STANDARD.encode(&stored.bundle);
        let injected = inject::inject(&self.client, &self.targets, &bundle, &self.written).await;
        // The bundle before the certificate: a serving certificate of another CA is switched
        // to only once the configurations trust it (injected now, or already); one of the
        // CA already served (a renewal), or in place of one expired or unreadable, at once.
        let signer = stored
            .ca
            .as_ref()
            .map(|ca| ca.cert.as_str())
            .unwrap_or_default();
        let same_signer = self.serving_ca.lock().as_deref() == Some(signer);
        let served = std::fs::read_to_string(self.cert_dir.join("tls.crt")).unwrap_or_default();
        let spent = pki::not_after(&served).is_none_or(|end| end <= now());
        let serve = injected.is_ok() || trusted.everywhere(signer) || same_signer || spent;
        if let Err(error) = &injected {
            tracing::error!(%error, secret = %self.secret, "the webhook CA bundle could not be injected: the CA roll waits and the certificate served stays one the API server trusts");
        }
        write_files(&self.cert_dir, &stored, serve)?;
        if serve {
            *self.serving_ca.lock() = Some(signer.to_owned());
        }
        injected.map(|_| ())
    }

    /// Checks every [`check_every`](Self::check_every) until `cancel`; a failed check is
    /// logged and tried again at the next.
    pub async fn run(self, cancel: CancellationToken) {
        loop {
            if let Err(error) = self.provision().await {
                tracing::warn!(%error, secret = %self.secret, "webhook certificate check failed; retrying");
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(self.check_every) => {}
            }
        }
    }
}

fn unix_now() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_secs()).unwrap_or(i64::MAX)
}

/// Writes the serving pair and the bundle where they differ (each file whole: written
/// aside, then renamed, so the server never reads half a file). Unless `serve` (the
/// configurations trust the pair's CA), a pair already there is kept.
fn write_files(dir: &Path, stored: &Stored, serve: bool) -> Result<(), CertError> {
    let failed = |path: &Path| {
        let path = path.to_owned();
        move |source| CertError::Files { path, source }
    };
    std::fs::create_dir_all(dir).map_err(failed(dir))?;
    let Some(serving) = &stored.serving else {
        return Ok(());
    };
    if !serve && dir.join("tls.crt").exists() {
        return Ok(());
    }
    // The key before the certificate: a reader that sees the new certificate finds its key.
    for (name, text) in [
        ("tls.key", &serving.key),
        ("tls.crt", &serving.cert),
        ("ca.crt", &stored.bundle),
    ] {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).is_ok_and(|old| old == *text) {
            continue;
        }
        let aside = dir.join(format!(".{name}.tmp"));
        std::fs::write(&aside, text).map_err(failed(&aside))?;
        std::fs::rename(&aside, &path).map_err(failed(&path))?;
    }
    Ok(())
}
