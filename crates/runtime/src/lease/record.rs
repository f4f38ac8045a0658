//! [`LeaseRecord`]: the fields of a Lease that leader election reads and writes.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
};

/// A Lease's holder, duration, transitions and times (client-go's
/// `LeaderElectionRecord`). Equality is what "the record changed" means when deciding
/// whether the holder is alive.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct LeaseRecord {
    /// Who holds it (empty: nobody).
    pub(super) holder: String,
    /// How long the holder may go without renewing.
    pub(super) duration_seconds: i32,
    /// How many times the holder changed.
    pub(super) transitions: i32,
    /// When the holder acquired it (informational).
    pub(super) acquire_time: Option<MicroTime>,
    /// When the holder last renewed it (informational: never used for decisions).
    pub(super) renew_time: Option<MicroTime>,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// Whole seconds, rounded up: the Lease says how long others must wait, and waiting a
/// fraction longer is safe where a fraction shorter is not.
fn seconds(duration: Duration) -> i32 {
    let whole = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    i32::try_from(whole.max(1)).unwrap_or(i32::MAX)
}

impl LeaseRecord {
    /// The record of a Lease.
    pub(super) fn from_lease(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        Self {
            holder: spec.holder_identity.unwrap_or_default(),
            duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            transitions: spec.lease_transitions.unwrap_or(0),
            acquire_time: spec.acquire_time,
            renew_time: spec.renew_time,
        }
    }

    /// `holder` acquiring it now, after `transitions` changes of holder.
    pub(super) fn acquired(holder: &str, duration: Duration, transitions: i32) -> Self {
        Self {
            holder: holder.to_owned(),
            duration_seconds: seconds(duration),
            transitions,
            acquire_time: Some(now()),
            renew_time: Some(now()),
        }
    }

    /// The same holder renewing it now.
    pub(super) fn renewed(&self, duration: Duration) -> Self {
        Self {
            duration_seconds: seconds(duration),
            renew_time: Some(now()),
            ..self.clone()
        }
    }

    /// Given up: no holder, a one-second duration.
    pub(super) fn released(&self) -> Self {
        Self {
            holder: String::new(),
            duration_seconds: 1,
            transitions: self.transitions,
            acquire_time: Some(now()),
            renew_time: Some(now()),
        }
    }

    /// As a Lease spec.
    pub(super) fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.duration_seconds),
            lease_transitions: Some(self.transitions),
            acquire_time: self.acquire_time.clone(),
            renew_time: self.renew_time.clone(),
            ..LeaseSpec::default()
        }
    }
}
