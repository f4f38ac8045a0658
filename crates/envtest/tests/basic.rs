//! Against the real binaries: objects round-trip through the client, every request is in the
//! audit log with its query, the kubeconfig file works, service-account tokens are signed.
//! Skipped loudly without `KUBEBUILDER_ASSETS` (a failure with `KUBE_ENVTEST_REQUIRED=1`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures_util::StreamExt as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{Api, ListParams, PostParams, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::ObjectMeta;
use kube_envtest::audit::Stage;
use kube_envtest::{Environment, EnvironmentOptions};

const WAIT: Duration = Duration::from_secs(60);

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn objects_round_trip_and_requests_are_audited() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let Some(env) = Environment::start_or_skip(EnvironmentOptions::new()).await? else {
        return Ok(());
    };
    eprintln!("environment started in {:?}: {env:?}", started.elapsed());
    assert!(format!("{env:?}").contains(env.url()));
    let client = env.client();

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: meta("shop"),
                ..Default::default()
            },
        )
        .await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "shop");
    let data = BTreeMap::from([("color".to_owned(), "blue".to_owned())]);
    let cm = ConfigMap {
        metadata: meta("settings"),
        data: Some(data.clone()),
        ..Default::default()
    };
    let created = cms.create(&PostParams::default(), &cm).await?;

    assert_eq!(namespaces.get("shop").await?.metadata.uid, ns.metadata.uid);
    let read = cms.get("settings").await?;
    assert_eq!(read.metadata.uid, created.metadata.uid);
    assert_eq!(read.data, Some(data));

    // A LIST at "0", a paged consistent LIST, and a watch from the created version, as an
    // informer makes them (kube leaves `resourceVersion=0` out of a LIST with a limit).
    assert_eq!(
        cms.list(&ListParams::default().match_any())
            .await?
            .items
            .len(),
        1
    );
    assert_eq!(
        cms.list(&ListParams::default().limit(5)).await?.items.len(),
        1
    );
    let rv = created
        .metadata
        .resource_version
        .clone()
        .expect("a resourceVersion");
    let watch = cms
        .watch(&WatchParams::default().timeout(30), &rv)
        .await?
        .boxed();

    let admin_in_shop = |e: &kube_envtest::AuditEvent| {
        e.user.username == "admin"
            && e.resource() == Some("configmaps")
            && e.namespace() == Some("shop")
    };
    let list = env
        .wait_for_audit_event(WAIT, |e| admin_in_shop(e) && e.verb == "list")
        .await?;
    assert_eq!(list.resource_version().as_deref(), Some("0"));
    assert_eq!(list.code(), Some(200));
    assert_eq!(list.stage, Stage::ResponseComplete);
    let paged = env
        .wait_for_audit_event(WAIT, |e| {
            admin_in_shop(e) && e.verb == "list" && e.limit().is_some()
        })
        .await?;
    assert_eq!((paged.limit(), paged.resource_version()), (Some(5), None));

    // A watch is logged when it starts (it is open), and again when it ends.
    let started_watch = env
        .wait_for_audit_event(WAIT, |e| admin_in_shop(e) && e.is_watch() && e.is_request())
        .await?;
    assert_eq!(started_watch.stage, Stage::ResponseStarted);
    assert_eq!(started_watch.resource_version(), Some(rv));
    assert_eq!(started_watch.timeout_seconds(), Some(30));
    assert_eq!(started_watch.allow_watch_bookmarks(), Some(true));
    drop(watch);
    let id = started_watch.audit_id.clone();
    let ended = env
        .wait_for_audit_event(WAIT, |e| {
            e.audit_id == id && e.stage == Stage::ResponseComplete
        })
        .await?;
    assert!(ended.stage_timestamp >= started_watch.stage_timestamp);

    let create = env
        .wait_for_audit_event(WAIT, |e| admin_in_shop(e) && e.verb == "create")
        .await?;
    assert_eq!(
        (create.name(), create.code()),
        (Some("settings"), Some(201))
    );
    // Counting each request once: create, get, two lists in `shop` by admin, and one watch.
    let mine: Vec<_> = env
        .audit_requests()?
        .into_iter()
        .filter(admin_in_shop)
        .collect();
    let verbs: Vec<&str> = mine.iter().map(|e| e.verb.as_str()).collect();
    assert_eq!(
        verbs,
        ["create", "get", "list", "list", "watch"],
        "{mine:#?}"
    );

    // With --audit-log-mode=blocking a small response reaches the client only after its
    // event is in the file: reading the log at once finds it, every time.
    for i in 0..20 {
        let uri = format!("/api/v1/namespaces/shop/configmaps?labelSelector=probe%3D{i}");
        client
            .request_text(http::Request::get(uri).body(Vec::new())?)
            .await?;
        let selector = format!("probe={i}");
        let events = env.audit_events()?;
        let found = events
            .iter()
            .any(|e| e.label_selector().as_deref() == Some(&selector));
        assert!(
            found,
            "request {i} was not in the audit log when its response arrived"
        );
    }
    Ok(())
}

#[tokio::test]
async fn kubeconfig_file_and_service_account_tokens_work() -> Result<(), Box<dyn std::error::Error>>
{
    let Some(env) = Environment::start_or_skip(EnvironmentOptions::new().audit_log(false)).await?
    else {
        return Ok(());
    };
    assert!(env.audit_events().is_err(), "the audit log is off");

    // The kubeconfig file, read as kubectl would, gives a working client (CA trusted).
    let copy = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("envtest-kubeconfig");
    env.write_kubeconfig(&copy)?;
    assert_eq!(std::fs::read(&copy)?, std::fs::read(env.kubeconfig_path())?);
    let kubeconfig = Kubeconfig::read_from(&copy)?;
    assert_eq!(
        kubeconfig.clusters[0]
            .cluster
            .as_ref()
            .unwrap()
            .server
            .as_deref(),
        Some(env.url())
    );
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    assert!(!config.accept_invalid_certs);
    let from_file = kube::Client::try_from(config)?;
    let names: Vec<_> = Api::<Namespace>::all(from_file)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|ns| ns.metadata.name)
        .collect();
    assert!(names.iter().any(|n| n == "default"), "{names:?}");

    // The ECDSA service-account key is accepted: TokenRequest returns an ES256 JWT.
    let sas: Api<ServiceAccount> = Api::namespaced(env.client(), "default");
    sas.create(
        &PostParams::default(),
        &ServiceAccount {
            metadata: meta("robot"),
            ..Default::default()
        },
    )
    .await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec!["test".into()]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = sas
        .create_token_request("robot", &PostParams::default(), &request)
        .await?;
    let jwt = token.status.and_then(|s| s.token).expect("a token");
    let header = jwt.split('.').next().expect("a JWT header");
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header)?;
    let header: serde_json::Value = serde_json::from_slice(&header)?;
    assert_eq!(header["alg"], "ES256");

    // The same token and CA reach the server through the proxy.
    let through_proxy: Api<Namespace> = Api::all(env.partitionable_client());
    assert!(through_proxy.get("default").await.is_ok());
    Ok(())
}
