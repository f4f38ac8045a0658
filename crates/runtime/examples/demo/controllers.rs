//! The demo's two controllers, sharing the manager's informers.
//!
//! - **ready-pods** (`Deployment`, watches `Pod`): counts each Deployment's running pods through
//!   a pod index, writes the count into an annotation and a `ready-<name>` report ConfigMap,
//!   publishes an event when it changes, and deletes the report through a finalizer when the
//!   Deployment is deleted. A predicate skips its own annotation writes.
//! - **namespace-summaries** (`Namespace`, watches `Pod`): keeps a `pod-summary` ConfigMap
//!   per namespace with its pods per phase.
//!
//! Both read pods whole (`Pod`) or, with `--compact`, as `Compact<Pod>`: the pod's bytes and
//! parsed metadata (the index, the owner mapping and listers read the metadata), decoded
//! for its phase in the reconcile ([`DemoPod`]).
#![allow(dead_code, unreachable_pub)]

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Namespace, Pod},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
};
use kube_informer::{Indexers, Lister, ObjectKey, ReadOnlyStore, compact::Compact};
use kube_informer_runtime::{
    controller::{Action, Cached, Controller, ControllerOptions, Watchable, predicate},
    events::{EventType, NewEvent, Recorder},
    finalizer::{Event, FinalizerError, finalizer},
    manager::Manager,
    rbac::Verb,
};
use serde_json::json;

/// The pod index: the key of the pod's controller owner.
pub const BY_OWNER: &str = "by-owner";
/// The annotation holding a Deployment's `ready/total`.
pub const READY: &str = "demo.kube-informer.io/ready";
/// The finalizer that deletes a Deployment's report.
pub const REPORT_FINALIZER: &str = "demo.kube-informer.io/report";
/// The summary each namespace gets.
pub const SUMMARY: &str = "pod-summary";
/// The label on everything the demo creates (what `--cleanup` looks for).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kube-informer-demo");

/// Reconcile errors per controller: how many, and the last one (printed at the end, so a
/// 403 does not hide in a counter).
#[derive(Clone, Default)]
pub struct Errors(Arc<Mutex<BTreeMap<String, (u64, String)>>>);

impl Errors {
    /// Records `error` of `controller`.
    pub fn record(&self, controller: &str, error: &dyn std::fmt::Display) {
        let mut errors = self.0.lock().expect("never poisoned: no panics while held");
        let entry = errors.entry(controller.to_owned()).or_default();
        entry.0 += 1;
        entry.1 = error.to_string();
    }

    /// Each controller's count and last error.
    pub fn snapshot(&self) -> BTreeMap<String, (u64, String)> {
        self.0
            .lock()
            .expect("never poisoned: no panics while held")
            .clone()
    }
}

/// Where the controllers may write, and where their errors go.
#[derive(Clone, Default)]
pub struct Scope {
    /// Only these namespaces (`None`: every namespace, as on the simulated cluster).
    pub namespaces: Option<Vec<String>>,
    pub errors: Errors,
}

impl Scope {
    fn allows(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|n| n == namespace))
    }
}

/// Index function: `namespace/name` of the Deployment a pod belongs to. On a real cluster a
/// Deployment's pods are owned by its ReplicaSet, named `<deployment>-<pod-template-hash>`
/// (so `owns::<Pod>()` on Deployments would never match); the simulated cluster's pods name
/// their Deployment directly.
pub fn by_owner<P: kube::Resource>(pod: &P) -> Vec<String> {
    let ns = pod.namespace().unwrap_or_default();
    let hash = pod.labels().get("pod-template-hash").cloned();
    pod.owner_references()
        .iter()
        .filter(|r| r.controller == Some(true))
        .filter_map(|r| match r.kind.as_str() {
            "Deployment" => Some(r.name.clone()),
            "ReplicaSet" => {
                let suffix = format!("-{}", hash.as_deref()?);
                r.name.strip_suffix(&suffix).map(str::to_owned)
            }
            _ => None,
        })
        .map(|deployment| format!("{ns}/{deployment}"))
        .collect()
}

/// A pod as the demo's caches keep it: whole, or compact (`--compact`).
pub trait DemoPod: Watchable {
    /// Its phase (`Running`, ...).
    fn phase(&self) -> Option<String>;
}

impl DemoPod for Pod {
    fn phase(&self) -> Option<String> {
        self.status.as_ref()?.phase.clone()
    }
}

impl DemoPod for Compact<Pod> {
    /// Decoded for it: what a reconcile over a compact cache pays for a field beyond the
    /// metadata (about 12 µs for a pod kept as protobuf).
    fn phase(&self) -> Option<String> {
        self.decode().ok()?.status?.phase
    }
}

/// Whether a pod counts as ready (the demo's simple rule: it runs).
pub fn is_ready<P: DemoPod>(pod: &P) -> bool {
    pod.phase().as_deref() == Some("Running")
}

/// What the demo's reconciles share.
pub struct Context<P> {
    pub client: kube::Client,
    pub pods: ReadOnlyStore<P>,
    pub recorder: Recorder,
    pub scope: Scope,
}

/// `ready/total` for the Deployment `key`, from the pod index.
pub fn readiness<P: DemoPod>(pods: &ReadOnlyStore<P>, key: &str) -> (usize, usize) {
    let owned = pods.by_index(BY_OWNER, key).unwrap_or_default();
    (
        owned.iter().filter(|p| is_ready(&***p)).count(),
        owned.len(),
    )
}

