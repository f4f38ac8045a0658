//! What the certificates need next, decided from what the Secret holds and the time: a pure
//! function of both, so every replica reading the same Secret decides the same, and tests
//! walk it through years in microseconds.
//!
//! A CA is rolled in two steps so that no client ever meets a certificate it does not
//! trust: first a next CA is added to the trusted bundle (and the bundle injected), and
//! only once every webhook configuration has been seen holding it for the overlap does it
//! sign the serving certificate (a configuration reverted, or an injection refused, stops
//! the clock). An old CA stays trusted until it expires, and a CA the configurations
//! already trust stays in a bundle made afresh (the Secret deleted under replicas still
//! serving a certificate it signed).

use std::time::Duration;

use super::pki::{self, Pair};

/// What the Secret holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Stored {
    /// The CA that signs the serving certificate.
    pub(super) ca: Option<Pair>,
    /// The CA that will, once trusted long enough, and since when (Unix seconds).
    pub(super) next_ca: Option<(Pair, i64)>,
    /// Since when every webhook configuration has held the next CA (Unix seconds).
    pub(super) next_injected: Option<i64>,
    pub(super) serving: Option<Pair>,
    /// Every CA clients should trust (PEM): the `caBundle`.
    pub(super) bundle: String,
}

/// What the certificates are: their names and lifetimes.
#[derive(Clone, Debug)]
pub(super) struct CertSpec {
    pub(super) name: String,
    pub(super) names: Vec<String>,
    pub(super) ca_validity: Duration,
    pub(super) serving_validity: Duration,
    pub(super) overlap: Duration,
}

impl CertSpec {
    /// A certificate is renewed once less than a third of its life is left.
    fn renew_within(lasts: Duration) -> i64 {
        secs(lasts) / 3
    }

    /// The overlap, never more than a sixth of the CA's life (so a roll always ends before
    /// the old CA does).
    fn overlap(&self) -> i64 {
        secs(self.overlap).min(secs(self.ca_validity) / 6)
    }
}

/// What the webhook configurations trust, as read from them before a check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) enum Trusted {
    /// Nothing to read: no configuration is named, or none exists yet. The overlap is
    /// timed from the next CA's start alone.
    #[default]
    Unwatched,
    /// The CAs (PEM) each client config's `caBundle` holds.
    Seen(Vec<Vec<String>>),
    /// They could not be read: nothing is promoted.
    Unknown,
}

impl Trusted {
    /// Whether every client config trusts the CA certificate `cert` (PEM).
    pub(super) fn everywhere(&self, cert: &str) -> bool {
        let wanted = normalized(cert);
        match self {
            Self::Unwatched => true,
            Self::Seen(configs) => configs.iter().all(|c| c.contains(&wanted)),
            Self::Unknown => false,
        }
    }

    /// Every CA some client config trusts.
    fn anywhere(&self) -> Vec<String> {
        match self {
            Self::Seen(configs) => configs.iter().flatten().cloned().collect(),
            Self::Unwatched | Self::Unknown => Vec::new(),
        }
    }
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// One change to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// No usable CA: a new CA and serving certificate.
    Fresh,
    /// The CA nears its end: a next CA, trusted from now on.
    StartCaRoll,
    /// Every webhook configuration holds the next CA: the overlap starts.
    CaInjected,
    /// A webhook configuration no longer holds the next CA (reverted): the overlap starts
    /// again once it does.
    CaInjectionLost,
    /// The next CA was trusted long enough: it signs a new serving certificate.
    PromoteCa,
    /// The serving certificate nears its end (or is missing, or for other names).
    NewServing,
    /// The bundle lacks a CA in use, or holds an expired one.
    FixBundle,
}

fn usable(pair: Option<&Pair>, now: i64) -> Option<i64> {
    let pair = pair?;
    if pair.key.is_empty() {
        return None;
    }
    pki::not_after(&pair.cert).filter(|end| *end > now)
}

