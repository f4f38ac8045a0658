//! [`Environment`]: etcd and kube-apiserver running on loopback, with clients for them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::config::Kubeconfig;

use crate::apiserver::{AUDIT_POLICY, ApiServerFiles, ApiServerLauncher};
use crate::audit::{AuditEvent, read_audit_log, requests};
use crate::etcd::start_etcd;
use crate::kubeconfig::{Endpoint, to_file_contents};
use crate::manifests::LocalWebhooks;
use crate::pki::Pki;
use crate::process::{Process, free_port, lost_port_race};
use crate::proxy::Proxy;
use crate::tempdir::TempDir;
use crate::{Assets, EnvironmentOptions, Error};

/// How many times a start is retried when another process took a port we had reserved.
const PORT_RACE_ATTEMPTS: usize = 3;

/// A real etcd and kube-apiserver on `127.0.0.1`, each on a free port, in a private temp
/// folder; clients that trust its CA and use its admin token (group `system:masters`); the
/// audit log; fault injection (stop, kill, restart the apiserver, partition the network).
///
/// Dropping it kills both processes (SIGKILL), waits for them to exit and removes the folder,
/// also when a test panics. If the test process itself is SIGKILLed, nothing runs and the
/// children outlive it: they are ordinary processes, not tied to their parent.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::{Api, PostParams};
/// use kube_envtest::{Environment, EnvironmentOptions};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let Some(env) = Environment::start_or_skip(EnvironmentOptions::new()).await? else {
///     return Ok(()); // the binaries are missing: skipped, loudly
/// };
/// let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("settings".into());
/// cms.create(&PostParams::default(), &cm).await?;
/// # Ok(())
/// # }
/// ```
pub struct Environment {
    pub(crate) apiserver: Option<Process>,
    pub(crate) terminated: Vec<Process>,
    pub(crate) etcd: Process,
    pub(crate) launcher: ApiServerLauncher,
    pub(crate) readiness: kube::Client,
    pub(crate) stop_grace: Duration,
    proxy: Proxy,
    endpoint: Endpoint,
    ca_pem: String,
    token: String,
    etcd_url: String,
    kubeconfig_path: PathBuf,
    audit_log: Option<PathBuf>,
    pub(crate) local_webhooks: LocalWebhooks,
    dir: TempDir,
}

