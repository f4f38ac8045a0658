//! [`Backend`]: fake-apiserver or a real kube-apiserver, behind one interface.

use std::time::Duration;

use fake_apiserver::{FakeApiServer, Gvr, ResourceType, ServerConfig, Verb};

use crate::crd;
use kube_envtest::{Environment, EnvironmentOptions, TcpProxy};

/// How a backend is set up.
#[derive(Debug, Clone, Default)]
pub struct BackendOptions {
    /// Compact the history this often (the real server's `--etcd-compaction-interval`);
    /// the fake compacts on [`Backend::compact`] only.
    pub compaction: Option<Duration>,
    /// Resources served without the real server's watch cache, so that a compacted
    /// resourceVersion gets 410 at once (`--watch-cache-sizes=<resource>#0`).
    pub uncached: Vec<&'static str>,
    /// Custom resources to serve, as `(group, plural, kind)`: namespaced, version `v1`, any
    /// fields (a CRD on the real server, a registered type on the fake).
    pub custom: Vec<(&'static str, &'static str, &'static str)>,
    /// Feature gates turned on in the real server (`--feature-gates=NAME=true`), and what
    /// they switch on in the fake (`ShardedListAndWatch`: `shardSelector` honoured; off, as
    /// on the real server, without it).
    pub feature_gates: Vec<&'static str>,
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `list`, `watch`, `get`, `create`, `update`, `patch`, `delete`.
    pub verb: String,
    /// The resource (plural).
    pub resource: Option<String>,
    /// The namespace in the path, if any.
    pub namespace: Option<String>,
    /// The `resourceVersion` query parameter.
    pub resource_version: Option<String>,
    /// `sendInitialEvents=true` (a streaming list).
    pub send_initial_events: bool,
    /// The `limit` query parameter.
    pub limit: Option<u64>,
    /// Whether it carried a continue token.
    pub continued: bool,
    /// The HTTP status answered.
    pub code: Option<u16>,
}

impl Request {
    /// A LIST or a streaming list: a sync of the whole collection.
    pub fn is_sync(&self) -> bool {
        self.verb == "list" || (self.verb == "watch" && self.send_initial_events)
    }
}

enum Server {
    Fake(FakeApiServer),
    Real(Box<Environment>),
}

/// A server for a scenario, with a proxy in front that can partition the network.
pub struct Backend {
    server: Server,
    proxy: TcpProxy,
    direct: kube::Client,
    proxied: kube::Client,
    proxied_config: kube::Config,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("name", &self.name())
            .finish()
    }
}

impl Backend {
    /// fake-apiserver, in this process.
    pub async fn fake(options: BackendOptions) -> Backend {
        let sharded = options.feature_gates.contains(&"ShardedListAndWatch");
        let config = ServerConfig::default().shard_selectors(sharded);
        let config = options
            .custom
            .iter()
            .fold(config, |config, (group, plural, kind)| {
                config.resource(ResourceType::namespaced(
                    Gvr::new(group, "v1", plural),
                    kind,
                ))
            });
        let server = FakeApiServer::start(config)
            .await
            .expect("fake-apiserver starts");
        let proxy = TcpProxy::start(server.addr().port())
            .await
            .expect("a free port");
        let url = format!("http://127.0.0.1:{}", proxy.port());
        let config = kube::Config::new(url.parse().expect("a URL"));
        let proxied = kube::Client::try_from(config.clone()).expect("a client");
        let direct = server.client().expect("a client");
        Backend {
            server: Server::Fake(server),
            proxy,
            direct,
            proxied,
            proxied_config: config,
        }
    }

