//! Webhook certificates made and rotated by the runtime, called by a real kube-apiserver
//! (real only: fake-apiserver calls no webhooks). Two replicas keep one Secret with
//! lifetimes of seconds, so that in half a minute the serving certificate is renewed
//! several times and the CA is rolled; every request meanwhile calls both replicas'
//! webhook servers, and none fails. The replicas never flip the Secret back and forth.
//! A roll whose bundle cannot be injected (the replicas' RBAC lacks `update` on the
//! configuration, or a second writer puts the old bundle back) waits: the first CA keeps signing, admissions keep passing, and
//! `webhook_certificate_injection_failures_total` says why; lifted, it completes.
//! And the Secret deleted while both serve (one checks every 300 ms, the other only
//! every minute, so it keeps serving its certificate of the first CA): no admission fails,
//! because the bundle made afresh keeps the CA the configuration trusted.

use crate::grant;

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use grant::{grant, impersonating, rbac_server};

use e2e::ensure_namespace;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, api::PostParams, core::admission::AdmissionRequest};
use kube_envtest::{Environment, EnvironmentOptions};
use kube_informer_runtime::{
    CancellationToken,
    rbac::{Rbac, Verb},
    tls::ServingCert,
    webhook::{Allowed, Denied, WebhookServer, certs::WebhookCerts},
};
use serde_json::json;
use tokio::task::JoinSet;

const NS: &str = "rotation";
const CONFIG: &str = "rotation-validate";

fn server(dir: &PathBuf) -> WebhookServer {
    WebhookServer::new(ServingCert::from_dir(dir).reload_every(Duration::from_millis(200)))
        .address(([127, 0, 0, 1], 0).into())
        .validating(
            "/validate",
            |request: AdmissionRequest<ConfigMap>| async move {
                let data = request.object.and_then(|cm| cm.data).unwrap_or_default();
                if data.contains_key("forbidden") {
                    return Err(Denied::new("the key `forbidden` is not allowed").code(422));
                }
                Ok(Allowed::new())
            },
        )
}

fn config_map(name: String, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap()
}

/// A real API server with the namespace `NS`, or `None` (skipped loudly).
async fn real() -> Option<(Environment, kube::Client)> {
    let env = Environment::start_or_skip(EnvironmentOptions::new())
        .await
        .expect("the real API server starts")?;
    let client = env.client();
    ensure_namespace(&client, NS).await;
    Some((env, client))
}

/// Binds a webhook server per folder: their ports, running in `tasks` until `cancel`.
async fn serve(dirs: &[PathBuf], cancel: &CancellationToken, tasks: &mut JoinSet<()>) -> Vec<u16> {
    let mut ports = Vec::new();
    for dir in dirs {
        let bound = server(dir).bind().await.unwrap();
        ports.push(bound.local_addr().port());
        tasks.spawn(bound.run(cancel.clone()));
    }
    ports
}

/// A ValidatingWebhookConfiguration `name` (`failurePolicy: Fail`, no caBundle until the
/// replicas inject it) calling every port on each ConfigMap created in `NS`.
async fn configure(client: &kube::Client, name: &str, ports: &[u16]) {
    let hook = |i: usize, port: u16| {
        json!({
            "name": format!("{}.{name}.example.com", (b'a' + u8::try_from(i).unwrap()) as char),
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/validate")},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail", "timeoutSeconds": 10,
        })
    };
    let hooks: Vec<_> = ports.iter().enumerate().map(|(i, p)| hook(i, *p)).collect();
    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name}, "webhooks": hooks,
    });
    let request = http::Request::post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    )
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&configuration).unwrap())
    .unwrap();
    client.request::<serde_json::Value>(request).await.unwrap();
}

/// Provisions each replica, serves each folder, registers the configuration `name`
/// calling them, runs the replicas' checks, and waits until the webhooks are called.
async fn start(
    client: &kube::Client,
    name: &str,
    dirs: &[PathBuf],
    replicas: Vec<WebhookCerts>,
) -> (CancellationToken, JoinSet<()>) {
    for replica in &replicas {
        replica.provision().await.unwrap();
    }
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let ports = serve(dirs, &cancel, &mut tasks).await;
    configure(client, name, &ports).await;
    for replica in replicas {
        tasks.spawn(replica.run(cancel.clone()));
    }
    until_called(&Api::namespaced(client.clone(), NS)).await;
    (cancel, tasks)
}

