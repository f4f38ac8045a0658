//! Exponential backoff with jitter, reset after a quiet period: the reflector never retries
//! in a hot loop.

use std::time::Duration;

use tokio::time::Instant;

/// A seed drawn from the operating system's randomness (through std's hasher keys, which
/// it seeds from the OS) and the time, different for every call.
pub(crate) fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one(now)
}

/// splitmix64's finalizer: every input bit flips about half the output bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The backoff's stream of a reflector's seed.
pub(crate) const BACKOFF_STREAM: u64 = 0;
/// The stream for watch timeouts and Retry-After jitter.
pub(crate) const WATCH_STREAM: u64 = 1;

/// A small deterministic generator for jitter (xorshift64).
#[derive(Debug, Clone)]
pub(crate) struct Jitter(u64);

impl Jitter {
    /// The generator of `stream` for `seed`: every bit of the seed counts, and the streams
    /// of one seed (or of neighbouring seeds) are unrelated.
    pub(crate) fn new(seed: u64, stream: u64) -> Self {
        let state = mix(mix(seed) ^ mix(!stream));
        // xorshift's one fixed point is 0.
        Self(if state == 0 {
            0x2545_F491_4F6C_DD1D
        } else {
            state
        })
    }

    /// Uniform in `[low, high]`.
    pub(crate) fn between(&mut self, low: Duration, high: Duration) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let unit = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        low + (high.saturating_sub(low)).mul_f64(unit)
    }
}

/// Delays after consecutive failures: each drawn uniformly between `initial` and the current
/// cap, the cap doubling from twice `initial` to `max`; a failure after `reset` without one
/// starts over. The first retry is jittered too (client-go's jitter factor 1.0 gives the same
/// `[d, 2d]` spread), so clients that failed together do not retry together.
#[derive(Debug)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    reset: Duration,
    failures: u32,
    last_failure: Option<Instant>,
    jitter: Jitter,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration, reset: Duration, seed: u64) -> Self {
        Self {
            initial,
            max,
            reset,
            failures: 0,
            last_failure: None,
            jitter: Jitter::new(seed, BACKOFF_STREAM),
        }
    }

    /// The delay before retrying after a failure now.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if self
            .last_failure
            .is_some_and(|t| now.saturating_duration_since(t) > self.reset)
        {
            self.failures = 0;
        }
        self.last_failure = Some(now);
        let factor = 1u32
            .checked_shl(self.failures.saturating_add(1).min(31))
            .unwrap_or(u32::MAX);
        let cap = self
            .initial
            .checked_mul(factor)
            .unwrap_or(self.max)
            .min(self.max);
        self.failures = self.failures.saturating_add(1);
        self.jitter.between(self.initial, cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn delays_grow_to_the_cap_and_reset_after_quiet() {
        let (initial, max) = (Duration::from_millis(800), Duration::from_secs(30));
        let mut b = Backoff::new(initial, max, Duration::from_secs(120), 1);
        let mut caps = Vec::new();
        for n in 0..10u32 {
            let d = b.next_delay();
            let cap = (initial * 2u32.pow(n + 1)).min(max);
            assert!(
                d >= initial && d <= cap,
                "failure {n}: {d:?} not in [{initial:?}, {cap:?}]"
            );
            caps.push(cap);
        }
        assert_eq!(*caps.last().unwrap(), max);
        tokio::time::advance(Duration::from_secs(121)).await;
        assert!(
            b.next_delay() <= initial * 2,
            "quiet for 2 min: back to the first step"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_retry_is_jittered_too() {
        let initial = Duration::from_millis(800);
        let firsts: std::collections::HashSet<Duration> = (0..50)
            .map(|seed| {
                Backoff::new(
                    initial,
                    Duration::from_secs(30),
                    Duration::from_secs(120),
                    seed,
                )
                .next_delay()
            })
            .collect();
        assert!(
            firsts.len() > 40,
            "50 clients failing together retry at {} distinct times",
            firsts.len()
        );
        assert!(firsts.iter().all(|d| *d >= initial && *d <= initial * 2));
    }

    fn draws(seed: u64, stream: u64) -> Vec<Duration> {
        let mut j = Jitter::new(seed, stream);
        (0..8)
            .map(|_| j.between(Duration::ZERO, Duration::from_secs(1000)))
            .collect()
    }

    #[test]
    fn every_seed_bit_counts_and_streams_are_independent() {
        for seed in 0..2000u64 {
            let mine = draws(seed, BACKOFF_STREAM);
            assert_ne!(
                mine,
                draws(seed ^ 1, BACKOFF_STREAM),
                "seeds {seed} and {}",
                seed ^ 1
            );
            assert_ne!(
                mine,
                draws(seed, WATCH_STREAM),
                "the streams of seed {seed}"
            );
            assert_ne!(
                mine,
                draws(seed + 1, WATCH_STREAM),
                "seed {seed} vs the next's other stream"
            );
        }
        let high = draws(1 << 63, BACKOFF_STREAM);
        assert_ne!(high, draws(0, BACKOFF_STREAM), "the top bit counts too");
    }

    #[test]
    fn random_seeds_differ() {
        let seeds: std::collections::HashSet<u64> = (0..100).map(|_| random_seed()).collect();
        assert_eq!(seeds.len(), 100);
    }

    #[test]
    fn jitter_spreads_and_is_seeded() {
        let (lo, hi) = (Duration::from_secs(300), Duration::from_secs(600));
        let draws: Vec<_> = {
            let mut j = Jitter::new(9, 0);
            (0..100).map(|_| j.between(lo, hi)).collect()
        };
        assert!(draws.iter().all(|d| *d >= lo && *d <= hi));
        assert!(draws.iter().any(|d| *d < Duration::from_secs(400)));
        assert!(draws.iter().any(|d| *d > Duration::from_secs(500)));
        let again: Vec<_> = {
            let mut j = Jitter::new(9, 0);
            (0..100).map(|_| j.between(lo, hi)).collect()
        };
        assert_eq!(draws, again);
    }
}
