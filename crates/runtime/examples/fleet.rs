//! A fleet: a hub whose ConfigMap `fleet-example/settings` is copied into every member
//! cluster by one `FleetController` — a single-cluster reconcile, run per member. Members
//! come from kubeconfig files in a folder; one joins while it runs and one leaves.
//!
//! ```text
//! cargo run -p kube-informer-runtime --example fleet                  # 4 embedded fake-apiservers
//! cargo run -p kube-informer-runtime --example fleet -- --kubeconfigs DIR  # hub: your kubeconfig;
//!                                                                     # members: DIR/*.yaml (writes
//!                                                                     # fleet-example/settings in each)
//! RUST_LOG=info cargo run -p kube-informer-runtime --example fleet    # the runtime's logs
//! ```
//!
//! It ends with a verdict: every engaged member holds the hub's template (and, on the
//! embedded servers, the member that left is no longer engaged); exit status 0 when it
//! holds, 1 when it does not.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::ExitCode,
    sync::Arc,
    time::{Duration, Instant},
};

use fake_apiserver::{FakeApiServer, ServerConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{Api, ResourceExt, api::PostParams};
use kube_informer::{
    FactoryOptions, ObjectKey, ReadOnlyStore, Selectors,
    factory::{InformerSpec, SharedInformerFactory},
};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, ControllerOptions},
    fleet::{Cluster, Fleet, FleetController, MemberClients, sources},
};
use serde_json::json;
use tokio::task::JoinSet;

const NAMESPACE: &str = "fleet-example";

/// A member's context: its name, its client, and the hub's templates.
struct Member {
    name: String,
    client: kube::Client,
    templates: ReadOnlyStore<ConfigMap>,
}

/// Written for one cluster: the member's copy holds the hub template's data.
async fn reconcile(cm: Cached<ConfigMap>, member: Arc<Member>) -> Result<Action, kube::Error> {
    let name = match &cm {
        Cached::Present(cm) => cm.name_any(),
        Cached::Gone(key) => key.name().to_owned(),
    };
    let key = format!("{NAMESPACE}/{name}");
    let Some(template) = member.templates.get_by_key(&key) else {
        return Ok(Action::Done);
    };
    let api: Api<ConfigMap> = Api::namespaced(member.client.clone(), NAMESPACE);
    let pp = PostParams::default();
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(NAMESPACE.to_owned());
    let _ = Api::<Namespace>::all(member.client.clone())
        .create(&pp, &namespace)
        .await; // 409: it exists
    match api.get_opt(&name).await? {
        None => {
            let mut copy = ConfigMap::default();
            copy.metadata.name = Some(name.clone());
            copy.data = template.data.clone();
            api.create(&pp, &copy).await?;
            println!("{}: created {key}", member.name);
        }
        Some(mut copy) if copy.data != template.data => {
            copy.data = template.data.clone();
            api.replace(&name, &pp, &copy).await?;
            println!("{}: updated {key}", member.name);
        }
        Some(_) => {}
    }
    Ok(Action::Done)
}

/// The verdict's patience: every wait ends on its condition, or fails after this.
const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `done` holds (polled), or fails naming `what`.
async fn until(what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {PATIENCE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Whether each member's `fleet-example/settings` holds `data` (the hub template's): a
/// line per member, or the first member that does not.
pub(crate) async fn check(
    members: &[(String, kube::Client)],
    data: &Option<BTreeMap<String, String>>,
) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for (name, client) in members {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        match api.get_opt("settings").await {
            Ok(Some(copy)) if copy.data == *data => {
                lines.push(format!(
                    "{name}: settings {:?}",
                    copy.data.unwrap_or_default()
                ));
            }
            Ok(Some(copy)) => {
                return Err(format!(
                    "{name}: settings {:?}, the hub's {data:?}",
                    copy.data
                ));
            }
            Ok(None) => return Err(format!("{name}: no {NAMESPACE}/settings")),
            Err(e) => return Err(format!("{name}: {e}")),
        }
    }
    Ok(lines)
}

