//! The snapshot file: its layout, its atomic write and its checked read.
//!
//! ```text
//! "KISNAP\r\n"             8 bytes: what the file is (the \r\n catches text-mode mangling)
//! format                  u32 LE: FORMAT; a reader refuses any other
//! header length, header   u32 LE, then JSON: the Identity, the resourceVersion, the count
//! objects                 per object: u32 LE length, then the object's JSON
//! end                     u32 LE u32::MAX, then u64 LE: xxh64 of every byte before it
//! ```
//!
//! Nothing is trusted before the checksum at the end agrees: a file cut short anywhere, or
//! changed by one bit, is refused whole.

use std::{
    fs::{self, File},
    io::{self, BufReader, BufWriter, Read, Write},
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use xxhash_rust::xxh64::Xxh64;

use super::{Codec, Header, Identity, Refused};

const MAGIC: &[u8; 8] = b"KISNAP\r\n";
/// The layout version this build writes and reads.
pub(crate) const FORMAT: u32 = 1;
/// The length that ends the object records.
const END: u32 = u32::MAX;
/// No object (nor header) this large is real: a length past it is a corrupt file, not an
/// allocation to attempt.
const MAX_RECORD: u32 = 256 << 20;

/// Writes the snapshot to `path` atomically: a temporary file beside it, flushed to disk,
/// renamed over `path`, and the directory flushed, so a crash leaves the old snapshot or
/// the new one, never a mix. Objects are serialized one at a time from the shared `Arc`s:
/// no second copy of the cache is made. Returns the bytes written.
pub(crate) fn write<K>(
    path: &Path,
    codec: Codec<K>,
    identity: &Identity,
    resource_version: &str,
    objects: &[Arc<K>],
) -> io::Result<u64> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let temporary = temporary_path(path);
    let written = write_to(&temporary, codec, identity, resource_version, objects);
    let written = match written {
        Ok(bytes) => bytes,
        Err(err) => {
            let _ = fs::remove_file(&temporary);
            return Err(err);
        }
    };
    if let Err(err) = fs::rename(&temporary, path) {
        let _ = fs::remove_file(&temporary);
        return Err(err);
    }
    sync_directory(path)?;
    Ok(written)
}

fn write_to<K>(
    temporary: &Path,
    codec: Codec<K>,
    identity: &Identity,
    resource_version: &str,
    objects: &[Arc<K>],
) -> io::Result<u64> {
    let file = File::create(temporary)?;
    let mut out = Hashing::new(BufWriter::with_capacity(256 << 10, file));
    out.write_all(MAGIC)?;
    out.write_all(&FORMAT.to_le_bytes())?;
    let header = Header {
        identity: identity.clone(),
        resource_version: resource_version.to_owned(),
        objects: objects.len() as u64,
    };
    let mut record = serde_json::to_vec(&header)?;
    write_record(&mut out, &record)?;
    for object in objects {
        record.clear();
        (codec.encode)(object.as_ref(), &mut record)?;
        write_record(&mut out, &record)?;
    }
    out.write_all(&END.to_le_bytes())?;
    let (mut inner, hash, written) = out.finish();
    inner.write_all(&hash.to_le_bytes())?;
    let file = inner.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.sync_all()?;
    Ok(written + 8)
}

fn write_record(out: &mut impl Write, record: &[u8]) -> io::Result<()> {
    let len = u32::try_from(record.len())
        .ok()
        .filter(|len| *len < MAX_RECORD)
        .ok_or_else(|| io::Error::other("an object too large for a snapshot"))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(record)
}

/// A temporary name beside `path` (the rename cannot cross devices), unique to this write:
/// two writers of one snapshot never write into each other's file.
fn temporary_path(path: &Path) -> PathBuf {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let write = WRITES.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}-{write}.tmp", std::process::id()));
    path.with_file_name(name)
}

/// Flushes the directory entry of a rename (POSIX needs it for the rename to survive a
/// power loss; elsewhere there is nothing to flush).
fn sync_directory(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// What a snapshot held.
pub(crate) struct Loaded<K> {
    pub(crate) resource_version: String,
    pub(crate) objects: Vec<K>,
}

/// Reads the snapshot at `path`, refusing it unless it is whole, of this format, and of
/// `expected`'s server, kind and selectors.
pub(crate) fn read<K: Send>(
    path: &Path,
    codec: Codec<K>,
    expected: &Identity,
) -> Result<Loaded<K>, Refused> {
    let file = File::open(path).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => Refused::Missing,
        _ => Refused::Unreadable(err.to_string()),
    })?;
    let mut input = Hashing::new(BufReader::with_capacity(256 << 10, file));
    let mut magic = [0; 8];
    read_exact(&mut input, &mut magic)?;
    if &magic != MAGIC {
        return Err(Refused::NotASnapshot);
    }
    let format = read_u32(&mut input)?;
    if format != FORMAT {
        return Err(Refused::Format(format));
    }
    let mut record = Vec::new();
    if !read_record(&mut input, &mut record)? {
        return Err(Refused::Corrupt("no header".into()));
    }
    let header: Header = serde_json::from_slice(&record)
        .map_err(|err| Refused::Corrupt(format!("header: {err}")))?;
    let objects = super::decode::in_parallel(codec, |record| read_record(&mut input, record))?;
    let (mut inner, hash, _) = input.finish();
    let mut stored = [0; 8];
    read_exact(&mut inner, &mut stored)?;
    if u64::from_le_bytes(stored) != hash {
        return Err(Refused::Corrupt("checksum mismatch".into()));
    }
    if objects.len() as u64 != header.objects {
        return Err(Refused::Corrupt(format!(
            "{} objects where the header says {}",
            objects.len(),
            header.objects
        )));
    }
    // Checked last: a corrupt header could name anything.
    if let Some(field) = header.identity.differs_from(expected) {
        return Err(Refused::Foreign(field));
    }
    Ok(Loaded {
        resource_version: header.resource_version,
        objects,
    })
}

/// Reads one record into `record`; `false` at the end marker.
fn read_record(input: &mut impl Read, record: &mut Vec<u8>) -> Result<bool, Refused> {
    let len = read_u32(input)?;
    if len == END {
        return Ok(false);
    }
    if len >= MAX_RECORD {
        return Err(Refused::Corrupt(format!("a record of {len} bytes")));
    }
    record.resize(len as usize, 0);
    read_exact(input, record)?;
    Ok(true)
}

fn read_u32(input: &mut impl Read) -> Result<u32, Refused> {
    let mut bytes = [0; 4];
    read_exact(input, &mut bytes)?;
    Ok(u32::from_le_bytes(bytes))
}

fn read_exact(input: &mut impl Read, into: &mut [u8]) -> Result<(), Refused> {
    input.read_exact(into).map_err(|err| match err.kind() {
        io::ErrorKind::UnexpectedEof => Refused::Truncated,
        _ => Refused::Unreadable(err.to_string()),
    })
}

/// A reader or writer that hashes every byte passing through it.
struct Hashing<T> {
    inner: T,
    hasher: Xxh64,
    bytes: u64,
}

impl<T> Hashing<T> {
    fn new(inner: T) -> Self {
        Self {
            inner,
            hasher: Xxh64::new(0),
            bytes: 0,
        }
    }

    /// The inner reader or writer, the hash and the count of the bytes so far.
    fn finish(self) -> (T, u64, u64) {
        (self.inner, self.hasher.digest(), self.bytes)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.hasher.update(&buf[..written]);
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.hasher.update(&buf[..read]);
        self.bytes += read as u64;
        Ok(read)
    }
}
