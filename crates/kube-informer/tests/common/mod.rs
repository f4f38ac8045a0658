//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub(crate) mod scripted;

use std::time::Duration;

/// Waits until `done` holds, polling every 5 ms; panics naming `what` after 60 s (the bound
/// only guards a hang, it never decides a verdict).
pub(crate) async fn until(what: &str, mut done: impl FnMut() -> bool) {
    // A minute on the test's clock (paused or real), not a count of polls: a hang guard,
    // never a verdict on how fast a loaded machine gets there.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for: {what}");
}
