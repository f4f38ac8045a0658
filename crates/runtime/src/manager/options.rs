//! [`ManagerOptions`]: the endpoints' address, shutdown, leader election, probe thresholds.

use std::{net::SocketAddr, time::Duration};

use crate::leader_election::LeaderElectionConfig;

/// Settings of a [`Manager`](super::Manager).
///
/// ```
/// use std::time::Duration;
/// use kube_informer_runtime::{leader_election::LeaderElectionConfig, manager::ManagerOptions};
///
/// let options = ManagerOptions::default()
///     .bind(([0, 0, 0, 0], 9443).into())
///     .shutdown_timeout(Duration::from_secs(20))
///     .leader_election(LeaderElectionConfig::new("my-operator", "operators", "pod-a"));
/// # let _ = options;
/// ```
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    pub(crate) bind: Option<SocketAddr>,
    pub(crate) shutdown_timeout: Duration,
    pub(crate) leader_election: Option<LeaderElectionConfig>,
    pub(crate) max_watch_failures: u32,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        Self {
            bind: Some(SocketAddr::from(([0, 0, 0, 0], 8080))),
            shutdown_timeout: Duration::from_secs(30),
            leader_election: None,
            max_watch_failures: 10,
        }
    }
}

impl ManagerOptions {
    /// Where `/healthz`, `/readyz` and `/metrics` are served (default `0.0.0.0:8080`;
    /// port 0 picks a free one, see [`Manager::addr`](super::Manager::addr)).
    #[must_use]
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = Some(addr);
        self
    }

    /// Serve no endpoints.
    #[must_use]
    pub fn no_endpoints(mut self) -> Self {
        self.bind = None;
        self
    }

    /// How long a graceful shutdown may take (default 30 s, controller-runtime's): in-flight
    /// reconciles drain, then informers stop, then the Lease is released. What is still
    /// running at the deadline is dropped; a second SIGTERM/SIGINT drops it at once.
    #[must_use]
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Run the controllers only while this replica leads (see
    /// [`leader_election`](crate::leader_election)). Caches are filled on every replica, so
    /// a new leader starts warm.
    #[must_use]
    pub fn leader_election(mut self, config: LeaderElectionConfig) -> Self {
        self.leader_election = Some(config);
        self
    }

    /// `/healthz` fails once an informer has failed this many lists/watches in a row
    /// (default 10): a watch that cannot recover (expired credentials, a removed resource)
    /// gets the process restarted, a blip does not.
    #[must_use]
    pub fn max_watch_failures(mut self, failures: u32) -> Self {
        self.max_watch_failures = failures.max(1);
        self
    }
}
