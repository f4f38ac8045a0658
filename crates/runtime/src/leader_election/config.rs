//! [`LeaderElectionConfig`]: the Lease and client-go's three durations.

use std::time::Duration;

/// client-go's `JitterFactor`: retries wait up to this fraction longer.
pub(crate) const JITTER_FACTOR: f64 = 1.2;

/// The least time between the renew deadline and the end of the lease: what an old leader
/// has, after it steps down, for its last reconciles to stop and its last requests to land
/// before another candidate may take over.
pub const MIN_MARGIN: Duration = Duration::from_secs(1);

/// Which Lease, who competes for it, and the timing (client-go's defaults, as
/// controller-runtime uses them: lease 15 s, renew deadline 10 s, retry 2 s).
///
/// The identity defaults to `<hostname>_<random suffix>`, unique per process (two
/// replicas with one identity would both lead); the namespace to the client's default
/// namespace (in a cluster: the pod's own, from its service account).
///
/// ```
/// use std::time::Duration;
/// use kube_informer_runtime::leader_election::LeaderElectionConfig;
///
/// let config = LeaderElectionConfig::new("my-operator");
/// assert!(config.validate().is_ok());
/// // The renew deadline must leave room before the lease runs out: refused, not guessed.
/// let bad = config.clone().renew_deadline(Duration::from_secs(20));
/// assert!(bad.validate().is_err());
/// let pinned = config.namespace("operators").identity("pod-a");
/// assert!(pinned.validate().is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    pub(crate) name: String,
    pub(crate) namespace: Option<String>,
    pub(crate) identity: String,
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
    pub(crate) release_on_cancel: bool,
    pub(crate) labels: std::collections::BTreeMap<String, String>,
}

/// A configuration that cannot give the safety guarantee.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The renew deadline must be shorter than the lease duration by at least
    /// [`MIN_MARGIN`]: the margin between them is what keeps an old leader from
    /// overlapping a new one.
    #[error(
        "the lease duration ({lease:?}) must be longer than the renew deadline ({renew:?}) by at least {MIN_MARGIN:?}"
    )]
    LeaseNotLongerThanRenew {
        /// The lease duration.
        lease: Duration,
        /// The renew deadline.
        renew: Duration,
    },
    /// The renew deadline must leave room for a jittered retry.
    #[error(
        "the renew deadline ({renew:?}) must be longer than 1.2 × the retry period ({retry:?})"
    )]
    RenewNotLongerThanRetry {
        /// The renew deadline.
        renew: Duration,
        /// The retry period.
        retry: Duration,
    },
    /// A name, namespace or identity is empty.
    #[error("the lease {0} must not be empty")]
    Empty(&'static str),
}

impl LeaderElectionConfig {
    /// The Lease `name`, in the client's default namespace, competed for under a unique
    /// identity of this process.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            namespace: None,
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
            labels: std::collections::BTreeMap::new(),
        }
    }

    /// How long the Lease is valid after a renewal, for the other candidates (default 15 s).
    #[must_use]
    pub fn lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self
    }

    /// How long the leader keeps trying to renew before it steps down (default 10 s).
    #[must_use]
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = deadline;
        self
    }

    /// How often candidates try to acquire, and the leader to renew (default 2 s).
    #[must_use]
    pub fn retry_period(mut self, period: Duration) -> Self {
        self.retry_period = period;
        self
    }

    /// Whether a leader that is cancelled gives the Lease up, so that another candidate
    /// takes over at once instead of after the lease duration (default: on).
    #[must_use]
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// The namespace of the Lease (default: the client's default namespace, which in a
    /// cluster is the pod's own).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// This candidate's identity (default `<hostname>_<random suffix>`). It must be unique
    /// among the candidates: two with one identity both believe they lead.
    #[must_use]
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// Labels written on the Lease, so that a group of Leases can be listed (a shard
    /// ring's: see [`sharding::shard_lease`](crate::sharding::shard_lease)).
    #[must_use]
    pub fn labels<I, K, V>(mut self, labels: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.labels = labels
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self
    }

    /// Checks client-go's rules between the durations.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let namespace = self.namespace.as_deref().unwrap_or("-");
        for (what, value) in [
            ("name", self.name.as_str()),
            ("namespace", namespace),
            ("identity", self.identity.as_str()),
        ] {
            if value.is_empty() {
                return Err(ConfigError::Empty(what));
            }
        }
        if self.lease_duration < self.renew_deadline + MIN_MARGIN {
            return Err(ConfigError::LeaseNotLongerThanRenew {
                lease: self.lease_duration,
                renew: self.renew_deadline,
            });
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(ConfigError::RenewNotLongerThanRetry {
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        Ok(())
    }
}

/// `<hostname>_<8 hex digits>`: unique per process, readable in the Lease (which pod
/// leads), as controller-runtime's `hostname_uuid`.
fn default_identity() -> String {
    use std::hash::BuildHasher;
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "candidate".to_owned());
    let seed = (std::process::id(), std::time::SystemTime::now());
    let random = std::collections::hash_map::RandomState::new().hash_one(seed);
    format!("{host}_{:08x}", random as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_gos_rules_between_the_durations() {
        let ok = LeaderElectionConfig::new("l");
        assert!(ok.validate().is_ok(), "the defaults are valid");
        let s = Duration::from_secs;
        let bad = ok.clone().lease_duration(s(10));
        assert!(matches!(
            bad.validate(),
            Err(ConfigError::LeaseNotLongerThanRenew { .. })
        ));
        let no_margin = ok.clone().renew_deadline(Duration::from_millis(14_500));
        assert!(
            matches!(
                no_margin.validate(),
                Err(ConfigError::LeaseNotLongerThanRenew { .. })
            ),
            "half a second is no margin"
        );
        assert!(
            ok.clone().renew_deadline(s(13)).validate().is_ok(),
            "15/13/2"
        );
        let bad = ok.clone().retry_period(s(9));
        assert!(matches!(
            bad.validate(),
            Err(ConfigError::RenewNotLongerThanRetry { .. })
        ));
        let bad = LeaderElectionConfig::new("l").identity("");
        assert_eq!(bad.validate(), Err(ConfigError::Empty("identity")));
    }

    #[test]
    fn identities_are_unique_per_process_by_default() {
        let (a, b) = (
            LeaderElectionConfig::new("l"),
            LeaderElectionConfig::new("l"),
        );
        assert_ne!(a.identity, b.identity);
    }
}
