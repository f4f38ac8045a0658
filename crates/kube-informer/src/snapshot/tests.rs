use std::{fs, path::Path, sync::Arc};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::ObjectMeta;

use super::{CacheDir, Codec, Identity, Persistence, Refused, persist, read, write};

fn identity() -> Identity {
    Identity {
        server: "https://a:6443".into(),
        schema: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("default".into()),
        label_selector: Some("app=web".into()),
        field_selector: None,
        shard_selector: None,
    }
}

fn config_map(name: &str, version: u32) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            resource_version: Some(version.to_string()),
            ..Default::default()
        },
        data: Some([("k".to_owned(), "v".repeat(version as usize % 7))].into()),
        ..Default::default()
    })
}

fn objects(count: u32) -> Vec<Arc<ConfigMap>> {
    (1..=count)
        .map(|i| config_map(&format!("cm-{i}"), i))
        .collect()
}

fn written(dir: &Path, count: u32) -> std::path::PathBuf {
    let path = identity().path_in(dir);
    write(&path, Codec::json(), &identity(), "1234", &objects(count)).unwrap();
    path
}

fn load(path: &Path) -> Result<Vec<ConfigMap>, Refused> {
    read::<ConfigMap>(path, Codec::json(), &identity()).map(|loaded| {
        assert_eq!(loaded.resource_version, "1234");
        loaded.objects
    })
}

#[test]
fn a_snapshot_reads_back_as_written() {
    let dir = tempdir();
    let path = written(dir.path(), 50);
    let loaded = load(&path).unwrap();
    let expected: Vec<ConfigMap> = objects(50).iter().map(|o| (**o).clone()).collect();
    assert_eq!(loaded, expected);
    // No temporary file is left beside it.
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn a_file_cut_short_anywhere_is_refused() {
    let dir = tempdir();
    let path = written(dir.path(), 3);
    let whole = fs::read(&path).unwrap();
    for len in 0..whole.len() {
        fs::write(&path, &whole[..len]).unwrap();
        let refused = load(&path).unwrap_err();
        assert!(
            matches!(
                refused,
                Refused::Truncated | Refused::Corrupt(_) | Refused::NotASnapshot
            ),
            "cut at {len}: {refused:?}"
        );
    }
}

#[test]
fn any_flipped_bit_is_refused() {
    let dir = tempdir();
    let path = written(dir.path(), 3);
    let whole = fs::read(&path).unwrap();
    for byte in 0..whole.len() {
        for bit in [0, 3, 7] {
            let mut changed = whole.clone();
            changed[byte] ^= 1 << bit;
            fs::write(&path, &changed).unwrap();
            assert!(load(&path).is_err(), "byte {byte} bit {bit} went unnoticed");
        }
    }
}

#[test]
fn a_type_that_panics_while_decoding_refuses_the_file_instead_of_hanging() {
    let dir = tempdir();
    // Enough objects for several chunks: every decoding thread panics.
    let path = identity().path_in(dir.path());
    let big: Vec<_> = (0..3000)
        .map(|i| config_map(&format!("cm-{i:04}-{}", "x".repeat(400)), 1))
        .collect();
    write(&path, Codec::json(), &identity(), "1234", &big).unwrap();
    let panicking = Codec::<ConfigMap> {
        encode: Codec::<ConfigMap>::json().encode,
        decode: |_| panic!("a Deserialize that panics"),
    };
    let refused = read::<ConfigMap>(&path, panicking, &identity()).err();
    assert!(
        matches!(refused, Some(Refused::Corrupt(ref why)) if why.contains("panics")),
        "{refused:?}"
    );
}

#[test]
fn another_format_or_no_snapshot_is_refused() {
    let dir = tempdir();
    let path = written(dir.path(), 2);
    let mut future = fs::read(&path).unwrap();
    future[8..12].copy_from_slice(&2u32.to_le_bytes());
    fs::write(&path, &future).unwrap();
    assert_eq!(load(&path).unwrap_err(), Refused::Format(2));
    fs::write(&path, b"{\"items\": []}").unwrap();
    assert_eq!(load(&path).unwrap_err(), Refused::NotASnapshot);
    fs::remove_file(&path).unwrap();
    assert_eq!(load(&path).unwrap_err(), Refused::Missing);
}

#[test]
fn a_snapshot_of_another_server_kind_namespace_or_selector_is_refused() {
    let dir = tempdir();
    let path = written(dir.path(), 2);
    type Change = fn(&mut Identity);
    let others: [(&str, Change); 7] = [
        ("server", |i| i.server = "https://b:6443".into()),
        ("schema", |i| i.schema = "v2".into()),
        ("kind", |i| i.kind = "Secret".into()),
        ("namespace", |i| i.namespace = None),
        ("label selector", |i| {
            i.label_selector = Some("app=db".into())
        }),
        ("field selector", |i| i.field_selector = Some("a=b".into())),
        ("shard selector", |i| {
            i.shard_selector = Some("shardRange(object.metadata.uid, '0x0', '0x1')".into())
        }),
    ];
    for (field, change) in others {
        let mut other = identity();
        change(&mut other);
        assert_ne!(
            other.path_in(dir.path()),
            path,
            "{field}: one file for two identities"
        );
        let refused = read::<ConfigMap>(&path, Codec::json(), &other).err();
        assert_eq!(refused, Some(Refused::Foreign(field)));
    }
}

#[test]
fn an_older_snapshot_put_back_by_hand_is_refused() {
    let dir = tempdir();
    let persistence = Persistence {
        config: CacheDir::new(dir.path(), "https://a:6443"),
        identity: identity(),
        codec: Codec::<ConfigMap>::json(),
    };
    let path = identity().path_in(dir.path());
    write(&path, Codec::json(), &identity(), "100", &objects(1)).unwrap();
    let old = fs::read(&path).unwrap();
    persist::record_newest(&path, "100").unwrap();
    write(&path, Codec::json(), &identity(), "200", &objects(2)).unwrap();
    persist::record_newest(&path, "200").unwrap();
    assert!(persist::load_checked(&path, &persistence).is_ok());
    fs::write(&path, old).unwrap();
    let refused = persist::load_checked(&path, &persistence).err();
    assert_eq!(
        refused,
        Some(Refused::Older {
            snapshot: "100".into(),
            newest: "200".into()
        })
    );
}

#[test]
fn a_directory_that_cannot_be_written_is_an_error_not_a_panic() {
    let dir = tempdir();
    let file = dir.path().join("not-a-dir");
    fs::write(&file, b"").unwrap();
    let path = identity().path_in(&file);
    assert!(write(&path, Codec::json(), &identity(), "1", &objects(1)).is_err());
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn temporary_files_a_crash_left_are_swept_and_fresh_ones_kept() {
    let dir = tempdir();
    let path = identity().path_in(dir.path());
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let (old, fresh) = (
        dir.path().join(format!("{name}.1-0.tmp")),
        dir.path().join(format!("{name}.2-0.tmp")),
    );
    fs::write(&old, b"half a snapshot").unwrap();
    fs::write(&fresh, b"a write in progress").unwrap();
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    persist::sweep_temporary(&path);
    assert!(!old.exists(), "a stale temporary file is removed");
    assert!(fresh.exists(), "a recent one may be another writer's");
}
