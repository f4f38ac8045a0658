//! [`ManagerError`]: why a manager stopped, other than being asked to.

use std::net::SocketAddr;

use crate::leader_election::ConfigError;

/// Why a manager stopped, other than being asked to.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManagerError {
    /// The endpoints' address could not be bound.
    #[error("binding the health and metrics endpoints on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The secure metrics endpoint's certificate could not be read.
    #[cfg(feature = "tls")]
    #[error("secure metrics certificate: {0}")]
    MetricsCertificate(#[source] crate::tls::TlsError),
    /// No client could be made from the configuration
    /// ([`Manager::from_config`](super::Manager::from_config)).
    #[error("cannot make a client for the API server: {0}")]
    Client(#[source] kube::Error),
    /// The leader election settings are not safe.
    #[error(transparent)]
    LeaderElection(#[from] ConfigError),
    /// This replica lost leadership: its controllers were stopped at once. Restart the
    /// process to campaign again (as controller-runtime does).
    #[error("leadership lost; controllers stopped")]
    LeadershipLost,
    /// Two controllers were added under one name: their metric series, work queue names
    /// and logs would be one and the same, so the manager refuses to start (as
    /// controller-runtime refuses a second controller of a name).
    #[error(
        "two controllers are named {name:?}: their metrics, queues and logs would collide; \
         give each its own ControllerOptions::name"
    )]
    DuplicateController {
        /// The name added twice.
        name: String,
    },
    /// A controller or task stopped with an error.
    #[error("{name} stopped: {why}")]
    Runnable {
        /// Which one.
        name: String,
        /// Why.
        why: String,
    },
}
