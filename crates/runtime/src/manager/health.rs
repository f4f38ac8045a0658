//! What `/healthz` and `/readyz` answer: named checks, each passing or failing with a
//! reason, in controller-runtime's text format (`[+]name ok` / `[-]name failed: why`).
//!
//! | probe | fails when |
//! |---|---|
//! | `/healthz` (`/livez`) | a task of the manager died; the elector is starved past its renew deadline while leading; a user's check fails |
//! | `/readyz` | shutting down; an informer has not synced, or failed `max_watch_failures` lists/watches in a row; a user's check fails |

use std::{collections::BTreeMap, sync::Arc};

use kube_informer::factory::SharedInformerFactory;
use parking_lot::Mutex;

use crate::leader_election::LeaderElector;

/// One check's verdict.
pub(crate) type Verdict = Result<(), String>;

/// The state the probes read, shared by the manager's tasks.
#[derive(Clone, Default)]
pub(crate) struct HealthState {
    inner: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Runnable name → why it stopped, if it stopped unexpectedly.
    failed: BTreeMap<String, String>,
    /// Runnable name → whether it is running now.
    running: BTreeMap<String, bool>,
    shutting_down: bool,
}

impl HealthState {
    pub(crate) fn running(&self, name: &str, running: bool) {
        self.inner.lock().running.insert(name.to_owned(), running);
    }

    pub(crate) fn failed(&self, name: &str, why: String) {
        self.inner.lock().failed.insert(name.to_owned(), why);
    }

    pub(crate) fn shutting_down(&self) {
        self.inner.lock().shutting_down = true;
    }

    fn tasks(&self) -> Verdict {
        let state = self.inner.lock();
        match state.failed.iter().next() {
            Some((name, why)) => Err(format!("{name} stopped: {why}")),
            None => Ok(()),
        }
    }
}

/// A user-defined check: `Ok(())` or why it fails.
pub(crate) type Check = Arc<dyn Fn() -> Verdict + Send + Sync>;

/// Lines `/readyz` shows without deciding its answer on them: one per fleet member, whose
/// own outage must not take the replica out of its Services.
pub(crate) type Details = Arc<dyn Fn() -> Vec<(String, Verdict)> + Send + Sync>;

/// How far past its renew deadline the elector may be before `/healthz` fails.
const STALL_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Everything the probes look at.
pub(crate) struct Probes {
    pub(crate) state: HealthState,
    pub(crate) factory: SharedInformerFactory,
    pub(crate) elector: Option<LeaderElector>,
    pub(crate) max_failures: u32,
    pub(crate) healthz: Vec<(String, Check)>,
    pub(crate) readyz: Vec<(String, Check)>,
    pub(crate) readyz_details: Vec<Details>,
}

impl Probes {
    /// Liveness, of the process and not of the cluster: no task died, the elector is not
    /// starved, and the user's checks pass. An API-server outage does not fail it
    /// (restarting every replica would not bring the server back).
    pub(crate) fn healthz(&self) -> Vec<(String, Verdict)> {
        let mut checks = vec![("tasks".to_owned(), self.state.tasks())];
        if let Some(elector) = &self.elector {
            let verdict = match elector.stalled() {
                Some(late) if late > STALL_GRACE => Err(format!(
                    "still leading {late:?} past the renew deadline: the elector is not \
                     getting to run (a reconcile blocking the runtime's threads?)"
                )),
                _ => Ok(()),
            };
            checks.push(("leader-election".to_owned(), verdict));
        }
        for informer in self.factory.health() {
            if let Some(why) = &informer.failed {
                checks.push((format!("informer {}", informer.name), Err(why.clone())));
            }
        }
        checks.extend(run_checks(&self.healthz));
        checks
    }

    /// Readiness: not shutting down, caches synced and their watches not failing over and
    /// over, and the user's checks. Leadership is not readiness: a synced standby is ready
    /// (a rolling update needs the new pod ready while the old one still leads).
    pub(crate) fn readyz(&self) -> Vec<(String, Verdict)> {
        let mut checks = Vec::new();
        let shutting_down = self.state.inner.lock().shutting_down;
        checks.push((
            "shutdown".to_owned(),
            if shutting_down {
                Err("shutting down".to_owned())
            } else {
                Ok(())
            },
        ));
        for informer in self.factory.health() {
            let verdict = if let Some(why) = &informer.failed {
                Err(why.clone())
            } else if !informer.is_alive(self.max_failures) {
                Err(format!(
                    "{} list/watch failures in a row; last: {}",
                    informer.reflector.consecutive_failures,
                    informer
                        .reflector
                        .last_error
                        .as_ref()
                        .map_or("unknown", |(_, why)| why.as_str())
                ))
            } else if !informer.is_ready() {
                Err("not synced".to_owned())
            } else {
                Ok(())
            };
            checks.push((format!("informer {}", informer.name), verdict));
        }
        checks.extend(run_checks(&self.readyz));
        checks
    }

    /// The lines `/readyz` shows for information (see [`Details`]); a panicking source
    /// shows as one failed line.
    pub(crate) fn readyz_details(&self) -> Vec<(String, Verdict)> {
        self.readyz_details
            .iter()
            .flat_map(|details| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| details()))
                    .unwrap_or_else(|_| vec![("details".to_owned(), Err("panicked".to_owned()))])
            })
            .collect()
    }
}

/// Runs the user's checks; a panicking check fails, with its message.
fn run_checks(checks: &[(String, Check)]) -> Vec<(String, Verdict)> {
    checks
        .iter()
        .map(|(name, check)| {
            let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check()))
                .unwrap_or_else(|_| Err("the check panicked".to_owned()));
            (name.clone(), verdict)
        })
        .collect()
}

/// The checks as a status code and a body; `verbose` lists passing checks too. `details`
/// are listed with them but do not decide the code.
pub(crate) fn render(
    endpoint: &str,
    checks: &[(String, Verdict)],
    details: &[(String, Verdict)],
    verbose: bool,
) -> (u16, String) {
    let healthy = checks.iter().all(|(_, v)| v.is_ok());
    let mut body = String::new();
    if verbose || !healthy {
        for (name, verdict) in checks.iter().chain(details) {
            match verdict {
                Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
                Err(why) => body.push_str(&format!("[-]{name} failed: {why}\n")),
            }
        }
    }
    if healthy {
        // kube-apiserver's words: `readyz check passed`, `livez check passed`, ...
        match verbose {
            true => body.push_str(&format!("{endpoint} check passed\n")),
            false => body.push_str("ok"),
        }
        (200, body)
    } else {
        body.push_str(&format!("{endpoint} check failed\n"));
        (500, body)
    }
}
