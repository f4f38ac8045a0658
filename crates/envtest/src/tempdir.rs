//! The environment's private working folder: certificates, the token file, etcd's data, logs
//! and the audit log. Removed on drop unless asked to keep it.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::Error;

static COUNTER: AtomicU64 = AtomicU64::new(0);

pub(crate) struct TempDir {
    path: PathBuf,
    keep: bool,
}

impl TempDir {
    /// A new folder (mode 0700: it holds the admin token) under the system's temp folder.
    pub(crate) fn new(keep: bool) -> Result<TempDir, Error> {
        let base = std::env::temp_dir();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("kube-envtest-{}-{nanos:x}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(TempDir { path, keep }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io("creating the environment's folder", path, e)),
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn create_subdir(&self, name: &str) -> Result<PathBuf, Error> {
        let path = self.path.join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| Error::io("creating a folder", &path, e))?;
        Ok(path)
    }

    pub(crate) fn write(&self, name: &str, contents: &str) -> Result<PathBuf, Error> {
        let path = self.path.join(name);
        std::fs::write(&path, contents).map_err(|e| Error::io("writing", &path, e))?;
        Ok(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.keep {
            tracing::info!(dir = %self.path.display(), "keeping the envtest folder");
        } else if let Err(err) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(dir = %self.path.display(), %err, "could not remove the envtest folder");
        }
    }
}
