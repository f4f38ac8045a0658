//! The informer's side: loading a usable snapshot at start, and writing the cache while it
//! runs and when it stops.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

use tokio_util::sync::CancellationToken;

use super::{Loaded, Persistence, Refused, read, write};
use crate::{ReadOnlyStore, ResourceVersion};

/// The file beside a snapshot holding the newest resourceVersion ever written to it: an
/// older snapshot put back by hand is refused against it.
fn newest_path(snapshot: &Path) -> PathBuf {
    let mut name = snapshot.file_name().unwrap_or_default().to_os_string();
    name.push(".newest");
    snapshot.with_file_name(name)
}

fn read_newest(snapshot: &Path) -> Option<ResourceVersion> {
    fs::read_to_string(newest_path(snapshot))
        .ok()?
        .trim()
        .parse()
        .ok()
}

pub(super) fn record_newest(snapshot: &Path, version: &str) -> io::Result<()> {
    let path = newest_path(snapshot);
    let mut temporary = path.clone().into_os_string();
    temporary.push(".tmp");
    fs::write(&temporary, version)?;
    fs::rename(&temporary, &path)
}

/// Removes what writes of this snapshot interrupted by a crash or a kill left behind (each
/// the size of the collection): temporary files beside it untouched for ten minutes, so a
/// write in progress elsewhere is left alone.
pub(super) fn sweep_temporary(snapshot: &Path) {
    let (Some(dir), Some(name)) = (snapshot.parent(), snapshot.file_name()) else {
        return;
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let file = entry.file_name().to_string_lossy().into_owned();
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|age| age > std::time::Duration::from_secs(600));
        if file.starts_with(&prefix) && file.ends_with(".tmp") && stale {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Reads the snapshot and checks it against what was written before.
pub(super) fn load_checked<K: Send>(path: &Path, p: &Persistence<K>) -> Result<Loaded<K>, Refused> {
    let loaded = read(path, p.codec, &p.identity)?;
    let version: ResourceVersion = loaded
        .resource_version
        .parse()
        .map_err(|_| Refused::NotComparable(loaded.resource_version.clone()))?;
    match read_newest(path) {
        Some(newest) if version < newest => Err(Refused::Older {
            snapshot: loaded.resource_version,
            newest: newest.to_string(),
        }),
        _ => Ok(loaded),
    }
}

/// The snapshot to start from, if there is a usable one; why not is logged.
pub(crate) async fn load<K: Send + 'static>(
    p: &Persistence<K>,
    informer: &str,
) -> Option<Loaded<K>> {
    let path = p.identity.path_in(&p.config.dir);
    let (p, at) = (p.clone(), path.clone());
    let loaded = tokio::task::spawn_blocking(move || load_checked(&at, &p)).await;
    match loaded {
        Ok(Ok(loaded)) => {
            tracing::info!(
                informer,
                path = %path.display(),
                objects = loaded.objects.len(),
                resource_version = %loaded.resource_version,
                "starting from a snapshot"
            );
            Some(loaded)
        }
        Ok(Err(Refused::Missing)) => {
            tracing::info!(informer, path = %path.display(), "no snapshot yet: starting cold");
            None
        }
        Ok(Err(refused)) => {
            tracing::warn!(informer, path = %path.display(), "snapshot refused, starting cold: {refused}");
            None
        }
        Err(panicked) => {
            tracing::warn!(
                informer,
                "reading the snapshot failed, starting cold: {panicked}"
            );
            None
        }
    }
}

/// Writes the cache (only `namespace`'s objects and version, for a cache fed by one watch
/// per namespace) every `every` while its version moves, and once more when `cancel` fires
/// (a graceful stop). Returns when that last write is done.
pub(crate) async fn keep_written<K: Send + Sync + 'static>(
    store: ReadOnlyStore<K>,
    p: Persistence<K>,
    namespace: Option<String>,
    informer: String,
    cancel: CancellationToken,
) {
    let path = p.identity.path_in(&p.config.dir);
    sweep_temporary(&path);
    // Written afresh even below the newest version on record: this run's cache is what the
    // server has now (after a refused snapshot, the server may be behind it).
    let mut written: Option<ResourceVersion> = None;
    loop {
        let stopping = tokio::select! {
            () = cancel.cancelled() => true,
            () = tokio::time::sleep(p.config.every) => false,
        };
        let (objects, version) = match &namespace {
            Some(namespace) => store.namespace_at_version(namespace),
            None => store.objects_at_version(),
        };
        written = write_once(objects, version, &p, &path, &informer, written).await;
        if stopping {
            return;
        }
    }
}

/// One write, if the cache moved past what was written last; the version written after.
async fn write_once<K: Send + Sync + 'static>(
    objects: Vec<std::sync::Arc<K>>,
    version_text: String,
    p: &Persistence<K>,
    path: &Path,
    informer: &str,
    written: Option<ResourceVersion>,
) -> Option<ResourceVersion> {
    // Before the first sync, or a server with opaque versions: nothing to resume from.
    let Ok(version) = version_text.parse::<ResourceVersion>() else {
        return written;
    };
    if written.is_some_and(|w| w >= version) {
        return written;
    }
    let (codec, identity, at) = (p.codec, p.identity.clone(), path.to_owned());
    let count = objects.len();
    let outcome = tokio::task::spawn_blocking(move || {
        let bytes = write(&at, codec, &identity, &version_text, &objects)?;
        record_newest(&at, &version_text)?;
        Ok::<_, io::Error>(bytes)
    })
    .await;
    match outcome {
        Ok(Ok(bytes)) => {
            tracing::debug!(informer, objects = count, bytes, %version, "snapshot written");
            Some(version)
        }
        Ok(Err(err)) => {
            tracing::warn!(informer, path = %path.display(), "snapshot not written (the informer is unaffected): {err}");
            written
        }
        Err(panicked) => {
            tracing::warn!(informer, "writing the snapshot failed: {panicked}");
            written
        }
    }
}