    /// A real kube-apiserver and etcd, or `None` (with a loud banner) without the binaries.
    pub async fn real(options: BackendOptions, test: &str) -> Option<Backend> {
        let mut env_options = EnvironmentOptions::new();
        let mut gates: Vec<String> = options
            .feature_gates
            .iter()
            .map(|g| format!("{g}=true"))
            .collect();
        if let Some(every) = options.compaction {
            env_options = env_options.compaction_interval(every);
            gates.push("ListFromCacheSnapshot=false".to_owned());
        }
        if !gates.is_empty() {
            env_options = env_options.apiserver_arg(format!("--feature-gates={}", gates.join(",")));
        }
        if !options.uncached.is_empty() {
            let sizes: Vec<String> = options.uncached.iter().map(|r| format!("{r}#0")).collect();
            env_options =
                env_options.apiserver_arg(format!("--watch-cache-sizes={}", sizes.join(",")));
        }
        let env = match Environment::start_or_skip(env_options).await {
            Ok(Some(env)) => env,
            Ok(None) => {
                eprintln!("e2e {test}: the real-server half SKIPPED (no KUBEBUILDER_ASSETS)");
                return None;
            }
            Err(err) => panic!("the real API server did not start: {err}"),
        };
        for (group, plural, kind) in &options.custom {
            crd::install(&env.client(), group, plural, kind).await;
        }
        let proxy = TcpProxy::start(env.port()).await.expect("a free port");
        let mut config = env.config();
        config.cluster_url = format!("https://127.0.0.1:{}", proxy.port())
            .parse()
            .expect("a URL");
        let proxied = kube::Client::try_from(config.clone()).expect("a client");
        Some(Backend {
            direct: env.client(),
            server: Server::Real(Box::new(env)),
            proxy,
            proxied,
            proxied_config: config,
        })
    }

