//! A loopback TCP proxy in front of kube-apiserver that can be partitioned: the network
//! failures a client must survive, without touching the server.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use kube::config::Kubeconfig;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::Error;
use crate::kubeconfig::Endpoint;

/// A TCP proxy on `127.0.0.1` in front of the environment's kube-apiserver, with a client
/// that goes through it. TLS passes through unchanged (the serving certificate covers
/// `127.0.0.1`), so the client trusts the same CA and sends the same token.
///
/// - [`partition`](Proxy::partition): bytes stop flowing both ways on every open connection
///   (they are held, not dropped: no RST, no FIN, just silence, as when a network fails);
///   new connections are accepted by the kernel but never reach the server (black-holed).
/// - [`heal`](Proxy::heal): held bytes flow again and held connections go through, as
///   TCP resumes after a short partition.
/// - [`sever_connections`](Proxy::sever_connections): every open connection is closed (the
///   client sees EOF), as when a load balancer drops its connection table.
///
/// While kube-apiserver is down, a new connection is accepted and then closed at once (a
/// real client would see "connection refused" instead).
///
/// ```no_run
/// # async fn demo(env: &kube_envtest::Environment) {
/// let proxy = env.proxy();
/// let client = proxy.client(); // give this one to the code under test
/// proxy.partition();
/// // ... the client's requests and watches hang ...
/// proxy.heal();
/// # let _ = client;
/// # }
/// ```
pub struct Proxy {
    endpoint: Endpoint,
    tcp: TcpProxy,
}

/// The proxy's network part, usable in front of any loopback server (fake-apiserver too):
/// forwards `127.0.0.1:port()` to an upstream port, and can partition, heal and sever like
/// [`Proxy`].
///
/// ```no_run
/// # async fn demo() -> Result<(), std::io::Error> {
/// let proxy = kube_envtest::TcpProxy::start(8080).await?;
/// let url = format!("http://127.0.0.1:{}", proxy.port()); // point a client here
/// proxy.partition();
/// proxy.heal();
/// # let _ = url; Ok(())
/// # }
/// ```
pub struct TcpProxy {
    port: u16,
    state: watch::Sender<State>,
    open: Arc<AtomicUsize>,
    served: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

#[derive(Clone, Copy, Debug, Default)]
struct State {
    partitioned: bool,
    /// Bumped by `sever_connections`: connections from an older generation close.
    generation: u64,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards to `127.0.0.1:upstream_port`.
    pub async fn start(upstream_port: u16) -> Result<TcpProxy, std::io::Error> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let (state, rx) = watch::channel(State::default());
        let open = Arc::new(AtomicUsize::new(0));
        let served = Arc::new(AtomicU64::new(0));
        let counters = (open.clone(), served.clone());
        let task = tokio::spawn(accept_loop(listener, upstream_port, rx, counters));
        tracing::debug!(port, upstream_port, "partition proxy listening");
        Ok(TcpProxy {
            port,
            state,
            open,
            served,
            task,
        })
    }

    /// The bytes the server sent to clients through the proxy so far (TLS included):
    /// what a client read from the server, for benchmarks.
    pub fn bytes_served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Cuts the network: bytes stop both ways on open connections, new ones hang.
    pub fn partition(&self) {
        tracing::info!(port = self.port, "partition");
        self.state.send_modify(|s| s.partitioned = true);
    }

    /// Ends a partition: held bytes and connections go through.
    pub fn heal(&self) {
        tracing::info!(port = self.port, "heal");
        self.state.send_modify(|s| s.partitioned = false);
    }

    /// Whether the proxy is partitioned.
    pub fn is_partitioned(&self) -> bool {
        self.state.borrow().partitioned
    }

    /// Closes every connection open now (held ones included); later ones are unaffected.
    pub fn sever_connections(&self) {
        tracing::info!(port = self.port, "severing connections");
        self.state.send_modify(|s| s.generation += 1);
    }

