//! [`LeaderElectionConfig`]: the Lease and client-go's three durations.

use std::time::Duration;

/// client-go's `JitterFactor`: retries wait up to this fraction longer.
pub(crate) const JITTER_FACTOR: f64 = 1.2;

/// Which Lease, who competes for it, and the timing (client-go's defaults, as
/// controller-runtime uses them: lease 15 s, renew deadline 10 s, retry 2 s).
///
/// ```
/// use std::time::Duration;
/// use kube_informer_runtime::leader_election::LeaderElectionConfig;
///
/// let config = LeaderElectionConfig::new("my-operator", "operators", "pod-a");
/// assert!(config.validate().is_ok());
/// // The renew deadline must leave room before the lease runs out: refused, not guessed.
/// let bad = config.renew_deadline(Duration::from_secs(20));
/// assert!(bad.validate().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) identity: String,
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
    pub(crate) release_on_cancel: bool,
}

/// A configuration that cannot give the safety guarantee.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The renew deadline must be shorter than the lease duration: the margin between them
    /// is what keeps an old leader from overlapping a new one.
    #[error("the lease duration ({lease:?}) must be longer than the renew deadline ({renew:?})")]
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
    /// The Lease `name` in `namespace`, competed for as `identity` (unique per replica: the
    /// pod's name is the usual choice).
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
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

    /// The candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Checks client-go's rules between the durations.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (what, value) in [
            ("name", &self.name),
            ("namespace", &self.namespace),
            ("identity", &self.identity),
        ] {
            if value.is_empty() {
                return Err(ConfigError::Empty(what));
            }
        }
        if self.lease_duration <= self.renew_deadline {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_gos_rules_between_the_durations() {
        let ok = LeaderElectionConfig::new("l", "ns", "me");
        assert!(ok.validate().is_ok(), "the defaults are valid");
        let s = Duration::from_secs;
        let bad = ok.clone().lease_duration(s(10));
        assert!(matches!(
            bad.validate(),
            Err(ConfigError::LeaseNotLongerThanRenew { .. })
        ));
        let bad = ok.clone().retry_period(s(9));
        assert!(matches!(
            bad.validate(),
            Err(ConfigError::RenewNotLongerThanRetry { .. })
        ));
        let bad = LeaderElectionConfig::new("l", "ns", "");
        assert_eq!(bad.validate(), Err(ConfigError::Empty("identity")));
    }
}
