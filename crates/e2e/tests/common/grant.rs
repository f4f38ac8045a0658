//! Giving a user exactly an [`Rbac`]'s rules on a real API server, and acting as that user:
//! shared by the RBAC scenarios (`rbac_real.rs`, `demo_real.rs`), each of which uses part.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::{
    authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, Subject},
};
use kube::{Api, api::PostParams};
use kube_envtest::{Environment, EnvironmentOptions};
use kube_informer_runtime::rbac::{Rbac, Reach};

/// Long enough for a real server under a loaded CI machine; every wait ends on a condition.
pub(crate) const PATIENCE: Duration = Duration::from_secs(90);

/// A real API server that authorizes with RBAC, or `None` (skipped loudly) without the
/// binaries.
pub(crate) async fn rbac_server() -> Option<Environment> {
    let options = EnvironmentOptions::new().apiserver_arg("--authorization-mode=RBAC");
    Environment::start_or_skip(options)
        .await
        .expect("the real API server starts")
}

/// A client of `env` acting as `user` (impersonated by the environment's admin).
pub(crate) fn impersonating(env: &Environment, user: &str) -> kube::Client {
    let mut config = env.config();
    config.auth_info.impersonate = Some(user.to_owned());
    kube::Client::try_from(config).expect("a client")
}

/// Creates `rbac`'s roles named `name` and binds them to `user`, then waits until the server
/// authorizes every rule for `user` (RBAC's cache follows the objects a moment later).
pub(crate) async fn grant(admin: &kube::Client, rbac: &Rbac, name: &str, user: &str) {
    let subject = Subject {
        kind: "User".into(),
        name: user.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Subject::default()
    };
    let post = PostParams::default();
    if let Some(role) = rbac.cluster_role(name) {
        Api::<ClusterRole>::all(admin.clone())
            .create(&post, &role)
            .await
            .unwrap();
        let binding = rbac.cluster_role_binding(name, &subject).unwrap();
        Api::<ClusterRoleBinding>::all(admin.clone())
            .create(&post, &binding)
            .await
            .unwrap();
    }
    for role in rbac.roles(name) {
        let api =
            Api::<Role>::namespaced(admin.clone(), role.metadata.namespace.as_deref().unwrap());
        api.create(&post, &role).await.unwrap();
    }
    for binding in rbac.role_bindings(name, &subject) {
        let ns = binding.metadata.namespace.clone().unwrap();
        Api::<RoleBinding>::namespaced(admin.clone(), &ns)
            .create(&post, &binding)
            .await
            .unwrap();
    }
    until_authorized(admin, rbac, user).await;
}

/// Waits until the server authorizes every rule of `rbac` for `user` (RBAC's cache follows
/// the objects a moment later).
pub(crate) async fn until_authorized(admin: &kube::Client, rbac: &Rbac, user: &str) {
    let post = PostParams::default();
    let reviews = Api::<SubjectAccessReview>::all(admin.clone());
    for permission in rbac.permissions() {
        // A rule limited to named objects is asked about one of them.
        let name = permission.names.first().cloned();
        for verb in &permission.verbs {
            let (resource, subresource) = match permission.resource.split_once('/') {
                Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
                None => (permission.resource.clone(), None),
            };
            let namespace = match &permission.reach {
                Reach::Namespace(ns) => Some(ns.clone()),
                Reach::Cluster => None,
            };
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.into()),
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(permission.group.clone()),
                        resource: Some(resource),
                        subresource,
                        namespace,
                        verb: Some(verb.as_str().into()),
                        name: name.clone(),
                        ..ResourceAttributes::default()
                    }),
                    ..SubjectAccessReviewSpec::default()
                },
                ..SubjectAccessReview::default()
            };
            let started = std::time::Instant::now();
            loop {
                let answer = reviews.create(&post, &review).await.unwrap();
                if answer.status.is_some_and(|s| s.allowed) {
                    break;
                }
                assert!(
                    started.elapsed() < PATIENCE,
                    "{user} never got {permission:?}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
