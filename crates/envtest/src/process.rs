//! A child process whose stdout and stderr go to a log file, with signals, bounded waits and a
//! kill-and-reap on drop.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::Error;
use crate::error::LogTail;

/// How many log lines an error shows.
const TAIL_LINES: usize = 30;

pub(crate) struct Process {
    name: &'static str,
    child: Child,
    pid: u32,
    log: PathBuf,
}

impl Process {
    /// Starts `binary` with `args`, appending its output to `log` after a header line.
    pub(crate) fn spawn(
        name: &'static str,
        binary: &Path,
        args: &[OsString],
        log: &Path,
    ) -> Result<Process, Error> {
        let mut out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| Error::io("opening the log file", log, e))?;
        let header = format!("=== kube-envtest: {} {:?}", binary.display(), args);
        writeln!(out, "{header}").map_err(|e| Error::io("writing the log file", log, e))?;
        let err = out
            .try_clone()
            .map_err(|e| Error::io("opening the log file", log, e))?;
        let child = Command::new(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            // The backstop: if this `Process` is forgotten, tokio still kills the child.
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| Error::Spawn {
                binary: binary.to_owned(),
                source,
            })?;
        let pid = child.id().unwrap_or_default();
        tracing::debug!(process = name, pid, log = %log.display(), "started");
        Ok(Process {
            name,
            child,
            pid,
            log: log.to_owned(),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// `Some` once the process has exited (and been reaped).
    pub(crate) fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The error for a process that exited when it should not have.
    pub(crate) fn exited_error(&self, status: ExitStatus) -> Error {
        Error::Exited {
            process: self.name,
            status,
            log: LogTail::read(&self.log),
        }
    }

    /// Sends SIGTERM (the process may go on running for a while).
    pub(crate) fn terminate(&mut self) -> Result<(), Error> {
        if self.exit_status().is_some() {
            return Ok(());
        }
        let pid = Pid::from_raw(i32::try_from(self.pid).unwrap_or(i32::MAX));
        kill(pid, Signal::SIGTERM).map_err(|errno| Error::Signal {
            process: self.name,
            pid: self.pid,
            signal: "SIGTERM",
            source: std::io::Error::from(errno),
        })
    }

    /// Waits up to `timeout` for the process to exit.
    pub(crate) async fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// SIGKILL, then waits for the exit (bounded: a killed process exits at once).
    pub(crate) async fn kill(&mut self) -> Result<ExitStatus, Error> {
        if let Some(status) = self.exit_status() {
            return Ok(status);
        }
        let _ = self.child.start_kill();
        let waited = Duration::from_secs(10);
        self.wait_timeout(waited).await.ok_or(Error::DidNotExit {
            process: self.name,
            pid: self.pid,
            signal: "SIGKILL",
            waited,
        })
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL.
    pub(crate) async fn stop(&mut self, grace: Duration) -> Result<ExitStatus, Error> {
        self.terminate()?;
        match self.wait_timeout(grace).await {
            Some(status) => Ok(status),
            None => {
                tracing::debug!(
                    process = self.name,
                    pid = self.pid,
                    ?grace,
                    "SIGKILL after grace"
                );
                self.kill().await
            }
        }
    }

    /// SIGKILL and reap without a runtime, for `Drop`: polls for at most 5 s.
    pub(crate) fn kill_blocking(&mut self) {
        if self.exit_status().is_some() {
            return;
        }
        let _ = self.child.start_kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.exit_status().is_some() {
                tracing::debug!(process = self.name, pid = self.pid, "killed on drop");
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        tracing::warn!(
            process = self.name,
            pid = self.pid,
            "still running 5 s after SIGKILL"
        );
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill_blocking();
    }
}

impl LogTail {
    pub(crate) fn read(path: &Path) -> Box<LogTail> {
        Box::new(LogTail {
            path: path.to_owned(),
            tail: log_tail(path),
        })
    }
}

/// The last lines of a log file (reads at most its last 64 KiB), or a note saying why not.
pub(crate) fn log_tail(path: &Path) -> String {
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let start = lines.len().saturating_sub(TAIL_LINES);
            lines[start..]
                .iter()
                .map(|l| format!("    {l}\n"))
                .collect()
        }
        Err(err) => format!("    (could not read {}: {err})\n", path.display()),
    }
}

/// A port on 127.0.0.1 that was free a moment ago: bound to port 0, read, released.
pub(crate) fn free_port() -> Result<u16, Error> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(Error::NoFreePort)?;
    Ok(listener.local_addr().map_err(Error::NoFreePort)?.port())
}

/// Whether a listener can be bound on `127.0.0.1:port` right now.
pub(crate) fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// Whether the log says the process could not bind its port (a lost race for a free port).
pub(crate) fn lost_port_race(log: &Path) -> bool {
    log_tail(log).contains("address already in use")
}
