//! Caches that survive a restart: an informer's store written to disk, and read back so a
//! restarted process resumes its watch instead of listing everything again.
//!
//! Opt in per informer of a factory with
//! [`InformerSpec::cache_dir`](crate::factory::InformerSpec::cache_dir). The informer then:
//!
//! - **writes a snapshot** of its cache every [`CacheDir::every`] and when it is stopped
//!   gracefully (its cancellation token, or the factory's `shutdown().await`; a task
//!   aborted or a process killed writes nothing more, and the next start replays more): the
//!   objects (as JSON), the cache's resourceVersion, and what the cache is of (server, kind,
//!   namespace, selectors). The write is atomic (a temporary file, flushed, renamed) and
//!   runs on a blocking thread from the cache's shared objects: no lock is held while
//!   writing and no second copy of the cache is made.
//! - **starts warm** from a snapshot that matches: one `limit=1` read learns the server's
//!   current resourceVersion, the snapshot's objects are handed to the handlers as the
//!   initial list, and the watch resumes from the snapshot's version — no LIST. The
//!   informer reports synced once the watch has reached the version the server had at
//!   start (an event or bookmark at or past it): from then on the cache is as fresh as after
//!   a cold start. A server that no longer has the history (410 Gone) gets the usual relist,
//!   and handlers see the deletions of what went away meanwhile.
//! - **refuses** a snapshot that is missing, cut short, altered (a checksum covers every
//!   byte), of another format, server, kind, namespace or selectors, older than one it
//!   wrote before (a file restored by hand), or newer than the server (another server, or
//!   an etcd restored from a backup): a log line says why and the informer starts cold.
//!   A snapshot never makes the cache go back in time.
//!
//! A directory that cannot be written (read-only, full) turns persistence off for that
//! write with a warning; the informer itself is unaffected. See `docs/warm-restarts.md` for
//! where to put the directory and what this saves.

mod decode;
mod file;
mod persist;
#[cfg(test)]
mod tests;

use std::{
    fmt,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{Deserialize, Serialize, de::DeserializeOwned};

pub(crate) use self::{
    file::{Loaded, read, write},
    persist::{keep_written, load},
};

/// Where an informer keeps its cache between runs, and for which server.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer::{factory::{FactoryOptions, InformerSpec, SharedInformerFactory}, snapshot::CacheDir};
///
/// # fn demo(client: kube::Client) {
/// let factory = SharedInformerFactory::new(client, FactoryOptions::default());
/// let cache = CacheDir {
///     schema: "my-operator 1.4.0".into(),
///     ..CacheDir::new("/var/cache/my-operator", "prod-eu-1")
/// };
/// let configs = factory.informer_with::<ConfigMap>(InformerSpec::new().cache_dir(cache));
/// # let _ = configs; }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheDir {
    /// The directory (created if missing). Each informer writes one file in it, named
    /// after its kind and what it selects.
    pub dir: PathBuf,
    /// What identifies the cluster: a snapshot written for another one is refused, since
    /// resourceVersions of two clusters say nothing of each other. Use a name unique to
    /// the cluster (its name in your fleet, or the `kube-system` namespace's UID): the
    /// in-cluster API URL (`https://10.96.0.1`) is the same in every cluster. A snapshot
    /// ahead of the server is refused whatever this says.
    pub server: String,
    /// What the cached objects are, beyond their type: your operator's version, or
    /// anything that changes with its transform. A snapshot written under another schema
    /// is refused (default empty; the library's own version is always part of it).
    pub schema: String,
    /// How often the cache is written while it changes (default 1 minute). It is also
    /// written when the informer stops.
    pub every: Duration,
}

impl CacheDir {
    /// Snapshots in `dir` for the cluster `server`, written every minute.
    pub fn new(dir: impl Into<PathBuf>, server: impl Into<String>) -> Self {
        Self {
            dir: dir.into(),
            server: server.into(),
            schema: String::new(),
            every: Duration::from_secs(60),
        }
    }
}

/// What a snapshot is of: all of it must match for the snapshot to be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Identity {
    pub(crate) server: String,
    /// The library's version, the user's schema, and whether managedFields are kept.
    pub(crate) schema: String,
    /// The Rust type's full name (k8s-openapi's includes its Kubernetes version) and the
    /// informer's name (the resource, and its namespaces).
    pub(crate) kind: String,
    pub(crate) namespace: Option<String>,
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    /// The share of a sharded informer (`shardSelector`); absent in older snapshots.
    #[serde(default)]
    pub(crate) shard_selector: Option<String>,
}

