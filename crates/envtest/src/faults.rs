//! Stopping, killing and restarting kube-apiserver: the server-side failures a client must
//! survive. The apiserver always comes back on the same port with the same etcd data.

use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::{Environment, Error};

impl Environment {
    /// Stops kube-apiserver gracefully: SIGTERM, then SIGKILL if it has not exited within the
    /// grace period ([`EnvironmentOptions::stop_grace_period`], 5 s by default; with watches
    /// open it would otherwise linger up to 60 s; without, it exits in well under a second). Returns once it has exited. Does nothing if it is
    /// not running.
    ///
    /// [`EnvironmentOptions::stop_grace_period`]: crate::EnvironmentOptions::stop_grace_period
    pub async fn stop_apiserver(&mut self) -> Result<(), Error> {
        if let Some(mut process) = self.apiserver.take() {
            let status = process.stop(self.stop_grace).await?;
            tracing::info!(pid = process.pid(), %status, "kube-apiserver stopped");
        }
        Ok(())
    }

    /// Sends SIGTERM to kube-apiserver and returns as soon as it has stopped listening (about
    /// 0.1 s), while the old process is still alive: the shape of a real apiserver rollout.
    ///
    /// What the old process does then (verified with kube-apiserver 1.36): it accepts no new
    /// connections, closes idle ones, and keeps serving the watches it has open, events
    /// included (its watch cache still follows etcd), until it is killed or, 60 s after
    /// SIGTERM, gives up waiting for them, closes them and exits. A new apiserver can be
    /// started on the port at once ([`start_apiserver`](Self::start_apiserver)); the old one
    /// is killed by [`kill_terminated_apiservers`](Self::kill_terminated_apiservers) or on
    /// drop. For a watch that goes silent, partition the [`proxy`](Self::proxy) instead.
    ///
    /// Returns the old process's pid (`None` if no apiserver was running).
    pub async fn terminate_apiserver(&mut self) -> Result<Option<u32>, Error> {
        let Some(mut process) = self.apiserver.take() else {
            return Ok(None);
        };
        let pid = process.pid();
        process.terminate()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        // Connecting fails once the listener is closed (within ~0.1 s of SIGTERM).
        while TcpStream::connect(("127.0.0.1", self.port())).await.is_ok() {
            if Instant::now() >= deadline {
                self.terminated.push(process);
                return Err(Error::DidNotExit {
                    process: "kube-apiserver's listener",
                    pid,
                    signal: "SIGTERM",
                    waited: Duration::from_secs(10),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::info!(
            pid,
            "kube-apiserver terminated: no longer listening, still alive"
        );
        self.terminated.push(process);
        Ok(Some(pid))
    }

    /// Kills (SIGKILL) the apiservers left alive by
    /// [`terminate_apiserver`](Self::terminate_apiserver): their open connections close.
    pub async fn kill_terminated_apiservers(&mut self) -> Result<(), Error> {
        for mut process in self.terminated.drain(..) {
            process.kill().await?;
        }
        Ok(())
    }

    /// Kills kube-apiserver (SIGKILL) and returns once it has exited: every connection to it
    /// closes at once, nothing is cleaned up (a crash, an OOM kill).
    pub async fn kill_apiserver(&mut self) -> Result<(), Error> {
        if let Some(mut process) = self.apiserver.take() {
            process.kill().await?;
            tracing::info!(pid = process.pid(), "kube-apiserver killed");
        }
        Ok(())
    }

    /// Starts kube-apiserver again on the same port, against the same etcd (so every object
    /// and resource version is still there), and returns once `/readyz` answers 200. Clients
    /// from [`client`](Self::client) reconnect by themselves. Fails with
    /// [`Error::ApiServerRunning`] if one is running.
    pub async fn start_apiserver(&mut self) -> Result<(), Error> {
        if let Some(process) = &self.apiserver {
            return Err(Error::ApiServerRunning {
                port: self.port(),
                pid: process.pid(),
            });
        }
        if let Some(status) = self.etcd.exit_status() {
            return Err(self.etcd.exited_error(status));
        }
        let process = self.launcher.start(&self.readiness).await?;
        self.apiserver = Some(process);
        Ok(())
    }

    /// [`stop_apiserver`](Self::stop_apiserver) then
    /// [`start_apiserver`](Self::start_apiserver).
    pub async fn restart_apiserver(&mut self) -> Result<(), Error> {
        self.stop_apiserver().await?;
        self.start_apiserver().await
    }

    /// The running kube-apiserver's pid (`None` while stopped).
    pub fn apiserver_pid(&self) -> Option<u32> {
        self.apiserver.as_ref().map(|p| p.pid())
    }

    /// The pids of apiservers terminated but not yet killed.
    pub fn terminated_apiserver_pids(&self) -> Vec<u32> {
        self.terminated.iter().map(|p| p.pid()).collect()
    }

    /// etcd's pid.
    pub fn etcd_pid(&self) -> u32 {
        self.etcd.pid()
    }

    /// Stops everything gracefully (kube-apiserver, then etcd: SIGTERM, SIGKILL after the
    /// grace period) and removes the folder. Dropping the environment does the same with
    /// SIGKILL at once; use this when a test wants to see a clean shutdown.
    pub async fn stop(mut self) -> Result<(), Error> {
        self.kill_terminated_apiservers().await?;
        self.stop_apiserver().await?;
        let grace = self.stop_grace;
        self.etcd.stop(grace).await?;
        Ok(())
    }
}
