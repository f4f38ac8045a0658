//! The versions heard and the lag they give, on a paused clock: events count from their
//! arrival until applied, a probe from when it went out, a failure until a LIST, bookmark
//! or probe answers; a long backlog is merged without hiding its age.

use std::{sync::Arc, time::Duration};

use parking_lot::Mutex;

use super::{Heard, Lag};

/// A `Heard` whose cache is at the version the test sets.
fn heard() -> (Heard, Arc<Mutex<String>>) {
    let applied = Arc::new(Mutex::new(String::new()));
    let heard = Heard::default();
    let cache = applied.clone();
    heard.set_applied(Box::new(move || cache.lock().clone()), true);
    (heard, applied)
}

async fn pass(secs: u64) {
    tokio::time::sleep(Duration::from_secs(secs)).await;
}

fn lag(behind: u64, versions: u128) -> Lag {
    Lag {
        behind: Duration::from_secs(behind),
        versions: Some(versions),
    }
}

#[tokio::test(start_paused = true)]
async fn events_count_from_their_arrival_until_the_cache_applies_them() {
    let (heard, applied) = heard();
    assert_eq!(heard.lag(), lag(0, 0), "nothing heard: level");
    *applied.lock() = "10".into();
    heard.heard("10", true);
    assert_eq!(heard.lag(), lag(0, 0));
    heard.heard("11", false);
    pass(3).await;
    heard.heard("15", false);
    pass(4).await;
    assert_eq!(
        heard.lag(),
        lag(7, 5),
        "the oldest unapplied event arrived 7 s ago"
    );
    *applied.lock() = "11".into();
    assert_eq!(heard.lag(), lag(4, 4), "then the next one");
    *applied.lock() = "15".into();
    assert_eq!(heard.lag(), lag(0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_probe_counts_from_when_it_went_out_and_a_failure_until_the_server_answers() {
    let (heard, applied) = heard();
    *applied.lock() = "10".into();
    heard.heard("10", true);
    heard.lost_track(); // a probe goes out
    pass(2).await;
    assert_eq!(
        heard.lag(),
        lag(2, 0),
        "unanswered: the server's version is unknown"
    );
    heard.heard("20", true); // it answers: the server is at 20, the watch is not
    pass(5).await;
    assert_eq!(heard.lag(), lag(7, 10));
    *applied.lock() = "20".into();
    assert_eq!(heard.lag(), lag(0, 0), "the watch got there");

    heard.lost_track(); // a watch failed
    pass(3).await;
    heard.heard("21", false);
    *applied.lock() = "21".into();
    assert_eq!(
        heard.lag(),
        lag(3, 0),
        "an event does not say where the server is"
    );
    heard.lost_track(); // a second failure keeps the first one's moment
    heard.heard("21", true); // a bookmark does
    assert_eq!(heard.lag(), lag(0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_long_backlog_is_kept_in_bounded_memory_without_hiding_its_age() {
    let (heard, applied) = heard();
    *applied.lock() = "1".into();
    for rv in 2..2_000u32 {
        heard.heard(&rv.to_string(), false);
        if rv == 2 {
            pass(10).await;
        }
    }
    assert!(heard.state.lock().pending.len() <= super::KEPT);
    assert_eq!(
        heard.lag(),
        lag(10, 1_998),
        "as old as the first event waiting"
    );
    *applied.lock() = "1999".into();
    assert_eq!(heard.lag(), lag(0, 0));
    // Applied as they come: room is made by forgetting what the cache has, nothing merged.
    for rv in 2_000..4_000u32 {
        heard.heard(&rv.to_string(), false);
        *applied.lock() = rv.to_string();
    }
    assert!(heard.state.lock().pending.len() <= super::KEPT);
    assert_eq!(heard.lag(), lag(0, 0));
}

#[tokio::test(start_paused = true)]
async fn versions_that_are_not_comparable_say_so() {
    let (heard, applied) = heard();
    heard.heard("opaque", true);
    assert_eq!(heard.lag(), lag(0, 0), "nothing comparable heard");
    heard.heard("5", true);
    assert_eq!(
        heard.lag().versions,
        None,
        "the cache has no comparable version"
    );
    *applied.lock() = "5".into();
    assert_eq!(heard.lag(), lag(0, 0));
}

#[tokio::test(start_paused = true)]
async fn an_opaque_answer_or_a_watch_that_opens_ends_the_silence() {
    let (heard, applied) = heard();
    *applied.lock() = "10".into();
    heard.lost_track();
    pass(4).await;
    heard.heard("opaque", true); // a server with opaque versions answered
    assert_eq!(heard.lag().behind, Duration::ZERO);
    heard.lost_track(); // an idle watch, say
    pass(4).await;
    assert_eq!(heard.lag().behind, Duration::from_secs(4));
    heard.reached_server(); // its next watch opened
    assert_eq!(heard.lag(), lag(0, 0));
}

#[tokio::test(start_paused = true)]
async fn events_are_not_counted_where_they_do_not_move_the_cache_version() {
    let heard = Heard::default();
    let cache = Arc::new(Mutex::new("10".to_owned()));
    let at = cache.clone();
    heard.set_applied(Box::new(move || at.lock().clone()), false); // a DeltaFifo
    heard.heard("11", false);
    pass(30).await;
    assert_eq!(
        heard.lag().behind,
        Duration::ZERO,
        "only a bookmark would show it"
    );
    heard.heard("12", true);
    pass(1).await;
    assert_eq!(heard.lag().behind, Duration::from_secs(1));
    *cache.lock() = "12".into(); // the bookmark applied
    assert_eq!(heard.lag().behind, Duration::ZERO);
}
