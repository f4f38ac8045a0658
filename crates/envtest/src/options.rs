//! [`EnvironmentOptions`]: what an [`Environment`](crate::Environment) starts with.

use std::{path::PathBuf, time::Duration};

use crate::Assets;

/// How to start an [`Environment`](crate::Environment). Consuming setters:
///
/// ```
/// use std::{path::PathBuf, time::Duration};
/// use kube_envtest::EnvironmentOptions;
///
/// let options = EnvironmentOptions::new()
///     .compaction_interval(Duration::from_secs(10))
///     .apiserver_arg("--watch-cache=false")
///     .startup_timeout(Duration::from_secs(30));
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
pub struct EnvironmentOptions {
    pub(crate) assets: Option<Assets>,
    pub(crate) compaction_interval: Option<Duration>,
    pub(crate) audit_log: bool,
    pub(crate) apiserver_args: Vec<String>,
    pub(crate) etcd_args: Vec<String>,
    pub(crate) startup_timeout: Duration,
    pub(crate) stop_grace_period: Duration,
    pub(crate) keep_dir: bool,
    pub(crate) crds: Vec<PathBuf>,
    pub(crate) webhooks: Vec<PathBuf>,
}

impl Default for EnvironmentOptions {
    fn default() -> Self {
        EnvironmentOptions {
            assets: None,
            compaction_interval: None,
            audit_log: true,
            apiserver_args: Vec::new(),
            etcd_args: Vec::new(),
            startup_timeout: Duration::from_secs(60),
            stop_grace_period: Duration::from_secs(5),
            keep_dir: false,
            crds: Vec::new(),
            webhooks: Vec::new(),
        }
    }
}

impl EnvironmentOptions {
    /// The defaults: binaries from `KUBEBUILDER_ASSETS`, the apiserver's own compaction
    /// interval (5 min), the audit log on, a 60 s startup timeout, a 5 s grace period on stop.
    pub fn new() -> Self {
        EnvironmentOptions::default()
    }

    /// Use these binaries instead of looking up `KUBEBUILDER_ASSETS`.
    pub fn assets(mut self, assets: Assets) -> Self {
        self.assets = Some(assets);
        self
    }

    /// How often the apiserver compacts etcd (`--etcd-compaction-interval`). Short intervals
    /// (e.g. 10 s) let tests see `410 Gone` for old resource versions. The compaction lags one
    /// interval behind; and kube-apiserver 1.36 still answers exact LISTs at compacted
    /// versions from its watch cache's snapshots for a while (~13 s measured with a 1 s
    /// interval) unless started with `--feature-gates=ListFromCacheSnapshot=false`.
    pub fn compaction_interval(mut self, interval: Duration) -> Self {
        self.compaction_interval = Some(interval);
        self
    }

    /// Record every request in the audit log (default: on).
    pub fn audit_log(mut self, on: bool) -> Self {
        self.audit_log = on;
        self
    }

    /// An extra kube-apiserver flag. In the `--name=value` form it replaces a flag of the same
    /// name that the environment would pass; otherwise it is appended.
    pub fn apiserver_arg(mut self, arg: impl Into<String>) -> Self {
        self.apiserver_args.push(arg.into());
        self
    }

    /// Extra kube-apiserver flags, as [`apiserver_arg`](Self::apiserver_arg).
    pub fn apiserver_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.apiserver_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// An extra etcd flag, merged as [`apiserver_arg`](Self::apiserver_arg). (Some reduced
    /// etcd builds accept only the flags the environment passes already; an etcd from
    /// `kube-envtest install` or setup-envtest accepts all of its own.)
    pub fn etcd_arg(mut self, arg: impl Into<String>) -> Self {
        self.etcd_args.push(arg.into());
        self
    }

    /// Extra etcd flags, as [`etcd_arg`](Self::etcd_arg).
    pub fn etcd_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.etcd_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// How long each process may take to become ready (default 60 s). A timeout error names
    /// the process and shows the tail of its log.
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// How long [`stop_apiserver`](crate::Environment::stop_apiserver) and
    /// [`stop`](crate::Environment::stop) wait after SIGTERM before SIGKILL (default 5 s).
    /// kube-apiserver keeps serving open watches for up to 60 s after SIGTERM.
    pub fn stop_grace_period(mut self, grace: Duration) -> Self {
        self.stop_grace_period = grace;
        self
    }

    /// Keep the environment's folder (logs, audit log, etcd data) after it is dropped, for
    /// debugging; its path is logged (`tracing`, info) and given by
    /// [`dir`](crate::Environment::dir). Default: removed.
    pub fn keep_dir(mut self, keep: bool) -> Self {
        self.keep_dir = keep;
        self
    }

    /// Installs the CustomResourceDefinitions at `path` once the server is up, and waits
    /// until each is established and served (controller-runtime's `CRDDirectoryPaths`): a
    /// file, or every `.yaml`, `.yml` and `.json` file of a folder (kustomize's own files
    /// skipped), each with any number of documents. Another kind, a missing path or a file
    /// that does not parse fails [`start`](crate::Environment::start), naming the file.
    /// Conversion webhooks are pointed at the [local webhook server](crate::LocalWebhooks).
    /// Call again for more paths.
    #[must_use]
    pub fn crds(mut self, path: impl Into<PathBuf>) -> Self {
        self.crds.push(path.into());
        self
    }

    /// Installs the Mutating/ValidatingWebhookConfigurations at `path` (as
    /// [`crds`](Self::crds) reads them; controller-runtime's `WebhookInstallOptions.Paths`),
    /// after the CRDs, with every webhook pointed at the
    /// [local webhook server](crate::LocalWebhooks): its URL and CA replace each
    /// `clientConfig`, its path kept. Call again for more paths.
    #[must_use]
    pub fn webhooks(mut self, path: impl Into<PathBuf>) -> Self {
        self.webhooks.push(path.into());
        self
    }
}

/// `defaults` with `extra` merged in: `--name=value` replaces the default flag of that name
/// (whatever its form), anything else is appended.
pub(crate) fn merge_flags(defaults: Vec<String>, extra: &[String]) -> Vec<String> {
    let name = |flag: &str| flag.split_once('=').map(|(n, _)| n.to_owned());
    let mut merged = defaults;
    for flag in extra {
        match name(flag) {
            Some(n) if merged.iter().any(|d| name(d).as_deref() == Some(&n)) => {
                for d in merged.iter_mut().filter(|d| name(d).as_deref() == Some(&n)) {
                    d.clone_from(flag);
                }
            }
            _ => merged.push(flag.clone()),
        }
    }
    merged
}

/// A Go duration (`time.ParseDuration`) for `d`, in whole milliseconds.
pub(crate) fn go_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_flags_replace_defaults_by_name_and_append_the_rest() {
        let defaults = vec!["--a=1".to_owned(), "--b=2".to_owned(), "--flag".to_owned()];
        let extra = ["--b=3".to_owned(), "--c=4".to_owned(), "--v".to_owned()];
        assert_eq!(
            merge_flags(defaults, &extra),
            ["--a=1", "--b=3", "--flag", "--c=4", "--v"]
        );
    }

    #[test]
    fn durations_in_go_syntax() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10000ms");
    }
}
