//! The RBAC a manager generates ([`Manager::rbac`]) is exactly what its operator needs, on a
//! real kube-apiserver with `--authorization-mode=RBAC` (real only: fake-apiserver does not
//! authorize). The operator elects a leader, reconciles ConfigMaps (annotating each: a
//! declared patch of its own kind), creates an owned Secret per ConfigMap (a declared
//! create; the Secrets are read through an `owns` informer) and records an Event. It runs as
//! an impersonated user bound to the generated roles:
//!
//! - sufficient: with every rule, it does all of that and the server refuses nothing;
//! - minimal: with any one rule left out, the server answers it a 403 for that rule.

use std::sync::Arc;

use e2e::ensure_namespace;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, Resource, ResourceExt,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use kube_envtest::{AuditEvent, Environment};
use kube_informer::{FactoryOptions, Selectors};
use kube_informer_runtime::{
    Action, Cached, CancellationToken, LeaderElectionConfig, Manager, ManagerOptions,
    controller::ControllerOptions,
    events::{EventType, NewEvent, Recorder},
    rbac::{Permission, Rbac, Verb},
};
use serde_json::json;

use crate::grant;
use grant::{PATIENCE, grant, impersonating};

const NS: &str = "shop";

struct Ctx {
    client: kube::Client,
    recorder: Recorder,
}

async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let Some(cm) = cm.present() else {
        return Ok(Action::Done);
    };
    let name = cm.name_any();
    let own: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), NS);
    let seen = json!({"metadata": {"annotations": {"example.com/seen": "yes"}}});
    own.patch(&name, &PatchParams::default(), &Patch::Merge(&seen))
        .await?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            owner_references: cm.controller_owner_ref(&()).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), NS);
    match secrets.create(&PostParams::default(), &secret).await {
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        other => drop(other?),
    }
    let event = NewEvent::new(EventType::Normal, "Seen", "Reconcile");
    ctx.recorder.publish(cm.as_ref(), event);
    Ok(Action::Done)
}

/// The operator, acting as `user` (impersonated by the environment's admin).
async fn operator(env: &Environment, user: &str) -> Manager {
    let client = impersonating(env, user);
    let options = ManagerOptions::for_tests()
        .factory(FactoryOptions::default().selectors(Selectors::default().in_namespace(NS)))
        .leader_election(LeaderElectionConfig::new(user).namespace(NS));
    let mut manager = Manager::new(client.clone(), options)
        .await
        .expect("a manager");
    let recorder = manager.recorder("configmaps");
    let controller = manager
        .controller::<ConfigMap>(ControllerOptions::default().name("configmaps"))
        .owns::<Secret>()
        .writes::<Secret>(&[Verb::Create])
        .writes_own(&[Verb::Patch]);
    let ctx = Arc::new(Ctx { client, recorder });
    manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, ctx);
    manager
}

fn acting_as(event: &AuditEvent, user: &str) -> bool {
    event
        .impersonated_user
        .as_ref()
        .is_some_and(|u| u.username == user)
}

/// Whether `event` is a refusal of something `permission` grants.
fn refuses(event: &AuditEvent, permission: &Permission) -> bool {
    let Some(object) = &event.object_ref else {
        return false;
    };
    let resource = match &object.subresource {
        Some(sub) => format!("{}/{sub}", object.resource.as_deref().unwrap_or_default()),
        None => object.resource.clone().unwrap_or_default(),
    };
    event.code() == Some(403)
        && resource == permission.resource
        && object.api_group.clone().unwrap_or_default() == permission.group
        && permission.verbs.iter().any(|v| v.as_str() == event.verb)
}

/// Creates the ConfigMap `name` (as the admin): something to reconcile.
async fn create(configmaps: &Api<ConfigMap>, name: &str) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

/// Runs `manager` until `done`, then stops it (gracefully) and waits for it.
async fn run_until<F: std::future::Future<Output = ()>>(manager: Manager, done: F) {
    let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
    let running = tokio::spawn(manager.run_until(graceful.clone(), force));
    done.await;
    graceful.cancel();
    running
        .await
        .expect("the manager task")
        .expect("the manager stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn the_generated_rbac_is_sufficient_and_minimal() {
    let Some(env) = grant::rbac_server().await else {
        return;
    };
    let admin = env.client();
    ensure_namespace(&admin, NS).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), NS);
    let rbac = operator(&env, "probe").await.rbac();
    let permissions = rbac.permissions();
    assert_eq!(
        permissions.len(),
        4,
        "configmaps, secrets, leases, events: {permissions:#?}"
    );

    // Sufficient: every rule, and everything the operator does succeeds.
    let user = "operator";
    grant(&admin, &rbac, user, user).await;
    let manager = operator(&env, user).await;
    create(&configmaps, "all").await;
    run_until(manager, async {
        let events = env.wait_for_audit_event(PATIENCE, |e| {
            acting_as(e, user) && e.resource() == Some("events") && e.code() == Some(201)
        });
        events.await.expect("the operator went as far as its Event");
    })
    .await;
    let secret = Api::<Secret>::namespaced(admin.clone(), NS)
        .get("all")
        .await
        .unwrap();
    assert_eq!(secret.owner_references()[0].name, "all");
    let annotated = configmaps.get("all").await.unwrap();
    assert_eq!(
        annotated
            .annotations()
            .get("example.com/seen")
            .map(String::as_str),
        Some("yes")
    );
    let refused: Vec<AuditEvent> = env
        .audit_requests()
        .unwrap()
        .into_iter()
        .filter(|e| acting_as(e, user) && e.code() == Some(403))
        .collect();
    assert!(
        refused.is_empty(),
        "the generated rules were not enough: {refused:#?}"
    );

    // Minimal: without any one rule, the server refuses the operator that rule.
    for (at, left_out) in permissions.iter().enumerate() {
        let user = format!("without-{at}");
        let rest: Rbac = permissions
            .iter()
            .filter(|p| *p != left_out)
            .cloned()
            .collect();
        grant(&admin, &rest, &user, &user).await;
        let manager = operator(&env, &user).await;
        create(&configmaps, &user).await;
        run_until(manager, async {
            let refusal =
                env.wait_for_audit_event(PATIENCE, |e| acting_as(e, &user) && refuses(e, left_out));
            refusal
                .await
                .unwrap_or_else(|e| panic!("nothing needed {left_out:?}: {e}"));
        })
        .await;
    }
}
