//! Starting kube-apiserver on a fixed loopback port and waiting until `/readyz` answers 200.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::LogTail;
use crate::options::{go_duration, merge_flags};
use crate::process::{Process, port_is_free};
use crate::{EnvironmentOptions, Error};

/// The files kube-apiserver reads and writes, all in the environment's folder.
pub(crate) struct ApiServerFiles {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) sa_public: PathBuf,
    pub(crate) sa_private: PathBuf,
    pub(crate) tokens: PathBuf,
    /// The audit policy and the audit log, when the audit log is on.
    pub(crate) audit: Option<(PathBuf, PathBuf)>,
    pub(crate) log: PathBuf,
}

/// The audit policy: every request at level Metadata, without the RequestReceived stage (so
/// a request is logged once it has been answered, or once a long-running one has started).
pub(crate) const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [\"RequestReceived\"]
rules:
- level: Metadata
";

/// Everything needed to start kube-apiserver again on the same port with the same data.
pub(crate) struct ApiServerLauncher {
    binary: PathBuf,
    args: Vec<OsString>,
    port: u16,
    log: PathBuf,
    startup_timeout: Duration,
}

impl ApiServerLauncher {
    pub(crate) fn new(
        binary: &Path,
        files: &ApiServerFiles,
        etcd_url: &str,
        port: u16,
        options: &EnvironmentOptions,
    ) -> ApiServerLauncher {
        let mut defaults = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", files.cert.display()),
            format!("--tls-private-key-file={}", files.key.display()),
            format!("--service-account-key-file={}", files.sa_public.display()),
            format!(
                "--service-account-signing-key-file={}",
                files.sa_private.display()
            ),
            "--service-account-issuer=https://kubernetes.default.svc".to_owned(),
            format!("--token-auth-file={}", files.tokens.display()),
            "--authorization-mode=AlwaysAllow".to_owned(),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            // No controller-manager creates service accounts for the admission plugin to find.
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            "--allow-privileged=true".to_owned(),
        ];
        if let Some(interval) = options.compaction_interval {
            defaults.push(format!(
                "--etcd-compaction-interval={}",
                go_duration(interval)
            ));
        }
        if let Some((policy, log)) = &files.audit {
            defaults.extend([
                format!("--audit-policy-file={}", policy.display()),
                format!("--audit-log-path={}", log.display()),
                // Each event is written by the request's own goroutine before the handler
                // returns: no batching, no buffering.
                "--audit-log-mode=blocking".to_owned(),
                "--audit-log-format=json".to_owned(),
                "--audit-log-maxsize=0".to_owned(),
            ]);
        }
        let args = merge_flags(defaults, &options.apiserver_args)
            .into_iter()
            .map(Into::into);
        ApiServerLauncher {
            binary: binary.to_owned(),
            args: args.collect(),
            port,
            log: files.log.clone(),
            startup_timeout: options.startup_timeout,
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Starts kube-apiserver and waits until `/readyz` answers 200 through `client` (which
    /// must not retry by itself). Fails with [`Error::PortInUse`] if the port stays taken
    /// for 30 s (a previous apiserver may take a moment to release it, longer on a busy
    /// machine).
    pub(crate) async fn start(&self, client: &kube::Client) -> Result<Process, Error> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !port_is_free(self.port) {
            if Instant::now() >= deadline {
                return Err(Error::PortInUse { port: self.port });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut process = Process::spawn("kube-apiserver", &self.binary, &self.args, &self.log)?;
        let started = Instant::now();
        let url = format!("https://127.0.0.1:{}/readyz", self.port);
        let mut last;
        loop {
            if let Some(status) = process.exit_status() {
                return Err(process.exited_error(status));
            }
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .expect("a valid request");
            match client.request_text(request).await {
                Ok(_) => {
                    tracing::info!(
                        url,
                        pid = process.pid(),
                        elapsed = ?started.elapsed(),
                        "kube-apiserver is ready"
                    );
                    return Ok(process);
                }
                Err(err) => last = err.to_string(),
            }
            if started.elapsed() >= self.startup_timeout {
                return Err(Error::Timeout {
                    process: "kube-apiserver",
                    url,
                    waited: started.elapsed(),
                    last,
                    log: LogTail::read(&self.log),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