/// [`check`] until it holds, or the last reason it did not.
async fn verify(
    members: &[(String, kube::Client)],
    data: &Option<BTreeMap<String, String>>,
) -> Result<Vec<String>, String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match check(members, data).await {
            Ok(lines) => return Ok(lines),
            Err(why) if Instant::now() > deadline => return Err(why),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// A kubeconfig for a fake-apiserver.
fn kubeconfig(server: &FakeApiServer) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{{name: k, cluster: {{server: \"{}\"}}}}]\n\
         users: [{{name: u, user: {{token: example}}}}]\n\
         contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n",
        server.url()
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            println!("verdict: every member holds the hub's template");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("verdict: FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The members a folder names, sorted: the stems of its `*.yaml`, `*.yml`, `*.json` and
/// `*.kubeconfig` files (hidden ones left out), as `sources::kubeconfig_dir` reads it.
fn kubeconfig_names(dir: &std::path::Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let wanted = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| ["yaml", "yml", "json", "kubeconfig"].contains(&e));
        match path.file_stem().and_then(|s| s.to_str()) {
            Some(stem) if wanted && !stem.starts_with('.') => names.push(stem.to_owned()),
            _ => {}
        }
    }
    names.sort();
    Ok(names)
}

/// The example; the verdict's lines, or why it failed.
async fn run() -> Result<Vec<String>, Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args: Vec<String> = std::env::args().collect();
    let given = args
        .iter()
        .position(|a| a == "--kubeconfigs")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let mut servers = Vec::new();
    let (hub, dir, embedded) = match given {
        Some(dir) => (kube::Client::try_default().await?, dir, false),
        None => {
            let hub = FakeApiServer::start(ServerConfig::default().namespaces([NAMESPACE])).await?;
            let client = hub.client()?;
            servers.push(hub);
            let dir = std::env::temp_dir().join(format!("fleet-example-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            for name in ["east", "west"] {
                let member = FakeApiServer::start(ServerConfig::default()).await?;
                std::fs::write(dir.join(format!("{name}.yaml")), kubeconfig(&member))?;
                servers.push(member);
            }
            (client, dir, true)
        }
    };
    let _ = Api::<Namespace>::all(hub.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
        )
        .await;
    let templates_api: Api<ConfigMap> = Api::namespaced(hub.clone(), NAMESPACE);
    let template = json!({"metadata": {"name": "settings"}, "data": {"color": "blue"}});
    let _ = templates_api
        .create(&PostParams::default(), &serde_json::from_value(template)?)
        .await;

    // The hub's templates, and the members from the folder.
    let hub_factory = SharedInformerFactory::new(
        hub,
        FactoryOptions::default().selectors(Selectors::default().in_namespace(NAMESPACE)),
    );
    let templates = hub_factory.informer::<ConfigMap>();
    hub_factory.start();
    // The folder is ours, not a Secret anyone may write: its kubeconfigs may run their
    // cloud's exec plugin and name certificate files, as kubectl's do.
    let clients = MemberClients::default()
        .allow_exec(true)
        .allow_local_files(true);
    let fleet = Fleet::with_clients(FactoryOptions::default(), clients);
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let source = sources::kubeconfig_dir(&dir, Duration::from_millis(500));
    tasks.spawn({
        let (fleet, cancel) = (fleet.clone(), cancel.clone());
        async move { fleet.run(source, cancel).await }
    });
    let only_ours = || InformerSpec::new().selectors(Selectors::default().in_namespace(NAMESPACE));
    let controller = FleetController::<ConfigMap>::new_with(
        &fleet,
        only_ours,
        ControllerOptions::default()
            .name("fleet-example")
            .max_in_flight_per_group(Some(2)),
    )
    .watches_hub(&templates, |template: &ConfigMap| {
        vec![ObjectKey::new(Some(NAMESPACE), &template.name_any())]
    });
    let store = templates.store();
    let make_ctx = move |cluster: &Cluster| {
        Arc::new(Member {
            name: cluster.name().to_owned(),
            client: cluster.client().clone(),
            templates: store.clone(),
        })
    };
    tasks.spawn(controller.run(make_ctx, reconcile, |_, _, _| Action::Retry, cancel.clone()));

    let engaged = |want: &[&str]| {
        let mut have: Vec<String> = fleet.clusters().keys().cloned().collect();
        have.sort();
        have == want
    };
    let outcome = async {
        if embedded {
            until("east and west engaged", || engaged(&["east", "west"])).await?;
            println!("members: east, west");
            // One member joins, another leaves, and the template changes.
            let north = FakeApiServer::start(ServerConfig::default()).await?;
            std::fs::write(dir.join("north.yaml"), kubeconfig(&north))?;
            servers.push(north);
            std::fs::remove_file(dir.join("west.yaml"))?;
            let mut settings = templates_api.get("settings").await?;
            settings.data = Some([("color".to_owned(), "red".to_owned())].into());
            templates_api
                .replace("settings", &PostParams::default(), &settings)
                .await?;
            until("north joined, west left", || engaged(&["east", "north"])).await?;
            println!("members: east, north");
        } else {
            // Every kubeconfig of the folder, by the source's own rules: a member that never
            // joins fails the verdict.
            let names = kubeconfig_names(&dir)?;
            let want: Vec<&str> = names.iter().map(String::as_str).collect();
            if want.is_empty() {
                return Err(format!("no kubeconfig in {}", dir.display()).into());
            }
            until("every kubeconfig of the folder engaged", || engaged(&want)).await?;
            println!("members: {}", want.join(", "));
        }
        let template = templates_api.get("settings").await?;
        let members: Vec<(String, kube::Client)> = fleet
            .clusters()
            .iter()
            .map(|(name, cluster)| (name.clone(), cluster.client().clone()))
            .collect();
        Ok::<_, Box<dyn std::error::Error>>(verify(&members, &template.data).await?)
    }
    .await;
    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done?;
    }
    hub_factory.shutdown().await;
    if embedded {
        let _ = std::fs::remove_dir_all(&dir);
    }
    outcome
}