/// Stops the servers and the replicas' checks, and waits for them.
async fn stop(cancel: CancellationToken, mut tasks: JoinSet<()>) {
    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

/// Setup, not verdict: waits until the webhooks are called (a refusal in their words).
async fn until_called(configmaps: &Api<ConfigMap>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for attempt in 0.. {
        let probe = config_map(format!("probe-{attempt}"), json!({"forbidden": "x"}));
        match configmaps.create(&PostParams::default(), &probe).await {
            Err(kube::Error::Api(status)) if status.message.contains("is not allowed") => break,
            other => assert!(
                Instant::now() < deadline,
                "the webhooks were never called: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn webhooks_keep_answering_across_certificate_and_ca_rotations() {
    let Some((env, client)) = real().await else {
        return;
    };

    // Two replicas: each its own folder and server, one Secret. Seconds, not years.
    let dirs: Vec<PathBuf> = (0..2)
        .map(|i| env.dir().join(format!("replica-{i}")))
        .collect();
    let replicas: Vec<WebhookCerts> = dirs
        .iter()
        .map(|dir| {
            WebhookCerts::new(client.clone(), NS, "webhook-cert", ["127.0.0.1"])
                .validating(CONFIG)
                .cert_dir(dir)
                .ca_validity(Duration::from_secs(24))
                .serving_validity(Duration::from_secs(9))
                .overlap(Duration::from_secs(3))
                .check_every(Duration::from_millis(300))
        })
        .collect();
    let (cancel, tasks) = start(&client, CONFIG, &dirs, replicas).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();

    // Half a minute of admissions across the rotations: none may fail.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let signing = |secret: &Secret| {
        let data = secret.data.as_ref().unwrap();
        String::from_utf8(data["signing-ca.crt"].0.clone()).unwrap()
    };
    let (mut cas, mut servings): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    let (mut admitted, mut failed) = (0, Vec::new());
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(30) {
        n += 1;
        match configmaps
            .create(
                &pp,
                &config_map(format!("cm-{n}"), json!({"n": n.to_string()})),
            )
            .await
        {
            Ok(_) => admitted += 1,
            Err(error) => failed.push(format!("{:?}: {error}", started.elapsed())),
        }
        let ca = signing(&secrets.get("webhook-cert").await.unwrap());
        if cas.last() != Some(&ca) {
            cas.push(ca);
        }
        let serving = std::fs::read_to_string(dirs[0].join("tls.crt")).unwrap();
        if servings.last() != Some(&serving) {
            servings.push(serving);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "rotation: {admitted} admissions, {} failed, {} CAs, {} serving certificates",
        failed.len(),
        cas.len(),
        servings.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {} admissions failed: {failed:?}",
        failed.len(),
        admitted + failed.len()
    );
    assert!(admitted > 50, "only {admitted} admissions");
    assert!(
        cas.len() >= 2,
        "the CA was never rolled ({} CAs seen)",
        cas.len()
    );
    assert!(
        servings.len() >= 3,
        "only {} serving certificates seen",
        servings.len()
    );
    // One CA after another, never back: the replicas did not fight over the Secret.
    for (i, ca) in cas.iter().enumerate() {
        assert!(
            !cas[i + 1..].contains(ca),
            "CA {i} came back after being replaced"
        );
    }

    stop(cancel, tasks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn the_secret_deleted_under_two_serving_replicas_fails_no_admission() {
    let Some((env, client)) = real().await else {
        return;
    };
    let dirs: Vec<PathBuf> = (0..2)
        .map(|i| env.dir().join(format!("deleted-{i}")))
        .collect();
    // a checks often; b only every minute: it keeps serving the first CA's certificate.
    let checks = [Duration::from_millis(300), Duration::from_secs(60)];
    let replicas: Vec<WebhookCerts> = dirs
        .iter()
        .zip(checks)
        .map(|(dir, every)| {
            WebhookCerts::new(client.clone(), NS, "deleted-cert", ["127.0.0.1"])
                .validating("deleted-validate")
                .cert_dir(dir)
                .check_every(every)
        })
        .collect();
    let (cancel, tasks) = start(&client, "deleted-validate", &dirs, replicas).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let first = std::fs::read_to_string(dirs[1].join("tls.crt")).unwrap();

    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    secrets
        .delete("deleted-cert", &Default::default())
        .await
        .unwrap();
    // Until a has made and injected a new CA, and for a few seconds of serving after.
    let (mut admitted, mut failed, mut renewed_at) = (0, Vec::new(), None);
    let started = Instant::now();
    let mut n = 0;
    while renewed_at.is_none_or(|at: Instant| at.elapsed() < Duration::from_secs(5)) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a never made a new CA"
        );
        n += 1;
        let cm = config_map(format!("after-delete-{n}"), json!({"n": n.to_string()}));
        match configmaps.create(&PostParams::default(), &cm).await {
            Ok(_) => admitted += 1,
            Err(error) => failed.push(format!("{:?}: {error}", started.elapsed())),
        }
        let a_serves = std::fs::read_to_string(dirs[0].join("tls.crt")).unwrap();
        if renewed_at.is_none() && a_serves != first {
            renewed_at = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let b_serves = std::fs::read_to_string(dirs[1].join("tls.crt")).unwrap();
    assert_eq!(
        b_serves, first,
        "b still serves the first CA's certificate (setup)"
    );
    assert!(
        failed.is_empty(),
        "{} of {} admissions failed: {failed:?}",
        failed.len(),
        admitted + failed.len()
    );
    stop(cancel, tasks).await;
}

/// `webhook_certificate_injection_failures_total{target, reason}`.
fn injection_failures(target: &str, reason: &str) -> u64 {
    let mut registry = prometheus_client::registry::Registry::default();
    kube_informer_runtime::webhook::register_metrics(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let series = format!(
        "webhook_certificate_injection_failures_total{{target=\"{target}\",reason=\"{reason}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// What keeps a roll's next CA out of the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Obstacle {
    /// The replicas' RBAC lacks `update` on it (lifted by a grant).
    Refused,
    /// A second writer (a GitOps tool's self-heal) puts its first bundle back whenever it
    /// changes (lifted by stopping it).
    Reverted,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn a_roll_whose_injection_is_refused_waits_and_fails_no_admission() {
    a_roll_held_by(Obstacle::Refused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn a_roll_whose_injection_is_reverted_waits_and_fails_no_admission() {
    a_roll_held_by(Obstacle::Reverted).await;
}

/// A CA roll while `obstacle` keeps the next CA out of the configuration: the first CA
/// keeps signing and every admission passes, the failed injections are counted; once the
/// obstacle is lifted, the next CA is injected and promoted an overlap later, and every
/// admission still passes.
async fn a_roll_held_by(obstacle: Obstacle) {
    let (target, secret_name, reason) = match obstacle {
        Obstacle::Refused => ("refused-validate", "refused-cert", "refused"),
        Obstacle::Reverted => ("reverted-validate", "reverted-cert", "reverted"),
    };
    let Some(env) = rbac_server().await else {
        return;
    };
    let admin = env.client();
    ensure_namespace(&admin, NS).await;
    let reg = "admissionregistration.k8s.io";
    let user = format!("webhook-replicas-{reason}");
    let replicas = match obstacle {
        Obstacle::Refused => {
            // The replicas may keep their Secret and read the configuration, not update it.
            let mut rbac = Rbac::default();
            rbac.allow(
                "",
                "secrets",
                &[NS.to_owned()],
                &[Verb::Get, Verb::Create, Verb::Update],
            );
            rbac.allow(reg, "validatingwebhookconfigurations", &[], &[Verb::Get]);
            grant(&admin, &rbac, &user, &user).await;
            impersonating(&env, &user)
        }
        Obstacle::Reverted => admin.clone(),
    };

    let dirs: Vec<PathBuf> = (0..2)
        .map(|i| env.dir().join(format!("{reason}-{i}")))
        .collect();
    // The CA rolls once a third of its 60 s is left (at 40 s): 20 s for the held stretch
    // (6 s), lifting it, the injection and the overlap (3 s) before it would expire — room
    // for a loaded machine.
    let certs = |client: &kube::Client, dir: &PathBuf| {
        WebhookCerts::new(client.clone(), NS, secret_name, ["127.0.0.1"])
            .validating(target)
            .cert_dir(dir)
            .ca_validity(Duration::from_secs(60))
            .serving_validity(Duration::from_secs(9))
            .overlap(Duration::from_secs(3))
            .check_every(Duration::from_millis(300))
    };
    for dir in &dirs {
        certs(&replicas, dir).provision().await.unwrap();
    }
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let ports = serve(&dirs, &cancel, &mut tasks).await;
    configure(&admin, target, &ports).await;
    // Someone with the rights injects the first bundle (an installer, once).
    certs(&admin, &env.dir().join(format!("installer-{reason}")))
        .provision()
        .await
        .unwrap();
    let reverting = CancellationToken::new();
    if obstacle == Obstacle::Reverted {
        tasks.spawn(revert(admin.clone(), target, reverting.clone()));
    }
    for dir in &dirs {
        tasks.spawn(certs(&replicas, dir).run(cancel.clone()));
    }
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), NS);
    until_called(&configmaps).await;

    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let held = |secret: &Secret, key: &str| {
        let data = secret.data.as_ref().unwrap();
        data.get(key)
            .map(|v| String::from_utf8(v.0.clone()).unwrap())
    };
    let first = held(&secrets.get(secret_name).await.unwrap(), "signing-ca.crt");
    let (mut admitted, mut failed) = (0, Vec::new());
    let started = Instant::now();
    let mut n = 0;
    let mut admit = async |configmaps: &Api<ConfigMap>| {
        n += 1;
        let cm = config_map(format!("{reason}-{n}"), json!({"n": n.to_string()}));
        match configmaps.create(&PostParams::default(), &cm).await {
            Ok(_) => admitted += 1,
            Err(error) => failed.push(format!("{:?}: {error}", started.elapsed())),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Until the roll has started and stood held for twice the overlap.
    let mut rolled_at = None;
    while rolled_at.is_none_or(|at: Instant| at.elapsed() < Duration::from_secs(6)) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the roll never started"
        );
        admit(&configmaps).await;
        let secret = secrets.get(secret_name).await.unwrap();
        if rolled_at.is_none() && held(&secret, "next-ca.crt").is_some() {
            rolled_at = Some(Instant::now());
        }
        assert_eq!(
            held(&secret, "signing-ca.crt"),
            first,
            "promoted while {reason}"
        );
    }
    assert!(
        injection_failures(target, reason) > 0,
        "the {reason} injections are counted"
    );

    // Lifted: injected, then promoted an overlap later; admissions pass throughout.
    match obstacle {
        Obstacle::Refused => {
            let mut update = Rbac::default();
            update.allow(reg, "validatingwebhookconfigurations", &[], &[Verb::Update]);
            grant(&admin, &update, &format!("{user}-update"), &user).await;
        }
        Obstacle::Reverted => reverting.cancel(),
    }
    let lifted = Instant::now();
    loop {
        assert!(
            lifted.elapsed() < Duration::from_secs(30),
            "never promoted once {reason} no more"
        );
        admit(&configmaps).await;
        let secret = secrets.get(secret_name).await.unwrap();
        if held(&secret, "signing-ca.crt") != first {
            break;
        }
    }
    for _ in 0..50 {
        admit(&configmaps).await;
    }
    assert!(
        failed.is_empty(),
        "{} of {} admissions failed: {failed:?}",
        failed.len(),
        admitted + failed.len()
    );
    stop(cancel, tasks).await;
}

/// A second writer of the configuration `name` (a GitOps tool's self-heal): whenever its
/// `caBundle`s differ from what they were when it started, it puts them back, until `stop`.
async fn revert(client: kube::Client, name: &str, stop: CancellationToken) {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let bundles = |c: &ValidatingWebhookConfiguration| -> Vec<_> {
        let hooks = c.webhooks.iter().flatten();
        hooks.map(|w| w.client_config.ca_bundle.clone()).collect()
    };
    let original = bundles(&configs.get(name).await.unwrap());
    while !stop.is_cancelled() {
        if let Ok(mut now) = configs.get(name).await
            && bundles(&now) != original
        {
            for (hook, bundle) in now.webhooks.iter_mut().flatten().zip(&original) {
                hook.client_config.ca_bundle = bundle.clone();
            }
            let _ = configs.replace(name, &PostParams::default(), &now).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
