//! The reflector against sources that misbehave in the ways that used to leave it silently
//! stuck: requests never answered, watches that close at once, unusable resourceVersions,
//! streaming lists refused for the wrong reasons, identical jitter across reflectors. Paused
//! clocks: verdicts come from request counts and what was reported, never from timing.

use std::{sync::Arc, time::Duration};

use super::common::scripted::{Call, ListReply, Scripted, WatchReply, api_error, bookmark, cm};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::WatchEvent;
use kube_informer::{
    Store,
    fifo::{DeltaQueue, ProcessError, RealFifo},
    informer::apply_deltas,
    reflector::{Reflector, ReflectorError, ReflectorOptions},
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// Runs a reflector on `source` into a store for `secs` of paused time; returns the store,
/// the source's calls and the reported errors.
async fn run_for(
    source: Scripted,
    options: ReflectorOptions,
    secs: u64,
) -> (Store<ConfigMap>, Vec<Call>, Vec<String>) {
    let calls = source.calls.clone();
    let store = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store.clone())));
    let reflector = Reflector::new(source, fifo.clone(), options);
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    reflector.set_error_handler(move |e: &ReflectorError| seen.lock().push(e.to_string()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    let apply = tokio::spawn({
        let (store, fifo) = (store.clone(), fifo.clone());
        async move {
            while fifo
                .pop(|deltas, initial| {
                    apply_deltas(&store, deltas, initial);
                    Ok::<(), ProcessError<std::convert::Infallible>>(())
                })
                .await
                .is_ok()
            {}
        }
    });
    tokio::time::sleep(Duration::from_secs(secs)).await;
    cancel.cancel();
    run.await.unwrap();
    fifo.close();
    apply.await.unwrap();
    let calls = calls.lock().clone();
    let errors = errors.lock().clone();
    (store, calls, errors)
}

/// The resourceVersion each WATCH was opened at, in order.
fn watch_versions(calls: &[Call]) -> Vec<&str> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Watch {
                resource_version, ..
            } => Some(resource_version.as_str()),
            Call::List { .. } => None,
        })
        .collect()
}

fn lists() -> ReflectorOptions {
    ReflectorOptions::default().streaming_lists(false).seed(7)
}

#[tokio::test(start_paused = true)]
async fn a_list_that_is_never_answered_times_out_and_is_retried() {
    let source = Scripted::new(
        |n| match n {
            0 => ListReply::Hang,
            _ => ListReply::Items(vec![cm("a", "5")], "5"),
        },
        |_, _| WatchReply::Stay(vec![]),
    );
    let (store, calls, errors) =
        run_for(source, lists().list_timeout(Duration::from_secs(60)), 300).await;
    let lists: Vec<_> = calls.iter().filter(|c| !c.is_watch()).collect();
    assert_eq!(lists.len(), 2, "the hung LIST was retried once: {calls:?}");
    assert!(lists[1].at() - lists[0].at() >= Duration::from_secs(60));
    assert!(
        errors[0].contains("LIST of ConfigMap got no answer within 60s"),
        "{errors:?}"
    );
    assert_eq!(store.len(), 1, "synced after the retry");
}

#[tokio::test(start_paused = true)]
async fn a_watch_whose_headers_never_come_times_out_and_is_retried() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "5")], "5"),
        |n, _| match n {
            0 => WatchReply::Hang,
            _ => WatchReply::Stay(vec![WatchEvent::Added(cm("b", "6"))]),
        },
    );
    let options = lists()
        .watch_open_timeout(Duration::from_secs(20))
        .idle_timeout(Duration::from_secs(3600));
    let (store, calls, errors) = run_for(source, options, 300).await;
    let watches: Vec<_> = calls.iter().filter(|c| c.is_watch()).collect();
    assert_eq!(watches.len(), 2, "{calls:?}");
    assert!(
        errors[0].contains("WATCH of ConfigMap got no answer within 20s"),
        "{errors:?}"
    );
    assert_eq!(store.len(), 2, "the retried watch delivered its event");
}

