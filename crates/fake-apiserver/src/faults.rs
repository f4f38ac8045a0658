//! Fault injection: explicit, counted, and (for random faults) seeded, so a failing test
//! fails the same way every run.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use crate::util::Rng;

/// A request verb, as faults and the request log name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET with `watch=1`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

/// A fault to inject. Each applies to the next matching requests and is used up after.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Fault {
    /// Answer the next `times` requests of `verb` with HTTP `code` and a `Status` body as the
    /// real server words it; a 429 also carries `Retry-After`. For a WATCH, a 410 arrives the
    /// real way: HTTP 200 and an `ERROR` event.
    Status {
        /// Which requests.
        verb: Verb,
        /// 410, 429, 500, 503, ...
        code: u16,
        /// How many requests.
        times: usize,
        /// Seconds for `Retry-After` (and `details.retryAfterSeconds`).
        retry_after_seconds: Option<u32>,
    },
    /// Fail each request of `verb` with probability `probability` (drawn from the server's
    /// seeded generator) with a code picked from `codes`, at most `times` times.
    Random {
        /// Which requests.
        verb: Verb,
        /// 0.0 to 1.0.
        probability: f64,
        /// The codes to pick from.
        codes: Vec<u16>,
        /// The most failures to cause.
        times: usize,
    },
    /// Hold the next `times` requests of `verb` for `delay` before answering.
    Delay {
        /// Which requests.
        verb: Verb,
        /// How long.
        delay: Duration,
        /// How many requests.
        times: usize,
    },
    /// Hold the next `times` requests of `verb` until `gate` opens, then answer them as
    /// usual: a test orders the server's answer after its own writes, where a `Delay` would
    /// only make that ordering likely.
    Hold {
        /// Which requests.
        verb: Verb,
        /// What they wait for.
        gate: Gate,
        /// How many requests.
        times: usize,
    },
    /// Cut the next `times` LIST responses mid-body (the connection breaks after about half
    /// the items).
    CutList {
        /// How many responses.
        times: usize,
    },
    /// The next watch breaks its connection after sending `after_events` events.
    DropWatch {
        /// Events sent before the break.
        after_events: usize,
    },
    /// The next watch goes silent after `after_events` events: the connection stays open,
    /// nothing more is sent (no events, no bookmarks), as over a half-open connection.
    SilentWatch {
        /// Events sent before the silence.
        after_events: usize,
    },
    /// The next watch holds each live event (and bookmark) for `lag` before sending it, one
    /// after another and in order (a burst falls further behind), as a watch behind a slow
    /// link or a busy API server does: a client's cache stays behind its own writes, where
    /// read-your-own-writes bugs show.
    SlowWatch {
        /// How far behind each event arrives.
        lag: Duration,
    },
    /// The next watch sends a line that is not valid JSON after `after_events` events, then
    /// carries on.
    MalformedWatchLine {
        /// Events sent before the bad line.
        after_events: usize,
    },
    /// The next watch sends an event of an unknown type (`"EXPLODED"`) after `after_events`
    /// events, then carries on.
    UnknownWatchEvent {
        /// Events sent before the odd event.
        after_events: usize,
    },
}

