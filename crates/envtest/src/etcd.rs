//! Starting etcd (one member, no fsync, on loopback) and waiting until it answers `/health`.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::error::LogTail;
use crate::options::merge_flags;
use crate::process::{Process, free_port, lost_port_race};
use crate::{EnvironmentOptions, Error};

/// How many times a start is retried when another process took a port we had reserved.
const PORT_RACE_ATTEMPTS: usize = 3;

pub(crate) struct Etcd {
    pub(crate) process: Process,
    pub(crate) url: String,
}

/// Starts etcd with its data in `data_dir` and its output in `log`, and waits for `/health`.
pub(crate) async fn start_etcd(
    binary: &Path,
    data_dir: &Path,
    log: &Path,
    options: &EnvironmentOptions,
) -> Result<Etcd, Error> {
    let mut attempt = 1;
    loop {
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let url = format!("http://127.0.0.1:{client_port}");
        let defaults = vec![
            "--name=envtest".to_owned(),
            format!("--data-dir={}", data_dir.display()),
            format!("--listen-client-urls={url}"),
            format!("--advertise-client-urls={url}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            "--unsafe-no-fsync".to_owned(),
        ];
        let args: Vec<_> = merge_flags(defaults, &options.etcd_args)
            .into_iter()
            .map(Into::into)
            .collect();
        let mut process = Process::spawn("etcd", binary, &args, log)?;
        match wait_healthy(&mut process, client_port, options.startup_timeout).await {
            Ok(()) => {
                tracing::info!(url, pid = process.pid(), "etcd is healthy");
                return Ok(Etcd { process, url });
            }
            Err(Error::Exited { .. }) if attempt < PORT_RACE_ATTEMPTS && lost_port_race(log) => {
                tracing::info!(client_port, peer_port, "etcd lost a port race, retrying");
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

async fn wait_healthy(process: &mut Process, port: u16, timeout: Duration) -> Result<(), Error> {
    let started = Instant::now();
    let mut last;
    loop {
        if let Some(status) = process.exit_status() {
            return Err(process.exited_error(status));
        }
        match health(port).await {
            Ok(body) if body.contains(r#""health":"true""#) => return Ok(()),
            Ok(body) => last = body,
            Err(err) => last = err.to_string(),
        }
        if started.elapsed() >= timeout {
            return Err(Error::Timeout {
                process: "etcd",
                url: format!("http://127.0.0.1:{port}/health"),
                waited: started.elapsed(),
                last,
                log: LogTail::read(process.log()),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET /health` over plain HTTP/1.0: the status line and body, as text.
async fn health(port: u16) -> std::io::Result<String> {
    let exchange = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok(String::from_utf8_lossy(&response).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(2), exchange)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}
