//! The installer against a local HTTP server that serves a release index and an archive made
//! of this machine's envtest binaries (there is no internet here): the version picked, the
//! checksum verified, the cache used without the network, and the installed binaries start
//! a real API server.
#![cfg(feature = "install")]

use std::{
    io::{Read, Write},
    net::TcpListener,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use kube_envtest::{Assets, Environment, EnvironmentOptions, InstallError, Installer};

/// A one-thread HTTP/1.1 server of fixed files; counts the requests it answers. Dropping it
/// stops the thread and joins it.
struct Files {
    url: String,
    requests: Arc<AtomicUsize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Files {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = std::net::TcpStream::connect(self.url.trim_start_matches("http://"));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(files: Vec<(String, Vec<u8>)>) -> Files {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = stop.clone();
    let thread = std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stopping.load(Ordering::SeqCst) {
                return;
            }
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            counter.fetch_add(1, Ordering::SeqCst);
            let line = String::from_utf8_lossy(&head);
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let (status, body) = match files.iter().find(|(p, _)| *p == path) {
                Some((_, body)) => ("200 OK", body.as_slice()),
                None => ("404 Not Found", &b"not found"[..]),
            };
            let header = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(header.as_bytes());
            let _ = stream.write_all(body);
        }
    });
    Files {
        url,
        requests,
        stop,
        thread: Some(thread),
    }
}

/// A tar.gz laid out as envtest's: `controller-tools/envtest/{kube-apiserver,etcd}`.
fn archive(assets: &Assets) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (name, path) in [
        ("kube-apiserver", assets.kube_apiserver()),
        ("etcd", assets.etcd()),
    ] {
        tar.append_path_with_name(path, format!("controller-tools/envtest/{name}"))
            .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn sha512(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA512, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn entry(version: &str, base: &str, hash: &str) -> String {
    let name = format!("envtest-{version}-{}-amd64.tar.gz", std::env::consts::OS);
    format!("  {version}:\n    {name}:\n      hash: {hash}\n      selfLink: {base}/{name}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_the_newest_matching_release_checked_and_cached() {
    let Some(assets) = Assets::from_env_or_skip("installs_the_newest_matching_release") else {
        return;
    };
    if std::env::consts::ARCH != "x86_64" {
        eprintln!("skipped: the archive served here holds this machine's x86-64 binaries");
        return;
    }
    let tarball = archive(&assets);
    let hash = sha512(&tarball);
    let os = std::env::consts::OS;
    // The server learns its own address after binding: serve the index from a second
    // server that points at the first.
    let archives = serve(vec![
        (
            format!("/envtest-v1.36.2-{os}-amd64.tar.gz"),
            tarball.clone(),
        ),
        (
            format!("/envtest-v1.37.0-{os}-amd64.tar.gz"),
            tarball.clone(),
        ),
    ]);
    let base = &archives.url;
    let index = format!(
        "releases:\n{}{}{}{}",
        entry("v1.35.0", base, &hash),
        entry("v1.36.2", base, &hash),
        entry("v1.36.1", base, &hash),
        entry("v1.37.0", base, &"0".repeat(128)),
    );
    let index_server = serve(vec![("/envtest-releases.yaml".into(), index.into_bytes())]);
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("envtest-install-cache");
    let _ = std::fs::remove_dir_all(&cache);
    let installer = Installer::new()
        .index_url(format!("{}/envtest-releases.yaml", index_server.url))
        .cache_dir(&cache);

    let install = |selector: &'static str| {
        let installer = installer.clone();
        tokio::task::spawn_blocking(move || installer.install(selector))
    };
    let installed = install("1.36.x").await.unwrap().expect("1.36.x installs");
    assert_eq!(installed.dir(), installer.version_dir("1.36.2"));
    assert_eq!(
        archives.requests.load(Ordering::SeqCst),
        1,
        "one archive downloaded"
    );
    for (ours, theirs) in [
        (installed.kube_apiserver(), assets.kube_apiserver()),
        (installed.etcd(), assets.etcd()),
    ] {
        assert_eq!(std::fs::read(ours).unwrap(), std::fs::read(theirs).unwrap());
    }

    // An exact version in the cache needs no network at all.
    let index_requests = index_server.requests.load(Ordering::SeqCst);
    let again = install("v1.36.2").await.unwrap().expect("from the cache");
    assert_eq!(again, installed);
    assert_eq!(index_server.requests.load(Ordering::SeqCst), index_requests);
    assert_eq!(archives.requests.load(Ordering::SeqCst), 1);

    // A wrong checksum installs nothing.
    match install("1.37.x").await.unwrap() {
        Err(InstallError::Checksum { expected, .. }) => assert_eq!(expected, "0".repeat(128)),
        other => panic!("a bad checksum must fail: {other:?}"),
    }
    assert!(!installer.version_dir("1.37.0").exists());

    match install("1.99.x").await.unwrap() {
        Err(InstallError::NoMatch { available, .. }) => {
            assert_eq!(available, "v1.35.0, v1.36.1, v1.36.2, v1.37.0");
        }
        other => panic!("an unknown version must fail: {other:?}"),
    }

    // What was installed runs a real API server.
    let env = Environment::start(EnvironmentOptions::new().assets(installed))
        .await
        .expect("the installed binaries start");
    let version = env.client().apiserver_version().await.unwrap();
    assert_eq!(version.git_version, "v1.36.2");
}
