//! The errors of this crate: each says what failed and with which file, URL, port or process.

use std::path::PathBuf;
use std::time::Duration;

use crate::assets::AssetsError;

/// Everything that can go wrong while starting, driving or reading an [`Environment`].
///
/// Errors about a process carry the path of its log file and the last lines of it, so a
/// test failure shows why etcd or kube-apiserver did not come up.
///
/// ```
/// use kube_envtest::{Assets, Error};
///
/// let err: Error = Assets::in_dir("/nonexistent/envtest-bin").unwrap_err().into();
/// assert!(err.to_string().contains("/nonexistent/envtest-bin"));
/// ```
///
/// [`Environment`]: crate::Environment
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The binaries could not be found.
    #[error(transparent)]
    Assets(#[from] AssetsError),

    /// A file or directory operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "writing the token file".
        action: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// No free loopback port could be reserved.
    #[error("reserving a free port on 127.0.0.1: {0}")]
    NoFreePort(#[source] std::io::Error),

    /// A binary could not be started at all.
    #[error("starting {}: {source}", binary.display())]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A process exited while it was expected to come up or to keep running.
    #[error("{process} exited ({status}) before it was ready; {log}")]
    Exited {
        /// `etcd` or `kube-apiserver`.
        process: &'static str,
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its log file and last lines.
        log: Box<LogTail>,
    },

    /// A process did not become ready in time.
    #[error("{process} was not ready at {url} after {waited:?} (last answer: {last}); {log}")]
    Timeout {
        /// `etcd` or `kube-apiserver`.
        process: &'static str,
        /// The readiness URL that was polled.
        url: String,
        /// How long it was polled.
        waited: Duration,
        /// What the last poll got.
        last: String,
        /// Its log file and last lines.
        log: Box<LogTail>,
    },

    /// A process did not exit in time after being told to.
    #[error("{process} (pid {pid}) did not exit within {waited:?} after {signal}")]
    DidNotExit {
        /// `etcd` or `kube-apiserver`.
        process: &'static str,
        /// Its process id.
        pid: u32,
        /// The signal sent.
        signal: &'static str,
        /// How long it was waited for.
        waited: Duration,
    },

    /// A signal could not be sent.
    #[error("sending {signal} to {process} (pid {pid}): {source}")]
    Signal {
        /// `etcd` or `kube-apiserver`.
        process: &'static str,
        /// Its process id.
        pid: u32,
        /// The signal.
        signal: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// `start_apiserver` was called while kube-apiserver is running.
    #[error("kube-apiserver is already running on port {port} (pid {pid})")]
    ApiServerRunning {
        /// Its port.
        port: u16,
        /// Its process id.
        pid: u32,
    },

    /// The apiserver's port is held by another process, so it cannot be restarted on it.
    #[error("port {port} on 127.0.0.1 is still in use, kube-apiserver cannot be started on it")]
    PortInUse {
        /// The port.
        port: u16,
    },

    /// A manifest file could not be used: not found, not YAML or JSON, or an object of a
    /// kind that path does not install.
    #[error("manifest {}: {reason}", path.display())]
    Manifest {
        /// The file or folder.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A manifest's object could not be installed, or was not served in time.
    #[error("installing {what}: {reason}")]
    Install {
        /// The object and the file it came from.
        what: String,
        /// The API server's answer, or what was still missing.
        reason: String,
    },

    /// A certificate or key could not be generated.
    #[error("generating the {what}: {source}")]
    Certificate {
        /// Which certificate or key.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: rcgen::Error,
    },

    /// The random source failed.
    #[error("the system random source failed while generating the admin token")]
    Random,

    /// The kubeconfig could not be turned into a client configuration.
    #[error("loading the kubeconfig for {server}: {source}")]
    Kubeconfig {
        /// The server URL in it.
        server: String,
        /// The underlying error.
        #[source]
        source: kube::config::KubeconfigError,
    },

    /// A `kube::Client` could not be built.
    #[error("building a client for {server}: {source}")]
    Client {
        /// The server URL.
        server: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },

    /// A line of the audit log is not an audit event.
    #[error("line {line} of the audit log {} is not an audit event: {source}", path.display())]
    AuditLine {
        /// The audit log.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },

    /// No audit event matched within the time allowed.
    #[error("no audit event in {} matched within {waited:?}", path.display())]
    AuditTimeout {
        /// The audit log.
        path: PathBuf,
        /// How long it was polled.
        waited: Duration,
    },

    /// The audit log was turned off in [`EnvironmentOptions`](crate::EnvironmentOptions).
    #[error("the audit log is off for this environment (EnvironmentOptions::audit_log(false))")]
    AuditLogOff,
}

/// A process's log file and its last lines, quoted by start errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTail {
    /// The log file (the process's stdout and stderr).
    pub path: PathBuf,
    /// Its last lines, indented.
    pub tail: String,
}

impl std::fmt::Display for LogTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "log {}, last lines:\n{}", self.path.display(), self.tail)
    }
}

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
