//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub(crate) mod scripted;

use std::time::Duration;

/// Waits until `done` holds, polling every 5 ms; panics naming `what` after 15 s (the bound
/// only guards a hang, it never decides a verdict).
pub(crate) async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for: {what}");
}