impl Environment {
    /// Starts etcd, then kube-apiserver, and returns once `/readyz` answers 200 (typically
    /// 2–5 s). The binaries come from [`EnvironmentOptions::assets`] or `KUBEBUILDER_ASSETS`.
    pub async fn start(options: EnvironmentOptions) -> Result<Environment, Error> {
        let started = Instant::now();
        let assets = match &options.assets {
            Some(assets) => assets.clone(),
            None => Assets::from_env()?,
        };
        let dir = TempDir::new(options.keep_dir)?;
        let pki = Pki::generate()?;
        let audit = if options.audit_log {
            Some((
                dir.write("audit-policy.yaml", AUDIT_POLICY)?,
                dir.path().join("audit.log"),
            ))
        } else {
            None
        };
        let files = ApiServerFiles {
            cert: dir.write("serving.crt", &pki.serving_cert_pem)?,
            key: dir.write("serving.key", &pki.serving_key_pem)?,
            sa_public: dir.write("sa.pub", &pki.sa_public_pem)?,
            sa_private: dir.write("sa.key", &pki.sa_private_pem)?,
            tokens: dir.write(
                "tokens.csv",
                &format!("{},admin,admin,system:masters\n", pki.token),
            )?,
            audit,
            log: dir.path().join("kube-apiserver.log"),
        };
        dir.write("ca.crt", &pki.ca_pem)?;

        let etcd_data = dir.create_subdir("etcd")?;
        let etcd_log = dir.path().join("etcd.log");
        let etcd = start_etcd(assets.etcd(), &etcd_data, &etcd_log, &options).await?;

        let mut attempt = 1;
        let (apiserver, launcher, endpoint, readiness) = loop {
            let port = free_port()?;
            let url = format!("https://127.0.0.1:{port}");
            let endpoint = Endpoint::new("envtest", url, &pki.ca_pem, &pki.token).await?;
            let readiness = endpoint.client_without_retries()?;
            let launcher =
                ApiServerLauncher::new(assets.kube_apiserver(), &files, &etcd.url, port, &options);
            match launcher.start(&readiness).await {
                Ok(process) => break (process, launcher, endpoint, readiness),
                Err(Error::Exited { .. })
                    if attempt < PORT_RACE_ATTEMPTS && lost_port_race(&files.log) =>
                {
                    tracing::info!(port, "kube-apiserver lost a port race, retrying");
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        };
        let proxy = Proxy::start(launcher.port(), &pki.ca_pem, &pki.token).await?;
        let kubeconfig_path = dir.write("kubeconfig", &to_file_contents(&endpoint.kubeconfig))?;
        let webhook_certs = dir.create_subdir("webhook-certs")?;
        let local_webhooks = LocalWebhooks::new(free_port()?, webhook_certs)?;
        tracing::info!(
            url = endpoint.url,
            dir = %dir.path().display(),
            elapsed = ?started.elapsed(),
            "envtest environment started"
        );
        let env = Environment {
            apiserver: Some(apiserver),
            terminated: Vec::new(),
            etcd: etcd.process,
            launcher,
            readiness,
            stop_grace: options.stop_grace_period,
            proxy,
            endpoint,
            ca_pem: pki.ca_pem,
            token: pki.token,
            etcd_url: etcd.url,
            kubeconfig_path,
            audit_log: files.audit.map(|(_, log)| log),
            local_webhooks,
            dir,
        };
        // On an error the environment is dropped: both processes stop, the folder goes.
        for path in &options.crds {
            env.install_crds(path).await?;
        }
        for path in &options.webhooks {
            env.install_webhooks(path).await?;
        }
        Ok(env)
    }

    /// For tests: [`start`](Self::start), or `Ok(None)` after a prominent SKIPPED banner on
    /// stderr when the binaries are missing ([`Assets::from_env_or_skip`]; the banner names
    /// the current test, taken from the thread's name).
    ///
    /// # Panics
    /// When the binaries are missing and `KUBE_ENVTEST_REQUIRED=1`: CI sets it so these tests
    /// can never be skipped silently. Binaries that are present but fail to start are an
    /// `Err`, never a skip.
    pub async fn start_or_skip(options: EnvironmentOptions) -> Result<Option<Environment>, Error> {
        let options = match options.assets {
            Some(_) => options,
            None => {
                let thread = std::thread::current();
                let test = thread.name().unwrap_or("this test");
                match Assets::from_env_or_skip(test) {
                    Some(assets) => options.assets(assets),
                    None => return Ok(None),
                }
            }
        };
        Environment::start(options).await.map(Some)
    }

    /// A client for the apiserver (a clone of one client: clones share connections). It has
    /// kube's defaults, retries of 429/503/504 included; [`config`](Self::config) to change.
    pub fn client(&self) -> kube::Client {
        self.endpoint.client.clone()
    }

    /// The client configuration, to adjust (timeouts, retries) before building a client with
    /// `kube::Client::try_from`.
    pub fn config(&self) -> kube::Config {
        self.endpoint.config.clone()
    }

    /// A kubeconfig for the apiserver: its URL, the CA (inline), the admin token.
    pub fn kubeconfig(&self) -> Kubeconfig {
        self.endpoint.kubeconfig.clone()
    }

    /// The kubeconfig as a file in the environment's folder (JSON, which kubectl reads):
    /// `kubectl --kubeconfig PATH get ns`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// Writes the kubeconfig to `path` (outlives the environment, but the server does not).
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        std::fs::write(path, to_file_contents(&self.endpoint.kubeconfig))
            .map_err(|e| Error::io("writing the kubeconfig", path, e))
    }

    /// `https://127.0.0.1:PORT`: the apiserver's URL. It keeps its port across restarts.
    pub fn url(&self) -> &str {
        &self.endpoint.url
    }

    /// The apiserver's port.
    pub fn port(&self) -> u16 {
        self.launcher.port()
    }

    /// The admin bearer token (user `admin`, group `system:masters`).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The CA certificate (PEM) that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// etcd's client URL (`http://127.0.0.1:PORT`).
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The environment's folder: certificates, tokens, etcd data, logs, audit log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// kube-apiserver's stdout and stderr (every start appends, after a header line).
    pub fn apiserver_log_path(&self) -> PathBuf {
        self.dir.path().join("kube-apiserver.log")
    }

    /// etcd's stdout and stderr.
    pub fn etcd_log_path(&self) -> PathBuf {
        self.etcd.log().to_owned()
    }

    /// The TCP proxy in front of the apiserver, for network partitions.
    pub fn proxy(&self) -> &Proxy {
        &self.proxy
    }

    /// A client through the [`proxy`](Self::proxy): it fails as [`Proxy::partition`] says.
    pub fn partitionable_client(&self) -> kube::Client {
        self.proxy.client()
    }

    /// The audit log file (`None` when turned off); the apiserver creates it on its first event.
    pub fn audit_log_path(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// Every event in the audit log so far (see [`crate::audit`] for the stages).
    pub fn audit_events(&self) -> Result<Vec<AuditEvent>, Error> {
        read_audit_log(self.audit_log.as_deref().ok_or(Error::AuditLogOff)?)
    }

    /// One event per request so far ([`AuditEvent::is_request`]).
    pub fn audit_requests(&self) -> Result<Vec<AuditEvent>, Error> {
        Ok(requests(self.audit_events()?))
    }

    /// Polls the audit log until an event matches, for at most `timeout`, and returns the
    /// first match. See [`crate::audit`] for when an event is in the file.
    pub async fn wait_for_audit_event(
        &self,
        timeout: Duration,
        mut matches: impl FnMut(&AuditEvent) -> bool,
    ) -> Result<AuditEvent, Error> {
        let path = self.audit_log.as_deref().ok_or(Error::AuditLogOff)?;
        let started = Instant::now();
        loop {
            if let Some(event) = read_audit_log(path)?.into_iter().find(|e| matches(e)) {
                return Ok(event);
            }
            if started.elapsed() >= timeout {
                return Err(Error::AuditTimeout {
                    path: path.to_owned(),
                    waited: timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environment")
            .field("url", &self.endpoint.url)
            .field("apiserver_pid", &self.apiserver.as_ref().map(Process::pid))
            .field("etcd_pid", &self.etcd.pid())
            .field("etcd_url", &self.etcd_url)
            .field("dir", &self.dir.path())
            .field("proxy", &self.proxy)
            .finish_non_exhaustive()
    }
}

impl Drop for Environment {
    fn drop(&mut self) {
        // Kill before the folder goes: etcd's data and the logs are in it.
        self.apiserver.take();
        self.terminated.clear();
        self.etcd.kill_blocking();
        tracing::debug!(dir = %self.dir.path().display(), "envtest environment dropped");
    }
}
