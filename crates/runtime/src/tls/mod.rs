//! Serving over TLS with a certificate that is reloaded when its files change: what the
//! [webhook server](crate::webhook) and the [secure metrics endpoint](crate::manager::SecureMetrics)
//! serve with (controller-runtime's `certwatcher`).
//!
//! Certificates in a cluster rotate: cert-manager renews a Secret, the kubelet updates the
//! mounted files a minute later, and a server that read them once keeps presenting the old
//! certificate until it expires. A [`ServingCert`] is read when the server starts (a missing
//! or broken file is an error then, naming the file), and re-read whenever the files'
//! contents change (checked every [`reload_every`](ServingCert::reload_every), 10 s by
//! default). New connections get the new certificate; a change that does not parse (a half
//! written file, a key that does not match) is logged and the previous certificate stays.
//! Reads and failed reads are counted in `certwatcher_read_certificate_total` and
//! `certwatcher_read_certificate_errors_total` ([`register_metrics`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use kube_informer_runtime::tls::ServingCert;
//!
//! // The files cert-manager's Secret mounts (kubebuilder's default folder).
//! let cert = ServingCert::from_dir("/tmp/k8s-webhook-server/serving-certs")
//!     .reload_every(Duration::from_secs(30));
//! # let _ = cert;
//! ```

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

mod metrics;
pub(crate) mod serve;

pub use self::metrics::register_metrics;

use parking_lot::RwLock;
use rustls::{
    ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};

/// Where a TLS server's certificate chain and private key are (PEM files), and how often
/// to look for a new pair.
#[derive(Clone, Debug)]
pub struct ServingCert {
    cert: PathBuf,
    key: PathBuf,
    reload_every: Duration,
}

impl ServingCert {
    /// The chain in `cert` (leaf first) and its key in `key` (PKCS#8, PKCS#1 or SEC1).
    pub fn from_files(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        ServingCert {
            cert: cert.into(),
            key: key.into(),
            reload_every: Duration::from_secs(10),
        }
    }

    /// `tls.crt` and `tls.key` in `dir`: the names of a `kubernetes.io/tls` Secret's keys
    /// when it is mounted as a volume.
    pub fn from_dir(dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        Self::from_files(dir.join("tls.crt"), dir.join("tls.key"))
    }

    /// How often the files are checked for a new certificate (default 10 s, as
    /// controller-runtime's certwatcher polls).
    #[must_use]
    pub fn reload_every(mut self, period: Duration) -> Self {
        self.reload_every = period;
        self
    }

    /// Reads the pair now: the watcher a server presents from.
    ///
    /// # Errors
    /// A file that cannot be read, holds no certificate or key, or a key that does not
    /// match the certificate.
    pub fn load(&self) -> Result<CertWatcher, TlsError> {
        let (files, key) = metrics::read(read_files(self).and_then(|files| {
            let key = certified_key(self, &files)?;
            Ok((files, key))
        }))?;
        Ok(CertWatcher {
            source: self.clone(),
            current: Arc::new(RwLock::new((files, Arc::new(key)))),
        })
    }
}

/// Why a certificate could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM item of the expected kind.
    #[error("{path}: {what}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
    /// The key does not fit the certificate, or is of a kind rustls cannot sign with.
    #[error("{cert} with {key}: {source}")]
    Key {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's error.
        #[source]
        source: rustls::Error,
    },
}

/// The certificate a server presents, re-read when its files change: give it to a rustls
/// `ServerConfig` as its certificate resolver ([`server_config`](Self::server_config)) and
/// call [`check`](Self::check) from time to time (the servers of this crate do, every
/// [`ServingCert::reload_every`]).
#[derive(Clone)]
pub struct CertWatcher {
    source: ServingCert,
    current: Arc<RwLock<(Files, Arc<CertifiedKey>)>>,
}

impl fmt::Debug for CertWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertWatcher")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// What a [`CertWatcher::check`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reload {
    /// The files are as they were.
    Unchanged,
    /// The files changed and the new pair is served from now on.
    Reloaded,
}

impl CertWatcher {
    /// Reads the files again; if they changed and the new pair is valid, new connections
    /// get it. A changed pair that is not valid is an error and the previous one stays.
    ///
    /// # Errors
    /// As [`ServingCert::load`]; the certificate in use does not change.
    pub fn check(&self) -> Result<Reload, TlsError> {
        metrics::read(self.reread())
    }

    fn reread(&self) -> Result<Reload, TlsError> {
        let files = read_files(&self.source)?;
        if self.current.read().0 == files {
            return Ok(Reload::Unchanged);
        }
        let key = certified_key(&self.source, &files)?;
        *self.current.write() = (files, Arc::new(key));
        Ok(Reload::Reloaded)
    }

    /// Checks every [`ServingCert::reload_every`] until dropped, logging reloads and
    /// failures (a failure keeps the previous certificate, and is tried again next time).
    pub async fn watch(self) {
        let mut failing = false;
        loop {
            tokio::time::sleep(self.source.reload_every).await;
            match self.check() {
                Ok(Reload::Reloaded) => {
                    failing = false;
                    tracing::info!(cert = %self.source.cert.display(), "serving certificate reloaded");
                }
                Ok(Reload::Unchanged) => failing = false,
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(%error, "cannot reload the serving certificate; keeping the previous one");
                }
                Err(_) => {}
            }
        }
    }

    /// The end-entity certificate served now (DER).
    pub fn current(&self) -> CertificateDer<'static> {
        self.current.read().1.cert[0].clone()
    }

    /// A rustls server configuration presenting this watcher's certificate, for HTTP/1.1.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports TLS 1.2 and 1.3")
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(self.clone()));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

impl ResolvesServerCert for CertWatcher {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().1.clone())
    }
}

/// The crypto provider: ring, as kube's TLS uses (one provider for the whole program).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The two files' contents, as last read.
#[derive(PartialEq, Eq)]
struct Files {
    cert: Vec<u8>,
    key: Vec<u8>,
}

fn read_files(source: &ServingCert) -> Result<Files, TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })
    };
    Ok(Files {
        cert: read(&source.cert)?,
        key: read(&source.key)?,
    })
}

fn certified_key(source: &ServingCert, files: &Files) -> Result<CertifiedKey, TlsError> {
    let pem = |path: &Path, what: String| TlsError::Pem {
        path: path.to_owned(),
        what,
    };
    let chain = CertificateDer::pem_slice_iter(&files.cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(&source.cert, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(pem(&source.cert, "no CERTIFICATE in the file".to_owned()));
    }
    let key = PrivateKeyDer::from_pem_slice(&files.key)
        .map_err(|e| pem(&source.key, format!("no usable private key: {e}")))?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|source_error| TlsError::Key {
        cert: source.cert.clone(),
        key: source.key.clone(),
        source: source_error,
    })
}