/// ready-pods: one reconcile of a Deployment.
pub async fn reconcile_deployment<P: DemoPod>(
    deploy: Cached<Deployment>,
    ctx: Arc<Context<P>>,
) -> Result<Action, FinalizerError<kube::Error>> {
    let Cached::Present(deploy) = deploy else {
        return Ok(Action::Done); // gone: the finalizer already cleaned up
    };
    let ns = deploy.namespace().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, REPORT_FINALIZER, deploy, |event| async {
        let reports: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
        match event {
            Event::Apply(deploy) => {
                let name = deploy.name_any();
                let (ready, total) = readiness(&ctx.pods, &format!("{ns}/{name}"));
                let now = format!("{ready}/{total}");
                if deploy.annotations().get(READY) != Some(&now) {
                    let patch = json!({"metadata": {"annotations": {READY: now}}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                    let note = format!("{now} pods ready");
                    let event =
                        NewEvent::new(EventType::Normal, "ReadyChanged", "Count").note(note);
                    ctx.recorder.publish(deploy.as_ref(), event);
                }
                write_report(&reports, &name, ready, total).await?;
                Ok(Action::Done)
            }
            Event::Cleanup(deploy) => {
                let name = format!("ready-{}", deploy.name_any());
                match reports.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => Ok(Action::Done),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::Done),
                    Err(e) => Err(e),
                }
            }
        }
    })
    .await
}

/// Creates or updates the report ConfigMap of Deployment `name`.
async fn write_report(
    reports: &Api<ConfigMap>,
    name: &str,
    ready: usize,
    total: usize,
) -> Result<(), kube::Error> {
    let data = json!({"ready": ready.to_string(), "total": total.to_string()});
    let report = format!("ready-{name}");
    let patch = json!({"data": data});
    match reports
        .patch(&report, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let metadata = json!({"name": report, "labels": {MANAGED_BY.0: MANAGED_BY.1}});
            let cm: ConfigMap = serde_json::from_value(json!({"metadata": metadata, "data": data}))
                .expect("a valid ConfigMap");
            match reports.create(&Default::default(), &cm).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()), // a retry patches it
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// What the summary of `namespace` says, from the cache: pods per phase (every phase, zeros
/// included, so a merge patch never keeps a stale count).
pub fn summary<P: DemoPod>(pods: &ReadOnlyStore<P>, namespace: &str) -> BTreeMap<String, String> {
    let pods = Lister::new(pods.clone())
        .namespaced(namespace)
        .list(&Default::default());
    let mut data: BTreeMap<String, usize> = ["pending", "running", "succeeded", "failed"]
        .into_iter()
        .map(|p| (p.to_owned(), 0))
        .collect();
    for pod in &pods {
        let phase = pod.phase();
        *data
            .entry(phase.unwrap_or_else(|| "Pending".into()).to_lowercase())
            .or_default() += 1;
    }
    let mut data: BTreeMap<String, String> =
        data.into_iter().map(|(k, v)| (k, v.to_string())).collect();
    data.insert("pods".into(), pods.len().to_string());
    data
}

/// namespace-summaries: one reconcile of a Namespace.
pub async fn reconcile_namespace<P: DemoPod>(
    namespace: Cached<Namespace>,
    ctx: Arc<Context<P>>,
) -> Result<Action, kube::Error> {
    let Cached::Present(namespace) = namespace else {
        return Ok(Action::Done);
    };
    let ns = namespace.name_any();
    if !ctx.scope.allows(&ns) {
        return Ok(Action::Done); // the Namespace cache is cluster-wide; writes are not
    }
    let data = summary(&ctx.pods, &ns);
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let patch = json!({"data": data});
    match api
        .patch(SUMMARY, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(Action::Done),
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let metadata = json!({"name": SUMMARY, "labels": {MANAGED_BY.0: MANAGED_BY.1}});
            let cm: ConfigMap = serde_json::from_value(json!({"metadata": metadata, "data": data}))
                .expect("a valid ConfigMap");
            api.create(&Default::default(), &cm)
                .await
                .map(|_| Action::Done)
        }
        Err(e) => Err(e),
    }
}

/// Adds both controllers to `manager` (run while this replica leads), reading pods as `P`
/// and writing only where `scope` allows.
pub fn install<P: DemoPod>(manager: &mut Manager, recorder: Recorder, scope: Scope) {
    let pods = manager.factory().informer::<P>();
    pods.add_indexers(Indexers::new().index(BY_OWNER, by_owner::<P>))
        .expect("a fresh index name");
    let ctx = Arc::new(Context {
        client: manager.client().clone(),
        pods: pods.store(),
        recorder,
        scope,
    });
    let options = ControllerOptions::default();
    let ready: Controller<Deployment> = manager
        .controller::<Deployment>(options.clone().name("ready-pods").workers(4))
        .watches::<P>(|pod| {
            by_owner(pod)
                .iter()
                .filter_map(|k| k.parse().ok())
                .collect()
        })
        .predicate(
            predicate::generation()
                .or(predicate::finalizers())
                .or(predicate::deletion()),
        )
        // The finalizer and the annotation; the reports.
        .writes_own(&[Verb::Patch])
        .writes::<ConfigMap>(&[Verb::Create, Verb::Patch, Verb::Delete]);
    manager.add_controller(
        ready,
        reconcile_deployment,
        |_, error, ctx: &Context<P>| {
            ctx.scope.errors.record("ready-pods", error);
            Action::Retry
        },
        ctx.clone(),
    );
    let summaries = manager
        .controller::<Namespace>(options.name("namespace-summaries").workers(2))
        .watches::<P>(|pod| {
            pod.namespace()
                .map(|ns| ObjectKey::new(None, &ns))
                .into_iter()
                .collect()
        })
        .writes::<ConfigMap>(&[Verb::Create, Verb::Patch]);
    manager.add_controller(
        summaries,
        reconcile_namespace,
        |_, error, ctx: &Context<P>| {
            ctx.scope.errors.record("namespace-summaries", error);
            Action::Retry
        },
        ctx,
    );
}
