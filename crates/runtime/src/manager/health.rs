//! What `/healthz` and `/readyz` answer: named checks, each passing or failing with a
//! reason, in controller-runtime's text format (`[+]name ok` / `[-]name failed: why`).

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

/// Everything the probes look at.
pub(crate) struct Probes {
    pub(crate) state: HealthState,
    pub(crate) factory: SharedInformerFactory,
    pub(crate) elector: Option<LeaderElector>,
    pub(crate) max_failures: u32,
}

impl Probes {
    /// Liveness: no task died, every informer's watch is recovering.
    pub(crate) fn healthz(&self) -> Vec<(String, Verdict)> {
        let mut checks = vec![("tasks".to_owned(), self.state.tasks())];
        for informer in self.factory.health() {
            let verdict = match (&informer.failed, informer.is_alive(self.max_failures)) {
                (Some(why), _) => Err(why.clone()),
                (None, true) => Ok(()),
                (None, false) => Err(format!(
                    "{} list/watch failures in a row; last: {}",
                    informer.reflector.consecutive_failures,
                    informer
                        .reflector
                        .last_error
                        .as_ref()
                        .map_or("unknown", |(_, why)| why.as_str())
                )),
            };
            checks.push((format!("informer {}", informer.name), verdict));
        }
        checks
    }

    /// Readiness: caches synced, not shutting down, and leading (when elected).
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
            let verdict = if informer.is_ready() {
                Ok(())
            } else {
                Err(informer
                    .failed
                    .clone()
                    .unwrap_or_else(|| "not synced".to_owned()))
            };
            checks.push((format!("informer {}", informer.name), verdict));
        }
        if let Some(elector) = &self.elector {
            let verdict = if elector.is_leading() {
                Ok(())
            } else {
                Err("not the leader".to_owned())
            };
            checks.push(("leader".to_owned(), verdict));
        }
        checks
    }
}

/// The checks as a status code and a body; `verbose` lists passing checks too.
pub(crate) fn render(checks: &[(String, Verdict)], verbose: bool) -> (u16, String) {
    let healthy = checks.iter().all(|(_, v)| v.is_ok());
    let mut body = String::new();
    if verbose || !healthy {
        for (name, verdict) in checks {
            match verdict {
                Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
                Err(why) => body.push_str(&format!("[-]{name} failed: {why}\n")),
            }
        }
    }
    if healthy {
        body.push_str(if verbose {
            "healthz check passed\n"
        } else {
            "ok"
        });
        (200, body)
    } else {
        body.push_str("healthz check failed\n");
        (500, body)
    }
}
