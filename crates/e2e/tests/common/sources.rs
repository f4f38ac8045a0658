//! The workspace's files, for the tests that read its sources and docs (`layering.rs`,
//! `public_api.rs`, `doc_numbers.rs`).

use std::{
    fs,
    path::{Path, PathBuf},
};

/// The workspace's root folder.
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `.rs` files under `dir`, into `into`, leaving out every file or folder whose name
/// `skip` accepts (and everything in a skipped folder).
pub(crate) fn rust_files(dir: &Path, skip: &impl Fn(&str) -> bool, into: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("a source dir") {
        let path = entry.expect("a dir entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if skip(name) {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, skip, into);
        } else if name.ends_with(".rs") {
            into.push(path);
        }
    }
}
