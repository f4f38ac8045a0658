//! Finding the binaries and skipping without them. Needs no binaries: the lookup is tested on
//! folders made here, and `start_or_skip` in a child process whose environment lacks
//! `KUBEBUILDER_ASSETS` (this process's environment is never changed).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use kube_envtest::{
    ASSETS_ENV, Assets, AssetsError, Environment, EnvironmentOptions, REQUIRED_ENV,
};

/// Set in the child process that runs `child_start_or_skip`.
const CHILD_ENV: &str = "KUBE_ENVTEST_ASSETS_TEST_CHILD";

fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("envtest-assets-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn put(dir: &Path, name: &str, mode: u32) {
    let path = dir.join(name);
    std::fs::write(&path, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn an_unset_or_empty_variable_is_not_set() {
    assert_eq!(Assets::locate(None), Err(AssetsError::NotSet));
    assert_eq!(Assets::locate(Some("".as_ref())), Err(AssetsError::NotSet));
    let message = AssetsError::NotSet.to_string();
    assert!(
        message.contains(ASSETS_ENV) && message.contains("kube-envtest install"),
        "{message}"
    );
}

#[test]
fn a_folder_without_the_binaries_names_what_is_missing() {
    let dir = fresh_dir("missing");
    put(&dir, "etcd", 0o755);
    put(&dir, "kube-apiserver", 0o644); // not executable
    let err = Assets::locate(Some(dir.as_os_str())).unwrap_err();
    assert_eq!(
        err,
        AssetsError::Missing {
            dir: dir.clone(),
            missing: vec!["kube-apiserver"]
        }
    );
    assert_eq!(
        err.to_string(),
        format!("{} has no executable kube-apiserver", dir.display())
    );

    std::fs::remove_file(dir.join("etcd")).unwrap();
    let err = Assets::in_dir(&dir).unwrap_err().to_string();
    assert!(
        err.ends_with("has no executable kube-apiserver or etcd"),
        "{err}"
    );

    let err = Assets::in_dir(dir.join("nope")).unwrap_err();
    assert!(matches!(err, AssetsError::NotADirectory { .. }));
}

#[test]
fn a_folder_with_both_binaries_is_found() {
    let dir = fresh_dir("found");
    put(&dir, "etcd", 0o755);
    put(&dir, "kube-apiserver", 0o700);
    let assets = Assets::locate(Some(dir.as_os_str())).unwrap();
    assert_eq!(assets.dir(), dir);
    assert_eq!(assets.etcd(), dir.join("etcd"));
    assert_eq!(assets.kube_apiserver(), dir.join("kube-apiserver"));
}

#[test]
fn the_skip_banner_says_what_to_do() {
    // (`or_skip` itself prints it: that is tested in a child process below.)
    let banner = AssetsError::NotSet.skip_message("a_test");
    assert!(
        banner.contains("SKIPPED: a_test needs a real kube-apiserver and etcd"),
        "{banner}"
    );
    assert!(
        banner.contains(REQUIRED_ENV) && banner.contains("kube-envtest install"),
        "{banner}"
    );
}

#[test]
#[should_panic(expected = "KUBE_ENVTEST_REQUIRED is set but the envtest binaries are missing")]
fn missing_binaries_fail_when_required() {
    Assets::or_skip(Assets::locate(None), true, "a_test");
}

/// Runs `child_start_or_skip` in a child process of this test binary with `env` changes.
fn run_child(required: Option<&str>) -> std::process::Output {
    // The test's name in this binary: its module path without the crate's name.
    let module = module_path!().split_once("::").map_or("", |(_, path)| path);
    let name = format!("{module}::child_start_or_skip");
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", name.as_str(), "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env_remove(ASSETS_ENV)
        .env_remove(REQUIRED_ENV);
    if let Some(value) = required {
        command.env(REQUIRED_ENV, value);
    }
    command.output().unwrap()
}

#[test]
fn start_or_skip_prints_a_banner_past_the_capture() {
    let out = run_child(None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("SKIPPED: assets::child_start_or_skip needs a real kube-apiserver"),
        "{stderr}"
    );
}

#[test]
fn start_or_skip_fails_when_required() {
    let out = run_child(Some("1"));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("KUBE_ENVTEST_REQUIRED is set but the envtest binaries are missing"),
        "{all}"
    );
    assert!(!all.contains("SKIPPED"), "{all}");
}

/// Does its work only in the child process started by the two tests above.
#[tokio::test]
async fn child_start_or_skip() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let env = Environment::start_or_skip(EnvironmentOptions::new())
        .await
        .unwrap();
    assert!(
        env.is_none(),
        "KUBEBUILDER_ASSETS was removed, there is nothing to start"
    );
}