/// A server that closes every watch right after one event used to get ~1,400 reconnects a
/// second; now each early end counts toward the backoff.
#[tokio::test(start_paused = true)]
async fn watches_that_end_after_one_event_are_reconnected_on_the_backoff() {
    let version = Arc::new(Mutex::new(10u64));
    let v = version.clone();
    let source = Scripted::new(
        |_| ListReply::Items(vec![], "10"),
        move |n, _| {
            if n > 500 {
                return WatchReply::Hang; // bounds a hot loop, so a regression fails, not hangs
            }
            let mut v = v.lock();
            *v += 1;
            WatchReply::Close(vec![WatchEvent::Added(cm(
                &format!("o{n}"),
                &v.to_string(),
            ))])
        },
    );
    let (store, calls, errors) = run_for(source, lists(), 120).await;
    let watches = calls.iter().filter(|c| c.is_watch()).count();
    // 800 ms doubling to 30 s, jittered: a handful a minute, not thousands.
    assert!((4..=20).contains(&watches), "{watches} watches in 120 s");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("with 1 events; backing off")),
        "{errors:?}"
    );
    assert_eq!(store.len(), watches, "every event delivered");
}

#[tokio::test(start_paused = true)]
async fn a_bookmark_without_a_version_is_reported_and_never_resumed_from() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "5")], "5"),
        |n, _| match n {
            0 => WatchReply::Close(vec![bookmark("", false)]),
            _ => WatchReply::Stay(vec![]),
        },
    );
    let (_, calls, errors) = run_for(source, lists(), 60).await;
    let resumed = watch_versions(&calls);
    assert_eq!(
        resumed,
        ["5", "5"],
        "resumed from the list's version, never \"\""
    );
    assert!(
        errors[0].contains("unusable resourceVersion \"\" of a bookmark"),
        "{errors:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_list_without_a_version_is_retried_not_watched_from_now() {
    let source = Scripted::new(
        |n| match n {
            0 => ListReply::Items(vec![cm("a", "5")], ""),
            _ => ListReply::Items(vec![cm("a", "5")], "5"),
        },
        |_, _| WatchReply::Stay(vec![]),
    );
    let (_, calls, errors) = run_for(source, lists(), 60).await;
    let watch_versions = watch_versions(&calls);
    assert_eq!(watch_versions, ["5"], "{calls:?}");
    assert!(errors[0].contains("of a LIST"), "{errors:?}");
}

/// KEP-5504: versions are numbers of up to 128 bits. One past `u64` is resumed from (a
/// `u64` parse refused it, and the reflector relisted forever); one with a leading zero is
/// not comparable, so it is reported and the list retried, never watched from.
#[tokio::test(start_paused = true)]
async fn a_version_past_64_bits_is_resumed_from_and_one_with_a_leading_zero_is_not() {
    const HUGE: &str = "340282366920938463463374607431768211455"; // u128::MAX
    let source = Scripted::new(
        |n| match n {
            0 => ListReply::Items(vec![cm("a", "05")], "05"),
            _ => ListReply::Items(vec![cm("a", HUGE)], HUGE),
        },
        |_, _| WatchReply::Stay(vec![]),
    );
    let (store, calls, errors) = run_for(source, lists(), 60).await;
    let watch_versions = watch_versions(&calls);
    assert_eq!(watch_versions, [HUGE], "{calls:?}");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("unusable resourceVersion \"05\" of a LIST"),
        "{errors:?}"
    );
    assert_eq!(store.resource_version(), HUGE);
}

/// An aggregated API server's opaque resourceVersions: refused by default (resuming from a
/// version the reflector cannot compare would risk a watch "from now"), resumed from when
/// the options accept them.
#[tokio::test(start_paused = true)]
async fn opaque_versions_are_resumed_from_only_when_accepted() {
    let source = || {
        Scripted::new(
            |_| ListReply::Items(vec![cm("a", "x7f")], "x7f"),
            |_, _| WatchReply::Stay(vec![]),
        )
    };
    let (_, calls, errors) = run_for(source(), lists(), 60).await;
    assert!(watch_versions(&calls).is_empty(), "{calls:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("unusable resourceVersion \"x7f\"")),
        "{errors:?}"
    );
    let accepting = lists().opaque_resource_versions(true);
    let (store, calls, errors) = run_for(source(), accepting, 60).await;
    assert_eq!(watch_versions(&calls), ["x7f"], "{calls:?}");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(store.len(), 1);
}