/// The next change `stored` needs at `now`, the configurations trusting `trusted`, if any.
pub(super) fn step(stored: &Stored, now: i64, spec: &CertSpec, trusted: &Trusted) -> Option<Step> {
    let Some(ca_end) = usable(stored.ca.as_ref(), now) else {
        return Some(Step::Fresh);
    };
    let next = stored
        .next_ca
        .as_ref()
        .filter(|(next, _)| usable(Some(next), now).is_some());
    match (next, stored.next_injected) {
        // The configurations could not be read: nothing is noted, lost or promoted.
        (Some(_), _) if *trusted == Trusted::Unknown => {}
        (Some((next, since)), injected) => {
            let held = trusted.everywhere(&next.cert);
            // Unwatched: timed from the roll's start, as nothing can be read back.
            let from = match trusted {
                Trusted::Unwatched => Some(*since),
                _ => injected,
            };
            match from {
                Some(at) if held && now >= at + spec.overlap() => return Some(Step::PromoteCa),
                None if held && *trusted != Trusted::Unwatched => return Some(Step::CaInjected),
                Some(_) if !held => return Some(Step::CaInjectionLost),
                _ => {}
            }
        }
        (None, _) if ca_end - now < CertSpec::renew_within(spec.ca_validity) => {
            return Some(Step::StartCaRoll);
        }
        _ => {}
    }
    let serving = stored.serving.as_ref();
    match usable(serving, now) {
        None => return Some(Step::NewServing),
        Some(end) => {
            let mut wanted = spec.names.clone();
            let mut has = pki::names(&serving.map(|s| s.cert.clone()).unwrap_or_default());
            wanted.sort();
            has.sort();
            // Renewing only helps when the new one would last longer (a CA near its end
            // caps it): otherwise it would be renewed on every check.
            let lasts = secs(spec.serving_validity);
            let renewed_end = (now + lasts).min(ca_end);
            let ageing = end - now < CertSpec::renew_within(spec.serving_validity);
            if wanted != has || (ageing && renewed_end > end + (lasts / 10).min(60)) {
                return Some(Step::NewServing);
            }
        }
    }
    (normalized(&stored.bundle) != bundle(stored, now)).then_some(Step::FixBundle)
}

fn normalized(bundle: &str) -> String {
    pki::certificates(bundle)
        .into_iter()
        .map(|(pem, _)| pem)
        .collect()
}

/// The bundle `stored` should trust at `now`: its unexpired CAs, then the CA and the next
/// CA if missing.
fn bundle(stored: &Stored, now: i64) -> String {
    let mut trusted: Vec<String> = pki::certificates(&stored.bundle)
        .into_iter()
        .filter(|(_, end)| *end > now)
        .map(|(pem, _)| pem)
        .collect();
    let in_use = [stored.ca.as_ref(), stored.next_ca.as_ref().map(|(n, _)| n)];
    for ca in in_use.into_iter().flatten() {
        for (pem, _) in pki::certificates(&ca.cert) {
            if !trusted.contains(&pem) {
                trusted.push(pem);
            }
        }
    }
    trusted.concat()
}

/// `stored` with `step` made at `now` (the configurations trusting `trusted`).
pub(super) fn apply(
    stored: &Stored,
    step: Step,
    now: i64,
    spec: &CertSpec,
    trusted: &Trusted,
) -> Result<Stored, rcgen::Error> {
    let mut next = stored.clone();
    let serving = |ca: &Pair| pki::new_serving(ca, &spec.names, now, spec.serving_validity);
    match step {
        Step::Fresh => {
            let ca = pki::new_ca(&spec.name, now, spec.ca_validity)?;
            next.serving = Some(serving(&ca)?);
            next.ca = Some(ca);
            next.next_ca = None;
            next.next_injected = None;
            // What the configurations trust stays trusted (until it expires): replicas still
            // serve certificates it signed until they read the new Secret.
            next.bundle.push_str(&trusted.anywhere().concat());
        }
        Step::StartCaRoll => {
            let ca = pki::new_ca(&spec.name, now, spec.ca_validity)?;
            next.next_ca = Some((ca, now));
            next.next_injected = None;
        }
        Step::CaInjected => next.next_injected = Some(now),
        Step::CaInjectionLost => next.next_injected = None,
        Step::PromoteCa => {
            if let Some((ca, _)) = next.next_ca.take() {
                next.serving = Some(serving(&ca)?);
                next.ca = Some(ca);
            }
            next.next_injected = None;
        }
        Step::NewServing => {
            if let Some(ca) = &next.ca {
                next.serving = Some(serving(ca)?);
            }
        }
        Step::FixBundle => {}
    }
    next.bundle = bundle(&next, now);
    Ok(next)
}

