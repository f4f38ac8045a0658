//! Finding `kube-apiserver` and `etcd`, and skipping tests loudly when they are absent.

use std::ffi::OsStr;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// The environment variable naming the folder that holds `kube-apiserver` and `etcd`: the
/// Kubernetes ecosystem's convention (controller-runtime's envtest and `setup-envtest` use it).
pub const ASSETS_ENV: &str = "KUBEBUILDER_ASSETS";

/// Set this environment variable to `1` (or `true`) to turn a missing binary into a test
/// failure instead of a skip: CI sets it so the real-server tests can never be skipped
/// silently.
pub const REQUIRED_ENV: &str = "KUBE_ENVTEST_REQUIRED";

/// The two binaries an [`Environment`](crate::Environment) runs.
///
/// ```
/// use kube_envtest::{Assets, AssetsError};
///
/// // Without the variable there is nothing to find, and the error says what to do.
/// let err = Assets::locate(None).unwrap_err();
/// assert!(matches!(err, AssetsError::NotSet));
/// assert!(err.to_string().contains("KUBEBUILDER_ASSETS"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assets {
    dir: PathBuf,
    kube_apiserver: PathBuf,
    etcd: PathBuf,
}

/// Why the binaries could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssetsError {
    /// `KUBEBUILDER_ASSETS` is not set (or empty).
    #[error(
        "{ASSETS_ENV} is not set: it must name a folder holding kube-apiserver and etcd \
         (install them from a checkout of kube-informer: cargo install --path crates/envtest \
         && eval \"$(kube-envtest install 1.36.x)\"; controller-runtime's setup-envtest works \
         too)"
    )]
    NotSet,
    /// The folder does not exist or is not a folder.
    #[error("the envtest folder {} does not exist or is not a folder", dir.display())]
    NotADirectory {
        /// The folder.
        dir: PathBuf,
    },
    /// The folder lacks one or both binaries, or they are not executable files.
    #[error("{} has no executable {}", dir.display(), missing.join(" or "))]
    Missing {
        /// The folder.
        dir: PathBuf,
        /// The binaries that are absent or not executable.
        missing: Vec<&'static str>,
    },
}

impl AssetsError {
    /// The banner printed when a test skips because of this error.
    ///
    /// ```
    /// let banner = kube_envtest::AssetsError::NotSet.skip_message("my_test");
    /// assert!(banner.contains("SKIPPED: my_test"));
    /// assert!(banner.contains("KUBE_ENVTEST_REQUIRED=1"));
    /// ```
    pub fn skip_message(&self, test: &str) -> String {
        let rule = "=".repeat(78);
        format!(
            "{rule}\nSKIPPED: {test} needs a real kube-apiserver and etcd.\n{self}.\n\
             (With {REQUIRED_ENV}=1 this is a failure instead of a skip.)\n{rule}"
        )
    }
}

impl Assets {
    /// The binaries in the folder named by `KUBEBUILDER_ASSETS`.
    pub fn from_env() -> Result<Assets, AssetsError> {
        Assets::locate(std::env::var_os(ASSETS_ENV).as_deref())
    }

    /// The binaries in the folder `kubebuilder_assets` (the value `KUBEBUILDER_ASSETS` would
    /// have; `None` or empty when it is not set). [`Assets::from_env`] is this with the
    /// process's environment; tests of the lookup call it directly.
    pub fn locate(kubebuilder_assets: Option<&OsStr>) -> Result<Assets, AssetsError> {
        match kubebuilder_assets {
            Some(dir) if !dir.is_empty() => Assets::in_dir(dir),
            _ => Err(AssetsError::NotSet),
        }
    }

    /// The binaries in `dir`, which must hold executable `kube-apiserver` and `etcd` files.
    ///
    /// ```
    /// let err = kube_envtest::Assets::in_dir("/nonexistent").unwrap_err();
    /// assert_eq!(err.to_string(),
    ///     "the envtest folder /nonexistent does not exist or is not a folder");
    /// ```
    pub fn in_dir(dir: impl AsRef<Path>) -> Result<Assets, AssetsError> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(AssetsError::NotADirectory {
                dir: dir.to_owned(),
            });
        }
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
        let missing: Vec<&'static str> = ["kube-apiserver", "etcd"]
            .into_iter()
            .filter(|name| !is_executable_file(&dir.join(name)))
            .collect();
        if !missing.is_empty() {
            return Err(AssetsError::Missing { dir, missing });
        }
        Ok(Assets {
            kube_apiserver: dir.join("kube-apiserver"),
            etcd: dir.join("etcd"),
            dir,
        })
    }

    /// For tests: the binaries, or `None` after printing a prominent SKIPPED banner to the
    /// process's stderr (past the test harness's output capture, so it shows in
    /// `cargo test`'s output). Panics instead when `required` is true.
    /// [`Assets::from_env_or_skip`] is this with `KUBEBUILDER_ASSETS` and
    /// `KUBE_ENVTEST_REQUIRED`.
    ///
    /// ```
    /// use kube_envtest::Assets;
    /// assert_eq!(Assets::or_skip(Assets::locate(None), false, "doc_test"), None);
    /// ```
    ///
    /// # Panics
    /// When the binaries are missing and `required` is true.
    pub fn or_skip(
        found: Result<Assets, AssetsError>,
        required: bool,
        test: &str,
    ) -> Option<Assets> {
        match found {
            Ok(assets) => Some(assets),
            Err(err) if required => {
                panic!("{REQUIRED_ENV} is set but the envtest binaries are missing: {err}")
            }
            Err(err) => {
                // Written to the real stderr: `eprintln!` would be captured by the test harness
                // and only shown for failing tests.
                let _ = writeln!(std::io::stderr().lock(), "{}", err.skip_message(test));
                tracing::warn!(%err, test, "envtest binaries missing: skipping");
                None
            }
        }
    }

    /// For tests: [`Assets::or_skip`] with `KUBEBUILDER_ASSETS` and `KUBE_ENVTEST_REQUIRED`
    /// from the environment. `test` names the skipping test in the banner.
    ///
    /// # Panics
    /// When the binaries are missing and `KUBE_ENVTEST_REQUIRED=1`.
    pub fn from_env_or_skip(test: &str) -> Option<Assets> {
        Assets::or_skip(Assets::from_env(), required_by_env(), test)
    }

    /// The folder holding both binaries (absolute).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `kube-apiserver` binary.
    pub fn kube_apiserver(&self) -> &Path {
        &self.kube_apiserver
    }

    /// The `etcd` binary.
    pub fn etcd(&self) -> &Path {
        &self.etcd
    }
}

/// Whether `KUBE_ENVTEST_REQUIRED` asks for missing binaries to fail tests (`1` or `true`).
pub fn required_by_env() -> bool {
    std::env::var(REQUIRED_ENV).is_ok_and(|v| is_truthy(&v))
}

fn is_truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes"
    )
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthy_values() {
        assert!(is_truthy("1") && is_truthy("true") && is_truthy(" TRUE "));
        assert!(!is_truthy("0") && !is_truthy("") && !is_truthy("no"));
    }
}