/// A 403 while RBAC propagates is a permission problem: reported as such, retried, and the
/// next sync is a streaming list again.
#[tokio::test(start_paused = true)]
async fn a_forbidden_streaming_list_is_reported_as_forbidden_and_streaming_is_kept() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![], "1"),
        |n, _| match n {
            0 => WatchReply::Fail(api_error(403, "Forbidden", "configmaps is forbidden")),
            _ => WatchReply::Stay(vec![WatchEvent::Added(cm("a", "7")), bookmark("7", true)]),
        },
    );
    let (store, calls, errors) = run_for(source, ReflectorOptions::default().seed(1), 60).await;
    assert!(calls.iter().all(Call::is_watch), "no LIST: {calls:?}");
    assert!(errors[0].contains("Forbidden"), "{errors:?}");
    assert!(
        !errors.iter().any(|e| e.contains("not supported")),
        "{errors:?}"
    );
    assert_eq!(store.len(), 1);
}

/// A server without the feature (422 on `sendInitialEvents`) gets a LIST for this sync, and
/// a streaming list again once the retry period has passed.
#[tokio::test(start_paused = true)]
async fn a_refused_streaming_list_falls_back_to_a_list_and_is_tried_again_later() {
    let source = Scripted::new(
        |_| ListReply::Items(vec![cm("a", "5")], "5"),
        |_, params| match params.send_initial_events {
            true => WatchReply::Fail(api_error(422, "Invalid", "sendInitialEvents: Forbidden")),
            // Plain watches: a 410 now and then forces a relist.
            false => WatchReply::Close(vec![WatchEvent::Error(
                kube::core::Status::failure("too old resource version", "Expired")
                    .with_code(410)
                    .boxed(),
            )]),
        },
    );
    let options = ReflectorOptions::default()
        .seed(3)
        .streaming_retry(Duration::from_secs(300));
    let (_, calls, errors) = run_for(source, options, 900).await;
    let streaming: Vec<_> = calls
        .iter()
        .filter(|c| {
            matches!(
                c,
                Call::Watch {
                    initial_events: true,
                    ..
                }
            )
        })
        .collect();
    // At 0 s, then once per 300 s retry period: not at every relist.
    assert!((2..=4).contains(&streaming.len()), "{calls:?}");
    assert!(calls.iter().any(|c| !c.is_watch()), "fell back to LIST");
    assert!(
        errors.iter().any(|e| e.contains("not supported")),
        "{errors:?}"
    );
}

/// Each reflector draws its own jitter unless given a seed: a fleet restarted together
/// does not reconnect together.
#[tokio::test(start_paused = true)]
async fn reflectors_without_a_seed_draw_different_watch_timeouts() {
    let timeouts = || async {
        let source = Scripted::new(
            |_| ListReply::Items(vec![], "5"),
            |_, _| WatchReply::Close(vec![]),
        );
        let options = ReflectorOptions::default().streaming_lists(false);
        let (_, calls, _) = run_for(source, options, 120).await;
        calls
            .iter()
            .filter_map(|c| match c {
                Call::Watch { timeout, .. } => *timeout,
                Call::List { .. } => None,
            })
            .take(4)
            .collect::<Vec<u32>>()
    };
    let (a, b) = (timeouts().await, timeouts().await);
    assert_eq!(a.len(), 4);
    assert_ne!(a, b, "two reflectors drew the same timeouts");
    let seeded = || async {
        let source = Scripted::new(
            |_| ListReply::Items(vec![], "5"),
            |_, _| WatchReply::Close(vec![]),
        );
        let (_, calls, _) = run_for(source, lists(), 120).await;
        calls.iter().filter(|c| c.is_watch()).count()
    };
    assert_eq!(
        seeded().await,
        seeded().await,
        "a seed gives a repeatable schedule"
    );
}

/// The health signal counts failures in a row and forgets them on success.
#[tokio::test(start_paused = true)]
async fn health_counts_failures_and_resets_on_success() {
    let source = Scripted::new(
        |n| match n {
            0..=2 => ListReply::Fail(api_error(500, "InternalError", "etcd down")),
            _ => ListReply::Items(vec![cm("a", "5")], "5"),
        },
        |_, _| WatchReply::Stay(vec![]),
    );
    let store = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store)));
    let reflector = Arc::new(Reflector::new(source, fifo, lists()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (reflector, cancel) = (reflector.clone(), cancel.clone());
        async move { reflector.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let failing = reflector.health();
    assert_eq!(failing.consecutive_failures, 1);
    assert!(failing.last_error.as_ref().unwrap().1.contains("etcd down"));
    assert!(!failing.has_synced_once());
    tokio::time::sleep(Duration::from_secs(120)).await;
    let healthy = reflector.health();
    assert_eq!(healthy.consecutive_failures, 0);
    assert!(healthy.has_synced_once() && healthy.watching);
    cancel.cancel();
    run.await.unwrap();
}
