//! Installing kube-apiserver and etcd the way controller-runtime's `setup-envtest` does: the
//! release index that controller-tools publishes for envtest (a version, per platform, an
//! archive with its SHA-512), the archive downloaded and checked, unpacked into a cache
//! folder shared with `setup-envtest` (`<cache>/k8s/<version>-<os>-<arch>`), and found there
//! again without the network.

use std::{collections::BTreeMap, io::Read, path::PathBuf, time::Duration};

use serde::Deserialize;

use crate::Assets;

/// Where controller-tools publishes the envtest releases (what `setup-envtest` reads).
pub const RELEASE_INDEX: &str =
    "https://raw.githubusercontent.com/kubernetes-sigs/controller-tools/HEAD/envtest-releases.yaml";

/// Why an installation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// The index or an archive could not be downloaded (refused, failed, or no answer in
    /// time: see [`NetworkTimeouts`]).
    #[error(
        "cannot download {url}: {reason} (a mirror of the index: `--index-url` / \
         `Installer::index_url`; binaries you already have: `KUBEBUILDER_ASSETS`)"
    )]
    Download {
        /// What was asked for.
        url: String,
        /// Why not.
        reason: String,
    },
    /// The index is not the envtest release index.
    #[error("the release index at {url} is not readable: {reason}")]
    Index {
        /// Where it came from.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No release matches the selector for this platform.
    #[error("no envtest release matches {selector:?} for {platform}; available: {available}")]
    NoMatch {
        /// The version selector.
        selector: String,
        /// `linux-amd64`, ...
        platform: String,
        /// The versions the index has for the platform.
        available: String,
    },
    /// The archive's SHA-512 is not the index's: nothing was installed.
    #[error(
        "{url}: the archive's SHA-512 is {actual}, the index says {expected}; nothing was installed"
    )]
    Checksum {
        /// The archive.
        url: String,
        /// The index's digest.
        expected: String,
        /// The downloaded archive's.
        actual: String,
    },
    /// Unpacking or writing the cache failed.
    #[error("cannot install into {dir}: {source}")]
    Io {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Installs envtest binaries into a cache folder.
///
/// ```no_run
/// use kube_envtest::{Environment, EnvironmentOptions, Installer};
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// // Blocking (network and disk): off the async runtime.
/// let assets = tokio::task::spawn_blocking(|| Installer::new().install("1.36.x")).await??;
/// let env = Environment::start(EnvironmentOptions::new().assets(assets)).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Installer {
    index_url: String,
    cache_dir: PathBuf,
    platform: String,
    timeouts: NetworkTimeouts,
}

/// How long the installer waits on the network before it gives up with
/// [`InstallError::Download`]: a proxy, mirror or firewall that accepts a connection and
/// never answers is an error naming the URL, not a hang.
///
/// ```
/// use std::time::Duration;
/// use kube_envtest::{Installer, NetworkTimeouts};
///
/// let patient = Installer::new().timeouts(NetworkTimeouts {
///     total: Duration::from_secs(3600), // a slow link: an hour for the archive
///     ..NetworkTimeouts::default()
/// });
/// # let _ = patient;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkTimeouts {
    /// To resolve the host and connect (default 30 s).
    pub connect: Duration,
    /// Without a byte from the server, once connected (default 60 s).
    pub inactivity: Duration,
    /// For a whole download, the archive's ~70 MB included (default 15 minutes).
    pub total: Duration,
}

impl Default for NetworkTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(30),
            inactivity: Duration::from_secs(60),
            total: Duration::from_secs(15 * 60),
        }
    }
}

impl Default for Installer {
    fn default() -> Self {
        Self::new()
    }
}