    /// `fake` or `real`, for messages.
    pub fn name(&self) -> &'static str {
        match self.server {
            Server::Fake(_) => "fake",
            Server::Real(_) => "real",
        }
    }

    /// A client straight to the server: the test's own reads and writes.
    pub fn client(&self) -> kube::Client {
        self.direct.clone()
    }

    /// A client through the partitionable proxy: give it to the code under test.
    pub fn informer_client(&self) -> kube::Client {
        self.proxied.clone()
    }

    /// A kubeconfig (JSON) that reaches the server through the partitionable proxy, as the
    /// admin: for code under test that makes its own client (a fleet's member).
    pub fn kubeconfig(&self) -> String {
        let server = match &self.server {
            Server::Fake(_) => format!("http://127.0.0.1:{}", self.proxy.port()),
            Server::Real(_) => format!("https://127.0.0.1:{}", self.proxy.port()),
        };
        let mut kubeconfig = match &self.server {
            Server::Fake(_) => serde_json::json!({
                "apiVersion": "v1", "kind": "Config", "current-context": "c",
                "clusters": [{"name": "k", "cluster": {}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            }),
            Server::Real(env) => serde_json::to_value(env.kubeconfig()).expect("JSON"),
        };
        kubeconfig["clusters"][0]["cluster"]["server"] = server.into();
        kubeconfig.to_string()
    }

    /// A client of its own through the partitionable proxy: unlike
    /// [`informer_client`](Self::informer_client)'s clones, which share the backend's
    /// connection pool, dropping every clone of it closes its connections (and ends their
    /// tasks).
    pub fn new_informer_client(&self) -> kube::Client {
        kube::Client::try_from(self.proxied_config.clone()).expect("a client")
    }

    /// A proxy of its own in front of the server, and a client through it: scenarios that
    /// run side by side each partition their own replicas, not the others'.
    pub async fn another_proxy(&self) -> (TcpProxy, kube::Client) {
        let (port, mut config) = match &self.server {
            Server::Fake(server) => (
                server.addr().port(),
                kube::Config::new("http://127.0.0.1".parse().expect("a URL")),
            ),
            Server::Real(env) => (env.port(), env.config()),
        };
        let proxy = TcpProxy::start(port).await.expect("a free port");
        let scheme = match &self.server {
            Server::Fake(_) => "http",
            Server::Real(_) => "https",
        };
        config.cluster_url = format!("{scheme}://127.0.0.1:{}", proxy.port())
            .parse()
            .expect("a URL");
        let client = kube::Client::try_from(config).expect("a client");
        (proxy, client)
    }

    /// Runs kubectl (as found on the PATH) against this server, directly; `None` (with a
    /// note) when kubectl is not installed.
    ///
    /// # Panics
    /// When kubectl fails: the panic carries what it printed.
    pub async fn kubectl(&self, args: &[&str]) -> Option<String> {
        let (ok, text) = self.kubectl_result(args).await?;
        assert!(ok, "kubectl {args:?} ({}) failed: {text}", self.name());
        Some(text)
    }

    /// [`Backend::kubectl`] for a command that may fail: whether it succeeded, and what it
    /// printed (stdout, then stderr).
    pub async fn kubectl_result(&self, args: &[&str]) -> Option<(bool, String)> {
        let mut command = std::process::Command::new("kubectl");
        match &self.server {
            Server::Fake(server) => command
                .arg(format!("--server={}", server.url()))
                .env("KUBECONFIG", "/dev/null"),
            Server::Real(env) => {
                command.arg(format!("--kubeconfig={}", env.kubeconfig_path().display()))
            }
        };
        command.args(args);
        let what = format!("kubectl {args:?} ({})", self.name());
        let out = match tokio::task::spawn_blocking(move || command.output())
            .await
            .expect("kubectl's thread")
        {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!(
                    "{what}: SKIPPED, kubectl is not installed (Debian: apt-get install kubectl)"
                );
                return None;
            }
            Err(e) => panic!("{what} did not run: {e}"),
        };
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Some((out.status.success(), text))
    }

    /// Cuts the proxy's network: requests and watches through it go silent.
    pub fn partition(&self) {
        self.proxy.partition();
    }

    /// Ends a partition.
    pub fn heal(&self) {
        self.proxy.heal();
    }

    /// Restarts the API server: same address, same data, watch history lost.
    pub async fn restart(&mut self) {
        match &mut self.server {
            Server::Fake(server) => server.restart(),
            Server::Real(env) => env
                .restart_apiserver()
                .await
                .expect("the API server restarts"),
        }
    }

    /// Makes every resourceVersion written so far too old to watch from: the fake compacts
    /// at once; the real server is waited for through three compaction intervals and two
    /// seconds (it must be started with [`BackendOptions::compaction`] and the resource
    /// uncached). kube-apiserver compacts on its own timer to the revision it saw one tick
    /// before, so two ticks suffice on a quiet machine; the third and the seconds are for
    /// a timer that fires late on a busy one.
    pub async fn compact(&self, interval: Duration) {
        match &self.server {
            Server::Fake(server) => server.compact(),
            Server::Real(_) => tokio::time::sleep(interval * 3 + Duration::from_secs(2)).await,
        }
    }

    /// Every request so far, oldest first (one per request, whatever the log's stages).
    pub fn requests(&self) -> Vec<Request> {
        match &self.server {
            Server::Fake(server) => server
                .requests()
                .into_iter()
                .filter_map(|r| {
                    let verb = match r.verb? {
                        Verb::Get => "get",
                        Verb::List => "list",
                        Verb::Watch => "watch",
                        Verb::Create => "create",
                        Verb::Update => "update",
                        Verb::Patch => "patch",
                        Verb::Delete => "delete",
                    };
                    Some(Request {
                        verb: verb.to_owned(),
                        resource_version: r.param("resourceVersion").map(str::to_owned),
                        send_initial_events: r.param("sendInitialEvents") == Some("true"),
                        limit: r.param("limit").and_then(|l| l.parse().ok()),
                        continued: r.param("continue").is_some(),
                        code: Some(r.status),
                        namespace: namespace_of(&r.path),
                        resource: r.resource,
                    })
                })
                .collect(),
            Server::Real(env) => env
                .audit_requests()
                .expect("the audit log reads")
                .into_iter()
                .map(|e| Request {
                    verb: e.verb.clone(),
                    resource: e.resource().map(str::to_owned),
                    namespace: e.namespace().map(str::to_owned),
                    resource_version: e.resource_version(),
                    send_initial_events: e.send_initial_events() == Some(true),
                    limit: e.limit(),
                    continued: e.continue_token().is_some(),
                    code: e.code(),
                })
                .collect(),
        }
    }

    /// The requests for `resource` in `namespace` so far (the real server's own
    /// controllers watch resources too, in their namespaces).
    pub fn requests_for(&self, resource: &str, namespace: &str) -> Vec<Request> {
        let all = self.requests();
        all.into_iter()
            .filter(|r| r.resource.as_deref() == Some(resource))
            .filter(|r| r.namespace.as_deref() == Some(namespace))
            .collect()
    }
}

/// The namespace of an API path (`.../namespaces/<ns>/<resource>...`).
fn namespace_of(path: &str) -> Option<String> {
    let mut parts = path.split('/');
    parts.find(|p| *p == "namespaces")?;
    let ns = parts.next()?;
    parts.next().map(|_| ns.to_owned())
}