    /// How many client connections are open through the proxy.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for TcpProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpProxy")
            .field("port", &self.port)
            .field("partitioned", &self.is_partitioned())
            .field("open_connections", &self.open_connections())
            .finish_non_exhaustive()
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every connection.
        self.task.abort();
    }
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `127.0.0.1:upstream_port`.
    pub(crate) async fn start(
        upstream_port: u16,
        ca_pem: &str,
        token: &str,
    ) -> Result<Proxy, Error> {
        let tcp = TcpProxy::start(upstream_port)
            .await
            .map_err(Error::NoFreePort)?;
        let url = format!("https://127.0.0.1:{}", tcp.port());
        let endpoint = Endpoint::new("envtest-proxy", url, ca_pem, token).await?;
        Ok(Proxy { endpoint, tcp })
    }

    /// `https://127.0.0.1:PORT` of the proxy.
    pub fn url(&self) -> &str {
        &self.endpoint.url
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.tcp.port()
    }

    /// A client that goes through the proxy (a clone of one client: they share connections).
    pub fn client(&self) -> kube::Client {
        self.endpoint.client.clone()
    }

    /// The client configuration for the proxy, to adjust (timeouts, retries) before building
    /// a client with `kube::Client::try_from`.
    pub fn config(&self) -> kube::Config {
        self.endpoint.config.clone()
    }

    /// A kubeconfig for the proxy.
    pub fn kubeconfig(&self) -> Kubeconfig {
        self.endpoint.kubeconfig.clone()
    }

    /// Cuts the network: bytes stop both ways on open connections, new ones hang.
    pub fn partition(&self) {
        self.tcp.partition();
    }

    /// Ends a partition: held bytes and connections go through.
    pub fn heal(&self) {
        self.tcp.heal();
    }

    /// Whether the proxy is partitioned.
    pub fn is_partitioned(&self) -> bool {
        self.tcp.is_partitioned()
    }

    /// Closes every connection open now (held ones included); later ones are unaffected.
    pub fn sever_connections(&self) {
        self.tcp.sever_connections();
    }

    /// How many client connections are open through the proxy.
    pub fn open_connections(&self) -> usize {
        self.tcp.open_connections()
    }

    /// The bytes the server sent through the proxy so far ([`TcpProxy::bytes_served`]).
    pub fn bytes_served(&self) -> u64 {
        self.tcp.bytes_served()
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("url", &self.endpoint.url)
            .field("partitioned", &self.is_partitioned())
            .field("open_connections", &self.open_connections())
            .finish_non_exhaustive()
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream_port: u16,
    state: watch::Receiver<State>,
    (open, served): (Arc<AtomicUsize>, Arc<AtomicU64>),
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let guard = OpenGuard::new(open.clone());
                    let served = served.clone();
                    connections.spawn(connection(stream, upstream_port, state.clone(), guard, served));
                }
                Err(err) => {
                    tracing::warn!(%err, "partition proxy: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Counts a connection as open for as long as it lives.
struct OpenGuard(Arc<AtomicUsize>);

impl OpenGuard {
    fn new(open: Arc<AtomicUsize>) -> OpenGuard {
        open.fetch_add(1, Ordering::SeqCst);
        OpenGuard(open)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn connection(
    client: TcpStream,
    upstream_port: u16,
    mut state: watch::Receiver<State>,
    _open: OpenGuard,
    served: Arc<AtomicU64>,
) {
    let generation = state.borrow().generation;
    // A connection made during a partition is held here, never reaching the server.
    if !passable(&mut state, generation).await {
        return;
    }
    let Ok(upstream) = TcpStream::connect(("127.0.0.1", upstream_port)).await else {
        return; // the server is down: close the client's connection
    };
    let _ = (client.set_nodelay(true), upstream.set_nodelay(true));
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    let (up, down) = (state.clone(), state.clone());
    let both = async {
        tokio::join!(
            pump(client_read, upstream_write, up, generation, None),
            pump(upstream_read, client_write, down, generation, Some(served)),
        )
    };
    tokio::select! {
        _ = both => {}
        () = severed(state, generation) => {}
    }
}

/// Waits while partitioned; `false` once the connection is severed or the proxy is gone.
async fn passable(state: &mut watch::Receiver<State>, generation: u64) -> bool {
    loop {
        let now = *state.borrow_and_update();
        if now.generation != generation {
            return false;
        }
        if !now.partitioned {
            return true;
        }
        if state.changed().await.is_err() {
            return false;
        }
    }
}

async fn severed(mut state: watch::Receiver<State>, generation: u64) {
    while state.borrow_and_update().generation == generation {
        if state.changed().await.is_err() {
            return;
        }
    }
}

/// Copies `from` to `to`, holding each chunk while partitioned; passes EOF on as a shutdown.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut state: watch::Receiver<State>,
    generation: u64,
    count: Option<Arc<AtomicU64>>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !passable(&mut state, generation).await {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if let Some(count) = &count {
            count.fetch_add(n as u64, Ordering::Relaxed);
        }
        if !passable(&mut state, generation).await || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