impl Installer {
    /// The published index, this machine's platform, and `setup-envtest`'s cache folder
    /// (`$KUBE_ENVTEST_CACHE`, else `$XDG_DATA_HOME/kubebuilder-envtest`, else
    /// `~/.local/share/kubebuilder-envtest`), so binaries either tool fetched are reused.
    pub fn new() -> Self {
        let env = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let cache_dir = env("KUBE_ENVTEST_CACHE")
            .or_else(|| env("XDG_DATA_HOME").map(|d| d.join("kubebuilder-envtest")))
            .or_else(|| env("HOME").map(|h| h.join(".local/share/kubebuilder-envtest")))
            .unwrap_or_else(|| std::env::temp_dir().join("kubebuilder-envtest"));
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        };
        Self {
            index_url: RELEASE_INDEX.to_owned(),
            cache_dir,
            platform: format!("{}-{arch}", std::env::consts::OS),
            timeouts: NetworkTimeouts::default(),
        }
    }

    /// How long to wait on the network (see [`NetworkTimeouts`] for the defaults).
    #[must_use]
    pub fn timeouts(mut self, timeouts: NetworkTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Reads the releases from another index (a mirror, or a test server).
    #[must_use]
    pub fn index_url(mut self, url: impl Into<String>) -> Self {
        self.index_url = url.into();
        self
    }

    /// Installs under another folder.
    #[must_use]
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = dir.into();
        self
    }

    /// The binaries of `selector` (`1.36.2`, `1.36.x` or `1.36` for the newest patch,
    /// `latest`), from the cache when an exact version is there, else downloaded, checked
    /// and unpacked. Blocking.
    pub fn install(&self, selector: &str) -> Result<Assets, InstallError> {
        let wanted = Selector::parse(selector);
        if let Selector::Exact(version) = &wanted
            && let Some(assets) = self.cached(version)
        {
            return Ok(assets);
        }
        let index = self.index()?;
        let mut candidates: Vec<(Version, &String, &Archive)> = index
            .releases
            .iter()
            .filter_map(|(v, archives)| {
                let version = Version::parse(v)?;
                let (_, archive) = archives
                    .iter()
                    .find(|(name, _)| name.ends_with(&format!("-{}.tar.gz", self.platform)))?;
                Some((version, v, archive))
            })
            .collect();
        candidates.sort_by_key(|a| a.0);
        let available = candidates
            .iter()
            .map(|(_, v, _)| v.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let Some((_, version, archive)) =
            candidates.iter().rev().find(|(v, _, _)| wanted.matches(v))
        else {
            return Err(InstallError::NoMatch {
                selector: selector.to_owned(),
                platform: self.platform.clone(),
                available,
            });
        };
        let version = version.trim_start_matches('v');
        if let Some(assets) = self.cached(version) {
            return Ok(assets);
        }
        let bytes = download(&archive.self_link, self.timeouts)?;
        let actual = hex(ring::digest::digest(&ring::digest::SHA512, &bytes).as_ref());
        if !actual.eq_ignore_ascii_case(&archive.hash) {
            return Err(InstallError::Checksum {
                url: archive.self_link.clone(),
                expected: archive.hash.clone(),
                actual,
            });
        }
        self.unpack(version, &bytes)
    }

    /// The folder a version goes into.
    pub fn version_dir(&self, version: &str) -> PathBuf {
        self.cache_dir.join("k8s").join(format!(
            "{}-{}",
            version.trim_start_matches('v'),
            self.platform
        ))
    }

    fn cached(&self, version: &str) -> Option<Assets> {
        Assets::in_dir(self.version_dir(version)).ok()
    }

    fn index(&self) -> Result<Index, InstallError> {
        let bytes = download(&self.index_url, self.timeouts)?;
        let text = String::from_utf8(bytes).map_err(|e| InstallError::Index {
            url: self.index_url.clone(),
            reason: e.to_string(),
        })?;
        serde_saphyr::from_str(&text).map_err(|e| InstallError::Index {
            url: self.index_url.clone(),
            reason: e.to_string(),
        })
    }

    /// Unpacks the archive's `controller-tools/envtest/*` into a fresh folder, then moves it
    /// into place, so an interrupted install never leaves half a version behind.
    fn unpack(&self, version: &str, archive: &[u8]) -> Result<Assets, InstallError> {
        let dir = self.version_dir(version);
        let io = |source| InstallError::Io {
            dir: dir.clone(),
            source,
        };
        let parent = dir.parent().expect("under the cache folder");
        std::fs::create_dir_all(parent).map_err(io)?;
        let staging = parent.join(format!(".{}-{}", version, std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging).map_err(io)?;
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
        for entry in tar.entries().map_err(io)? {
            let mut entry = entry.map_err(io)?;
            let path = entry.path().map_err(io)?.into_owned();
            let Some(name) = path
                .file_name()
                .filter(|_| entry.header().entry_type().is_file())
            else {
                continue;
            };
            let target = staging.join(name);
            entry.unpack(&target).map_err(io)?;
        }
        match std::fs::rename(&staging, &dir) {
            Ok(()) => {}
            // Another process installed it meanwhile: theirs is as good.
            Err(_) if dir.exists() => {
                let _ = std::fs::remove_dir_all(&staging);
            }
            Err(e) => return Err(io(e)),
        }
        Assets::in_dir(&dir).map_err(|e| io(std::io::Error::other(e.to_string())))
    }
}

/// The index: `releases: {v1.36.2: {envtest-v1.36.2-linux-amd64.tar.gz: {hash, selfLink}}}`.
#[derive(Debug, Deserialize)]
struct Index {
    releases: BTreeMap<String, BTreeMap<String, Archive>>,
}

#[derive(Debug, Deserialize)]
struct Archive {
    hash: String,
    #[serde(rename = "selfLink")]
    self_link: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Version(u64, u64, u64);

impl Version {
    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim_start_matches('v').splitn(3, '.');
        let mut next = || parts.next()?.parse().ok();
        Some(Self(next()?, next()?, next()?))
    }
}

enum Selector {
    Latest,
    Minor(u64, u64),
    Exact(String),
}

impl Selector {
    fn parse(text: &str) -> Self {
        let text = text.trim().trim_start_matches('v');
        if text.is_empty() || text == "latest" {
            return Self::Latest;
        }
        let parts: Vec<&str> = text.split('.').collect();
        match parts.as_slice() {
            [major, minor] | [major, minor, "x" | "*"] => match (major.parse(), minor.parse()) {
                (Ok(major), Ok(minor)) => Self::Minor(major, minor),
                _ => Self::Exact(text.to_owned()),
            },
            _ => Self::Exact(text.to_owned()),
        }
    }

    fn matches(&self, version: &Version) -> bool {
        match self {
            Self::Latest => true,
            Self::Minor(major, minor) => (version.0, version.1) == (*major, *minor),
            Self::Exact(text) => Version::parse(text).as_ref() == Some(version),
        }
    }
}

/// `url`'s body, every network step bounded by `timeouts`.
fn download(url: &str, timeouts: NetworkTimeouts) -> Result<Vec<u8>, InstallError> {
    let failed = |reason: String| InstallError::Download {
        url: url.to_owned(),
        reason,
    };
    let config = ureq::Agent::config_builder()
        .timeout_resolve(Some(timeouts.connect))
        .timeout_connect(Some(timeouts.connect))
        .timeout_per_read(Some(timeouts.inactivity))
        .timeout_per_write(Some(timeouts.inactivity))
        .timeout_global(Some(timeouts.total))
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let explain = |error: ureq::Error| match error {
        ureq::Error::Timeout(phase) => format!(
            "no answer in time ({phase}; waits up to {:?} to connect, {:?} for each read, \
             {:?} in all)",
            timeouts.connect, timeouts.inactivity, timeouts.total
        ),
        other => other.to_string(),
    };
    let mut response = agent.get(url).call().map_err(|e| failed(explain(e)))?;
    let mut bytes = Vec::new();
    response
        .body_mut()
        .as_reader()
        .read_to_end(&mut bytes)
        .map_err(|e| match e.downcast::<ureq::Error>() {
            Ok(error) => failed(explain(error)),
            Err(e) => failed(e.to_string()),
        })?;
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_pick_versions() {
        let v = |s| Version::parse(s).unwrap();
        assert!(Selector::parse("1.36.x").matches(&v("v1.36.2")));
        assert!(Selector::parse("1.36").matches(&v("1.36.0")));
        assert!(!Selector::parse("1.36").matches(&v("1.35.9")));
        assert!(Selector::parse("v1.36.2").matches(&v("1.36.2")));
        assert!(!Selector::parse("1.36.2").matches(&v("1.36.3")));
        assert!(Selector::parse("latest").matches(&v("1.1.1")));
        assert!(v("1.36.10") > v("1.36.9"));
    }

    #[test]
    fn a_path_for_each_version_and_platform() {
        let dir = Installer::new().cache_dir("/c").version_dir("v1.36.2");
        let dir = dir.display().to_string();
        assert!(dir.starts_with("/c/k8s/1.36.2-"), "{dir}");
    }
}
