//! The queue semantics, rule by rule, and the concurrent ones under load: the basic queue
//! (`queue.rs`), priorities (`priority.rs`), delays (`delaying.rs`), rate limits
//! (`rate_limiting.rs`), a model property (`model.rs`) and the metrics (`metrics.rs`).

mod delaying;
mod fair_model;
mod fairness;
#[cfg(feature = "metrics")]
mod metrics;
mod model;
mod priority;
mod queue;
mod rate_limiting;

use std::time::Duration;

use super::*;

fn sleep(ms: u64) -> tokio::time::Sleep {
    tokio::time::sleep(Duration::from_millis(ms))
}

async fn take<T: QueueItem>(q: &Queue<T>) -> WorkItem<T> {
    q.get().await.expect("queue shut down unexpectedly")
}

/// A seeded xorshift generator: the same schedule for the same seed.
fn seeded(seed: u64) -> impl FnMut() -> u64 {
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    }
}

fn exponential() -> QueueConfig<&'static str> {
    QueueConfig::default().rate_limiter(ItemExponentialFailureRateLimiter::new(
        Duration::from_secs(1),
        Duration::from_secs(60),
    ))
}
