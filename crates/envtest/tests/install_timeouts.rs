//! The installer never hangs on the network: a server that accepts the connection and never
//! answers (a proxy, a mirror, a firewall that holds), or stops in the middle of a body, is
//! an error naming the URL and the ways out, once the timeout passes.
#![cfg(feature = "install")]

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    thread::JoinHandle,
    time::Duration,
};

use kube_envtest::{InstallError, Installer, NetworkTimeouts};

/// A server that reads each request, writes `prefix` (perhaps nothing), and then holds the
/// connection open without a byte more. Dropping it closes them and joins its thread.
struct Silent {
    url: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Silent {
    fn start(prefix: &'static [u8]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return; // dropping `held` closes every connection
                }
                let Ok(mut stream) = stream else { continue };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let _ = stream.write_all(prefix);
                held.push(stream);
            }
        });
        Self {
            url,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Installs from `index_url` with short timeouts, on a thread: the answer, or a panic if
/// none came within a minute (a guard against a hang, not the verdict).
fn install_from(index_url: String) -> Result<kube_envtest::Assets, InstallError> {
    let cache = std::env::temp_dir().join(format!("envtest-timeouts-{}", std::process::id()));
    let installer = Installer::new()
        .index_url(index_url)
        .cache_dir(cache)
        .timeouts(NetworkTimeouts {
            connect: Duration::from_secs(5),
            inactivity: Duration::from_millis(300),
            total: Duration::from_secs(30),
        });
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(installer.install("1.36.x"));
    });
    let answer = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the installer hung on a silent server");
    worker.join().unwrap();
    answer
}

fn assert_names_the_url_and_the_ways_out(error: InstallError, url: &str) {
    let message = error.to_string();
    assert!(
        matches!(&error, InstallError::Download { url: u, .. } if u == url),
        "{message}"
    );
    assert!(message.contains("no answer in time"), "{message}");
    assert!(message.contains("--index-url"), "{message}");
    assert!(message.contains("KUBEBUILDER_ASSETS"), "{message}");
}

#[test]
fn a_server_that_accepts_and_never_answers_is_an_error_not_a_hang() {
    let server = Silent::start(b"");
    let url = format!("{}/envtest-releases.yaml", server.url);
    let error = install_from(url.clone()).expect_err("nothing was answered");
    assert_names_the_url_and_the_ways_out(error, &url);
}

#[test]
fn a_body_that_stops_halfway_is_an_error_not_a_hang() {
    let server = Silent::start(b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\nreleases:\n");
    let url = format!("{}/envtest-releases.yaml", server.url);
    let error = install_from(url.clone()).expect_err("the body never ended");
    assert_names_the_url_and_the_ways_out(error, &url);
}