/// Every change `stored` needs at `now` (the configurations trusting `trusted`), made;
/// `None` when it needs none.
pub(super) fn settle(
    stored: &Stored,
    now: i64,
    spec: &CertSpec,
    trusted: &Trusted,
) -> Result<Option<(Stored, Vec<Step>)>, rcgen::Error> {
    let (mut state, mut steps) = (stored.clone(), Vec::new());
    // Each step leaves fewer to make: Fresh leaves at most a bundle fix, a promotion a new
    // bundle. Five is more than any sequence needs.
    while let Some(step) = self::step(&state, now, spec, trusted) {
        if steps.len() == 5 {
            break;
        }
        state = apply(&state, step, now, spec, trusted)?;
        steps.push(step);
    }
    Ok((!steps.is_empty()).then_some((state, steps)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    fn spec() -> CertSpec {
        CertSpec {
            name: "widgets".into(),
            names: vec!["webhook.system.svc".into()],
            ca_validity: Duration::from_secs(300 * DAY),
            serving_validity: Duration::from_secs(30 * DAY),
            overlap: Duration::from_secs(DAY),
        }
    }

    fn at(day: u64) -> i64 {
        1_800_000_000 + i64::try_from(day * DAY).unwrap()
    }

    fn settled(stored: &Stored, now: i64, trusted: &Trusted) -> (Stored, Vec<Step>) {
        settle(stored, now, &spec(), trusted)
            .unwrap()
            .unwrap_or_else(|| (stored.clone(), Vec::new()))
    }

    /// One webhook configuration holding `bundle` (as injected).
    fn holding(bundle: &str) -> Trusted {
        let cas = pki::certificates(bundle).into_iter().map(|(pem, _)| pem);
        Trusted::Seen(vec![cas.collect()])
    }

    /// Walks 700 days a day at a time, each check finding the configuration as the last
    /// one injected it: the serving certificate is always trusted by the bundle as it was
    /// one overlap earlier, never expired, and a CA signs only after being in the bundle
    /// for the overlap.
    #[test]
    fn over_two_years_every_served_certificate_was_trusted_an_overlap_before() {
        let (mut stored, steps) = settled(&Stored::default(), at(0), &Trusted::Unwatched);
        assert_eq!(steps, [Step::Fresh]);
        let mut history: Vec<(i64, Stored)> = vec![(at(0), stored.clone())];
        let mut rolls = 0;
        for day in 1..700 {
            let now = at(day);
            let (next, steps) = settled(&stored, now, &holding(&stored.bundle));
            rolls += steps.iter().filter(|s| **s == Step::PromoteCa).count();
            stored = next;
            let serving = stored.serving.as_ref().unwrap();
            assert!(
                pki::not_after(&serving.cert).unwrap() > now,
                "day {day}: expired"
            );
            let ca = stored.ca.as_ref().unwrap();
            // The signing CA was in the bundle one overlap ago (or since the start).
            let ago = now - spec().overlap();
            let then = history
                .iter()
                .rev()
                .find(|(t, _)| *t <= ago)
                .map_or(&history[0].1, |(_, s)| s);
            let first_ca = &history[0].1.ca;
            assert!(
                normalized(&then.bundle).contains(&normalized(&ca.cert))
                    || Some(ca) == first_ca.as_ref(),
                "day {day}: the CA signing now was not trusted an overlap ago"
            );
            assert!(normalized(&stored.bundle).contains(&normalized(&ca.cert)));
            history.push((now, stored.clone()));
        }
        assert!(rolls >= 2, "the CA was rolled {rolls} times");
        assert!(
            step(&stored, at(699), &spec(), &holding(&stored.bundle)).is_none(),
            "settled stays settled"
        );
    }

    #[test]
    fn garbage_or_an_expired_ca_starts_afresh_and_other_names_get_a_new_certificate() {
        let garbage = Stored {
            ca: Some(Pair {
                cert: "junk".into(),
                key: "junk".into(),
            }),
            ..Stored::default()
        };
        let none = Trusted::Unwatched;
        assert_eq!(step(&garbage, at(0), &spec(), &none), Some(Step::Fresh));
        let (fresh, _) = settled(&Stored::default(), at(0), &none);
        assert_eq!(step(&fresh, at(301), &spec(), &none), Some(Step::Fresh));
        let mut renamed = spec();
        renamed.names = vec!["other.system.svc".into()];
        assert_eq!(step(&fresh, at(1), &renamed, &none), Some(Step::NewServing));
        let mut stripped = fresh.clone();
        stripped.bundle.clear();
        assert_eq!(
            step(&stripped, at(1), &spec(), &none),
            Some(Step::FixBundle)
        );
    }

    /// A roll whose bundle never reaches the configuration (injection refused, or reverted
    /// by another writer): the next CA never signs, so the certificate served is always
    /// signed by a CA the configuration trusts; once injected, it signs an overlap later.
    #[test]
    fn a_next_ca_the_configuration_does_not_hold_is_never_promoted() {
        let (mut stored, _) = settled(&Stored::default(), at(0), &Trusted::Unwatched);
        let old_bundle = stored.bundle.clone();
        let first_ca = stored.ca.clone();
        // Injection refused from day 1 on: the configuration keeps the first bundle.
        for day in 1..290 {
            let (next, steps) = settled(&stored, at(day), &holding(&old_bundle));
            assert!(
                !steps.contains(&Step::PromoteCa),
                "day {day}: promoted {steps:?}"
            );
            stored = next;
            assert_eq!(stored.ca, first_ca, "day {day}: the signer changed");
        }
        assert!(stored.next_ca.is_some(), "the roll started (day 200)");
        assert_eq!(stored.next_injected, None);
        // Unreadable configurations promote nothing either.
        let (_, steps) = settled(&stored, at(290), &Trusted::Unknown);
        assert!(!steps.contains(&Step::PromoteCa));
        // Injected at last: noted, then promoted an overlap later, not before.
        let (injected, steps) = settled(&stored, at(290), &holding(&stored.bundle));
        assert_eq!(steps, [Step::CaInjected]);
        let half = at(290) + spec().overlap() / 2;
        let (waiting, steps) = settled(&injected, half, &holding(&stored.bundle));
        assert!(steps.is_empty(), "{steps:?}");
        // A failed read changes nothing: neither lost nor promoted.
        let (_, steps) = settled(&injected, at(292), &Trusted::Unknown);
        assert!(steps.is_empty(), "{steps:?}");
        // Reverted before the overlap passed: the clock starts again.
        let (lost, steps) = settled(&waiting, half + 1, &holding(&old_bundle));
        assert_eq!(steps, [Step::CaInjectionLost]);
        let (again, _) = settled(&lost, at(291), &holding(&stored.bundle));
        assert_eq!(again.next_injected, Some(at(291)));
        let (promoted, steps) = settled(&again, at(292), &holding(&stored.bundle));
        assert!(steps.contains(&Step::PromoteCa), "{steps:?}");
        assert_ne!(promoted.ca, first_ca);
    }

    /// The Secret deleted while replicas serve certificates of the first CA: the bundle made
    /// afresh keeps trusting the CA the configuration holds.
    #[test]
    fn a_fresh_start_keeps_trusting_what_the_configuration_trusts() {
        let (first, _) = settled(&Stored::default(), at(0), &Trusted::Unwatched);
        let (fresh, steps) = settled(&Stored::default(), at(1), &holding(&first.bundle));
        assert_eq!(steps, [Step::Fresh]);
        let bundle = normalized(&fresh.bundle);
        assert!(
            bundle.contains(&normalized(&first.ca.unwrap().cert)),
            "the first CA is dropped"
        );
        assert!(bundle.contains(&normalized(&fresh.ca.clone().unwrap().cert)));
        assert!(
            step(&fresh, at(2), &spec(), &holding(&fresh.bundle)).is_none(),
            "stable"
        );
    }
}
