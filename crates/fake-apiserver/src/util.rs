//! Small helpers over well-kept crates: API-server timestamps (jiff), a seeded random
//! generator (fastrand) and the UUIDs it makes (uuid).

use std::time::SystemTime;

/// `now` as the API server writes timestamps: `2026-11-21T13:27:23Z` (UTC, whole seconds).
pub(crate) fn rfc3339(now: SystemTime) -> String {
    let at = jiff::Timestamp::try_from(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A seeded generator: the same seed gives the same uids, generated names and fault
/// choices, so a failing test can be replayed.
#[derive(Debug, Clone)]
pub(crate) struct Rng(fastrand::Rng);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(fastrand::Rng::with_seed(seed))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0.u64(..)
    }

    /// A random (version 4) UUID, hyphenated.
    pub(crate) fn uuid(&mut self) -> String {
        let mut bytes = [0u8; 16];
        self.0.fill(&mut bytes);
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    /// `n` random characters from the alphabet `generateName` suffixes use (no vowels, so
    /// no words).
    pub(crate) fn suffix(&mut self, n: usize) -> String {
        const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..n)
            .map(|_| CHARS[self.0.usize(..CHARS.len())] as char)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_are_rfc3339_utc_seconds() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_267_643); // a capture's timestamp
        assert_eq!(rfc3339(t), "2026-11-21T13:27:23Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn uuids_are_v4_shaped_and_seeded() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let u = a.uuid();
        assert_eq!(u, b.uuid());
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
        assert_ne!(u, a.uuid());
    }
}
