//! The bookkeeping behind event aggregation, free of I/O: which events are repeats of one
//! another (a series), and how many events each object may produce (the spam filter).
//!
//! - **Series** (client-go `tools/events`): events with the same type, reason, action,
//!   reporting controller and instance, regarding and related object are one series. The
//!   first is created; the second turns it into a series (`count: 2`) with one write; later
//!   repeats only count, and the count is written when the series is refreshed (every 30
//!   minutes) or finishes (6 minutes without a repeat). So a hot loop of identical events
//!   costs a few writes, not one each.
//! - **Spam filter** (client-go `tools/record`'s `EventSourceObjectSpamFilter`): each
//!   regarding object gets a token bucket of 25 events, refilled one per 5 minutes; events
//!   beyond it are dropped (and counted).

use std::{collections::HashMap, time::Duration};

use k8s_openapi::api::{core::v1::ObjectReference, events::v1::Event};
use tokio::time::Instant;

/// A series ends after this long without a repeat (client-go's `finishTime`).
pub(crate) const FINISH: Duration = Duration::from_secs(6 * 60);
/// A series' count is written at least this often (client-go's `refreshTime`).
pub(crate) const REFRESH: Duration = Duration::from_secs(30 * 60);
/// Events per object before the spam filter drops them (client-go's burst).
pub(crate) const SPAM_BURST: f64 = 25.0;
/// One more event allowed per object every this long (client-go's qps 1/300).
pub(crate) const SPAM_REFILL: Duration = Duration::from_secs(300);

/// What makes two events repeats of one another.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SeriesKey {
    type_: String,
    reason: String,
    action: String,
    controller: String,
    instance: String,
    regarding: String,
    related: String,
}

fn reference(r: Option<&ObjectReference>) -> String {
    r.map(|r| {
        format!(
            "{}/{}/{}/{}/{}",
            r.api_version.as_deref().unwrap_or(""),
            r.kind.as_deref().unwrap_or(""),
            r.namespace.as_deref().unwrap_or(""),
            r.name.as_deref().unwrap_or(""),
            r.uid.as_deref().unwrap_or(""),
        )
    })
    .unwrap_or_default()
}

impl SeriesKey {
    pub(crate) fn of(event: &Event) -> Self {
        let s = |v: &Option<String>| v.clone().unwrap_or_default();
        Self {
            type_: s(&event.type_),
            reason: s(&event.reason),
            action: s(&event.action),
            controller: s(&event.reporting_controller),
            instance: s(&event.reporting_instance),
            regarding: reference(event.regarding.as_ref()),
            related: reference(event.related.as_ref()),
        }
    }

    /// The spam filter's key: the reporter and the regarding object.
    fn source_object(&self) -> String {
        format!("{}/{}/{}", self.controller, self.instance, self.regarding)
    }
}

/// One series: the event as created, how many times it happened, and when last.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub(crate) event: Event,
    pub(crate) count: i32,
    pub(crate) last_observed: Instant,
    /// The count last written (0: the event itself not written yet).
    pub(crate) written: i32,
    pub(crate) last_written: Instant,
}

/// What to do with an observed event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Observed {
    /// A new event: create it.
    Create,
    /// The first repeat: write the series (`count: 2`).
    StartSeries,
    /// A later repeat: counted, written later.
    Counted,
    /// Over the object's rate: dropped.
    Spam,
}

/// Token buckets per object, and the series.
#[derive(Debug, Default)]
pub(crate) struct Aggregator {
    pub(crate) series: HashMap<SeriesKey, Series>,
    buckets: HashMap<String, (f64, Instant)>,
    pub(crate) dropped: u64,
}

impl Aggregator {
    /// Takes a token of the event's object; false if it has none left.
    fn allow(&mut self, key: &SeriesKey, now: Instant) -> bool {
        let (tokens, at) = self
            .buckets
            .entry(key.source_object())
            .or_insert((SPAM_BURST, now));
        let refill = now.saturating_duration_since(*at).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        *tokens = (*tokens + refill).min(SPAM_BURST);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Records an event observed now.
    pub(crate) fn observe(&mut self, event: Event, now: Instant) -> (SeriesKey, Observed) {
        let key = SeriesKey::of(&event);
        if let Some(series) = self.series.get_mut(&key) {
            series.count += 1;
            series.last_observed = now;
            let observed = if series.count == 2 {
                Observed::StartSeries
            } else {
                Observed::Counted
            };
            return (key, observed);
        }
        if !self.allow(&key, now) {
            self.dropped += 1;
            return (key, Observed::Spam);
        }
        let series = Series {
            event,
            count: 1,
            last_observed: now,
            written: 0,
            last_written: now,
        };
        self.series.insert(key.clone(), series);
        (key, Observed::Create)
    }

    /// Series whose count must be written now: ended ones with an unwritten count, and
    /// live ones not written for the refresh period. Ended series are forgotten.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<(SeriesKey, Series)> {
        let mut due = Vec::new();
        self.series.retain(|key, s| {
            let ended = now.saturating_duration_since(s.last_observed) >= FINISH;
            let stale = now.saturating_duration_since(s.last_written) >= REFRESH;
            let unwritten = if ended { s.count != s.written } else { stale };
            if s.count > 1 && unwritten {
                due.push((key.clone(), s.clone()));
            }
            !ended
        });
        self.buckets.retain(|_, (tokens, at)| {
            *tokens < SPAM_BURST || now.saturating_duration_since(*at) < SPAM_REFILL
        });
        due
    }

    /// A series' count was written.
    pub(crate) fn written(&mut self, key: &SeriesKey, count: i32, now: Instant) {
        if let Some(s) = self.series.get_mut(key) {
            s.written = s.written.max(count);
            s.last_written = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str, object: &str) -> Event {
        Event {
            reason: Some(reason.into()),
            type_: Some("Normal".into()),
            regarding: Some(ObjectReference {
                name: Some(object.into()),
                ..ObjectReference::default()
            }),
            ..Event::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn repeats_form_a_series_written_at_its_start_and_end() {
        let mut agg = Aggregator::default();
        let now = Instant::now();
        assert_eq!(agg.observe(event("Synced", "a"), now).1, Observed::Create);
        assert_eq!(
            agg.observe(event("Synced", "a"), now).1,
            Observed::StartSeries
        );
        for _ in 0..50 {
            assert_eq!(agg.observe(event("Synced", "a"), now).1, Observed::Counted);
        }
        assert_eq!(
            agg.observe(event("Failed", "a"), now).1,
            Observed::Create,
            "another reason"
        );
        assert!(agg.due(now + Duration::from_secs(60)).is_empty());
        let due = agg.due(now + FINISH);
        assert_eq!(due.len(), 1, "the ended series has an unwritten count");
        assert_eq!(due[0].1.count, 52);
        assert!(agg.series.is_empty(), "ended series are forgotten");
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_gets_25_events_then_one_per_five_minutes() {
        let mut agg = Aggregator::default();
        let now = Instant::now();
        let created = (0..40)
            .filter(|i| agg.observe(event(&format!("r{i}"), "a"), now).1 == Observed::Create)
            .count();
        assert_eq!(created, 25);
        assert_eq!(agg.dropped, 15);
        assert_eq!(
            agg.observe(event("other", "b"), now).1,
            Observed::Create,
            "per object"
        );
        let later = now + SPAM_REFILL;
        assert_eq!(agg.observe(event("r-late", "a"), later).1, Observed::Create);
        assert_eq!(agg.observe(event("r-later", "a"), later).1, Observed::Spam);
    }
}