impl Identity {
    /// The first field in which `self` differs from `expected`.
    fn differs_from(&self, expected: &Identity) -> Option<&'static str> {
        [
            ("server", self.server == expected.server),
            ("schema", self.schema == expected.schema),
            ("kind", self.kind == expected.kind),
            ("namespace", self.namespace == expected.namespace),
            (
                "label selector",
                self.label_selector == expected.label_selector,
            ),
            (
                "field selector",
                self.field_selector == expected.field_selector,
            ),
            (
                "shard selector",
                self.shard_selector == expected.shard_selector,
            ),
        ]
        .into_iter()
        .find_map(|(field, same)| (!same).then_some(field))
    }

    /// The snapshot's file in `dir`: readable names, and a hash of the whole identity so
    /// two informers never share a file.
    pub(crate) fn path_in(&self, dir: &Path) -> PathBuf {
        let readable: String = self
            .kind
            .rsplit("::")
            .next()
            .unwrap_or_default()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let text = serde_json::to_string(self).unwrap_or_default();
        let hash = xxhash_rust::xxh64::xxh64(text.as_bytes(), 0);
        dir.join(format!("{readable}-{hash:016x}.snapshot"))
    }
}

/// The start of a snapshot file.
#[derive(Serialize, Deserialize)]
struct Header {
    identity: Identity,
    resource_version: String,
    objects: u64,
}

/// Why a snapshot was not used. Each is logged, then the informer starts cold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No snapshot yet (the first start): not worth a warning.
    Missing,
    Unreadable(String),
    NotASnapshot,
    /// Written by another version of this library.
    Format(u32),
    Truncated,
    Corrupt(String),
    /// Of another server, kind, namespace or selectors.
    Foreign(&'static str),
    /// Older than a snapshot written before (restored by hand).
    Older {
        snapshot: String,
        newest: String,
    },
    NotComparable(String),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing => write!(f, "no snapshot"),
            Self::Unreadable(err) => write!(f, "cannot be read: {err}"),
            Self::NotASnapshot => write!(f, "not a snapshot file"),
            Self::Format(format) => write!(
                f,
                "format {format}, this build reads format {}",
                file::FORMAT
            ),
            Self::Truncated => write!(f, "cut short"),
            Self::Corrupt(what) => write!(f, "corrupt ({what})"),
            Self::Foreign(field) => write!(f, "of another {field}"),
            Self::Older { snapshot, newest } => write!(
                f,
                "at resourceVersion {snapshot}, older than the snapshot written before it \
                 ({newest}): it would take the cache back in time"
            ),
            Self::NotComparable(rv) => write!(f, "resourceVersion {rv:?} is not comparable"),
        }
    }
}

/// How the informer's objects are written and read: fixed where `K` is known to be
/// serializable, so the informer itself needs no such bound.
pub(crate) struct Codec<K> {
    pub(crate) encode: fn(&K, &mut Vec<u8>) -> serde_json::Result<()>,
    pub(crate) decode: fn(&[u8]) -> serde_json::Result<K>,
}

impl<K> Clone for Codec<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Codec<K> {}

impl<K: Serialize + DeserializeOwned> Codec<K> {
    pub(crate) fn json() -> Self {
        Self {
            encode: |object, out| serde_json::to_writer(out, object),
            decode: |bytes| serde_json::from_slice(bytes),
        }
    }
}

/// An informer's persistence: where, of what, and how.
pub(crate) struct Persistence<K> {
    pub(crate) config: CacheDir,
    pub(crate) identity: Identity,
    pub(crate) codec: Codec<K>,
}

impl<K> Clone for Persistence<K> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
            identity: self.identity.clone(),
            codec: self.codec,
        }
    }
}

impl<K: Serialize + DeserializeOwned> Persistence<K> {
    /// Persistence in `config`, of an informer whose identity the factory fills in.
    pub(crate) fn new(config: CacheDir) -> Self {
        Self {
            identity: Identity {
                server: config.server.clone(),
                schema: format!(
                    "kube-informer {} {}",
                    env!("CARGO_PKG_VERSION"),
                    config.schema
                ),
                kind: String::new(),
                namespace: None,
                label_selector: None,
                field_selector: None,
                shard_selector: None,
            },
            config,
            codec: Codec::json(),
        }
    }
}

impl<K> fmt::Debug for Persistence<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.config.fmt(f)
    }
}