/// A gate that held requests wait on ([`Fault::Hold`]); closed until [`Gate::open`], and
/// open for good after. Clones share the gate.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use fake_apiserver::{Fault, FakeApiServer, Gate, ServerConfig, Verb};
///
/// let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
/// let gate = Gate::new();
/// server.inject(Fault::Hold { verb: Verb::Watch, gate: gate.clone(), times: 1 });
/// // ... the next watch waits here while the test writes what it must see ...
/// gate.open();
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(false)))
    }

    /// Opens the gate: what waits goes on, and nothing waits on it again.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    /// Waits until the gate is open.
    pub(crate) async fn opened(&self) {
        let mut open = self.0.subscribe();
        // The sender lives in self, so the wait only ends when the gate opens.
        let _ = open.wait_for(|open| *open).await;
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

/// What a watch stream was told to do wrong.
#[derive(Debug, Clone, Default)]
pub(crate) struct WatchFaults {
    pub(crate) lag: Option<Duration>,
    pub(crate) drop_after: Option<usize>,
    pub(crate) silent_after: Option<usize>,
    pub(crate) malformed_after: Option<usize>,
    pub(crate) unknown_after: Option<usize>,
}

impl WatchFaults {
    pub(crate) fn any(&self) -> bool {
        self.drop_after.is_some()
            || self.silent_after.is_some()
            || self.malformed_after.is_some()
            || self.unknown_after.is_some()
    }
}

struct Pending {
    fault: Fault,
    remaining: usize,
}

pub(crate) struct Faults {
    rng: Rng,
    pending: Vec<Pending>,
    fired: BTreeMap<String, u64>,
}

impl Faults {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            rng: Rng::new(seed.wrapping_add(1)),
            pending: Vec::new(),
            fired: BTreeMap::new(),
        }
    }

    pub(crate) fn inject(&mut self, fault: Fault) {
        let remaining = match &fault {
            Fault::Status { times, .. }
            | Fault::Random { times, .. }
            | Fault::Delay { times, .. }
            | Fault::Hold { times, .. }
            | Fault::CutList { times } => *times,
            _ => 1,
        };
        if remaining > 0 {
            self.pending.push(Pending { fault, remaining });
        }
    }

    /// Drops the faults not yet used up.
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
    }

    /// Counts a fault that happened (also used for restarts and compactions).
    pub(crate) fn record(&mut self, name: impl Into<String>) {
        *self.fired.entry(name.into()).or_default() += 1;
    }

    pub(crate) fn counts(&self) -> BTreeMap<String, u64> {
        self.fired.clone()
    }

    /// Uses up one unit of the first pending fault `pick` fires for. (A random fault draws
    /// from the generator each time it is asked, firing or not.)
    fn take<T>(&mut self, mut pick: impl FnMut(&Fault, &mut Rng) -> Option<T>) -> Option<T> {
        for i in 0..self.pending.len() {
            if let Some(out) = pick(&self.pending[i].fault, &mut self.rng) {
                self.pending[i].remaining -= 1;
                if self.pending[i].remaining == 0 {
                    self.pending.remove(i);
                }
                return Some(out);
            }
        }
        None
    }

    /// An error status to answer this request with, and its Retry-After.
    pub(crate) fn status_for(&mut self, verb: Verb) -> Option<(u16, Option<u32>)> {
        let out = self.take(|f, rng| match f {
            Fault::Status {
                verb: v,
                code,
                retry_after_seconds,
                ..
            } if *v == verb => Some((*code, *retry_after_seconds)),
            Fault::Random {
                verb: v,
                probability,
                codes,
                ..
            } if *v == verb && !codes.is_empty() => {
                let draw = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                (draw < *probability).then(|| {
                    let code = codes[(rng.next_u64() % codes.len() as u64) as usize];
                    (code, (code == 429).then_some(1))
                })
            }
            _ => None,
        });
        if let Some((code, _)) = out {
            self.record(format!("status:{code}"));
        }
        out
    }

    pub(crate) fn delay_for(&mut self, verb: Verb) -> Option<Duration> {
        let out = self.take(|f, _| match f {
            Fault::Delay { verb: v, delay, .. } if *v == verb => Some(*delay),
            _ => None,
        });
        if out.is_some() {
            self.record("delay");
        }
        out
    }

    pub(crate) fn hold_for(&mut self, verb: Verb) -> Option<Gate> {
        let out = self.take(|f, _| match f {
            Fault::Hold { verb: v, gate, .. } if *v == verb => Some(gate.clone()),
            _ => None,
        });
        if out.is_some() {
            self.record("hold");
        }
        out
    }

    pub(crate) fn cut_list(&mut self) -> bool {
        let out = self.take(|f, _| matches!(f, Fault::CutList { .. }).then_some(()));
        if out.is_some() {
            self.record("cut_list");
        }
        out.is_some()
    }

    pub(crate) fn watch_faults(&mut self) -> WatchFaults {
        let mut faults = WatchFaults::default();
        self.pending.retain(|p| {
            if let Fault::SlowWatch { lag } = p.fault {
                if faults.lag.is_some() {
                    return true;
                }
                faults.lag = Some(lag);
                return false;
            }
            let slot = match p.fault {
                Fault::DropWatch { after_events } => (&mut faults.drop_after, after_events),
                Fault::SilentWatch { after_events } => (&mut faults.silent_after, after_events),
                Fault::MalformedWatchLine { after_events } => {
                    (&mut faults.malformed_after, after_events)
                }
                Fault::UnknownWatchEvent { after_events } => {
                    (&mut faults.unknown_after, after_events)
                }
                _ => return true,
            };
            if slot.0.is_some() {
                return true; // one of each kind per watch; the next watch gets the rest
            }
            *slot.0 = Some(slot.1);
            false
        });
        if faults.lag.is_some() {
            self.record("slow_watch");
        }
        faults
    }
}
