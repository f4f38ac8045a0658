//! A member cluster's client from its kubeconfig, with its bearer token in a cell the fleet
//! can swap: a rotated token (a kubeconfig Secret updated with a new one) reaches every
//! request from then on, through the same client and the same informers — no new
//! connection pool, no relist.

use std::sync::Arc;

use http::{HeaderValue, header::AUTHORIZATION};
use kube::config::{KubeConfigOptions, Kubeconfig};
use parking_lot::RwLock;
use secrecy::ExposeSecret;

/// Why a kubeconfig gives no client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemberError {
    /// Not a kubeconfig (YAML or JSON), or no usable context in it.
    #[error("not a usable kubeconfig: {0}")]
    Kubeconfig(String),
    /// The client could not be built (an HTTPS server without a TLS feature of `kube`, an
    /// exec plugin that failed). Tried again with backoff.
    #[error("cannot build a client: {0}")]
    Client(#[source] kube::Error),
    /// The kubeconfig asks for what the fleet does not allow: to run a command (`exec`,
    /// `auth-provider`) or to read a file of the operator's (a token file, a certificate or
    /// key by path) — see [`MemberClients`](super::MemberClients).
    #[error("refused: {0}")]
    Refused(String),
    /// Building the client (its exec plugin) did not finish in time. Tried again with
    /// backoff.
    #[error("building the client did not finish within {0:?} (an exec plugin that hangs?)")]
    TimedOut(std::time::Duration),
}

impl MemberError {
    /// Whether trying again later may succeed (a plugin or a network that failed), as
    /// opposed to a kubeconfig that will fail the same way until it changes.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, Self::Client(_) | Self::TimedOut(_))
    }
}

/// What a kubeconfig may ask of the operator's process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Allowed {
    pub(crate) exec: bool,
    pub(crate) local_files: bool,
}

/// Refuses what `allowed` does not allow, in any user or cluster of `kubeconfig`.
fn check(kubeconfig: &Kubeconfig, allowed: Allowed) -> Result<(), MemberError> {
    let refuse = |what: &str, opt_in: &str| {
        Err(MemberError::Refused(format!(
            "the kubeconfig {what}, which a fleet does not allow by default (a Secret's \
             writer would run code or read files in the operator); allow it with \
             MemberClients::{opt_in}"
        )))
    };
    for user in kubeconfig
        .auth_infos
        .iter()
        .filter_map(|u| u.auth_info.as_ref())
    {
        if !allowed.exec && (user.exec.is_some() || user.auth_provider.is_some()) {
            return refuse("runs a command (exec or auth-provider)", "allow_exec");
        }
        let files = [&user.token_file, &user.client_certificate, &user.client_key];
        if !allowed.local_files && files.iter().any(|f| f.is_some()) {
            return refuse(
                "reads a local file (tokenFile, client-certificate or client-key)",
                "allow_local_files",
            );
        }
    }
    let clusters = kubeconfig
        .clusters
        .iter()
        .filter_map(|c| c.cluster.as_ref());
    if !allowed.local_files && clusters.clone().any(|c| c.certificate_authority.is_some()) {
        return refuse(
            "reads a local file (certificate-authority)",
            "allow_local_files",
        );
    }
    Ok(())
}

/// A parsed kubeconfig: where and who, the token apart.
pub(crate) struct Parsed {
    pub(crate) config: kube::Config,
    pub(crate) token: Option<String>,
    /// Everything but the token, to tell a token rotation from a new identity.
    pub(crate) identity: String,
    /// Whether building its client runs a command (an exec plugin), which blocks.
    pub(crate) runs_a_command: bool,
}

/// Parses `text` (its current context), refusing what `allowed` does not allow.
pub(crate) async fn parse(text: &str, allowed: Allowed) -> Result<Parsed, MemberError> {
    let kubeconfig =
        Kubeconfig::from_yaml(text).map_err(|e| MemberError::Kubeconfig(e.to_string()))?;
    check(&kubeconfig, allowed)?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| MemberError::Kubeconfig(e.to_string()))?;
    let token = config
        .auth_info
        .token
        .take()
        .map(|t| t.expose_secret().to_owned());
    // The credentials serialized whole (their Debug hides secrets: a new client key would
    // look the same).
    let credentials = serde_json::to_string(&config.auth_info).unwrap_or_default();
    let identity = format!(
        "{} {:?} {:?} {} {credentials}",
        config.cluster_url, config.root_cert, config.tls_server_name, config.accept_invalid_certs
    );
    let runs_a_command =
        config.auth_info.exec.is_some() || config.auth_info.auth_provider.is_some();
    Ok(Parsed {
        config,
        token,
        identity,
        runs_a_command,
    })
}

/// The token every request of a member's client carries; swapped on rotation.
pub(crate) type TokenCell = Arc<RwLock<Option<HeaderValue>>>;

fn header(token: Option<&str>) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token?)).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Sets the token the cell's requests carry.
pub(crate) fn set_token(cell: &TokenCell, token: Option<&str>) {
    *cell.write() = header(token);
}

/// A client for `parsed`, its token read from a new cell on every request.
pub(crate) fn client(parsed: Parsed) -> Result<(kube::Client, TokenCell), MemberError> {
    let cell: TokenCell = Arc::new(RwLock::new(header(parsed.token.as_deref())));
    let reading = cell.clone();
    let stamp =
        tower::util::MapRequestLayer::new(move |mut request: http::Request<kube::client::Body>| {
            if let Some(token) = reading.read().clone() {
                request.headers_mut().insert(AUTHORIZATION, token);
            }
            request
        });
    let builder =
        kube::client::ClientBuilder::try_from(parsed.config).map_err(MemberError::Client)?;
    Ok((builder.with_layer(&stamp).build(), cell))
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn kubeconfig(server: &str, token: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{{name: k, cluster: {{server: \"{server}\"}}}}]\n\
             users: [{{name: u, user: {{token: {token}}}}}]\n\
             contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n"
        )
    }

    /// Answers each request with an empty list, and says which token it carried.
    async fn one_request(listener: &tokio::net::TcpListener) -> String {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        let body = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[]}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(answer.as_bytes()).await.unwrap();
        let head = String::from_utf8(head).unwrap();
        head.lines()
            .find_map(|l| l.strip_prefix("authorization: "))
            .unwrap_or_default()
            .to_owned()
    }

    #[tokio::test]
    async fn a_swapped_token_reaches_the_next_request_of_the_same_client() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = format!("http://{}", listener.local_addr().unwrap());
        let first = parse(&kubeconfig(&server, "old-token"), Allowed::default())
            .await
            .unwrap();
        let rotated = parse(&kubeconfig(&server, "new-token"), Allowed::default())
            .await
            .unwrap();
        assert_eq!(first.identity, rotated.identity, "only the token differs");
        let moved = parse(
            &kubeconfig("http://127.0.0.1:1", "old-token"),
            Allowed::default(),
        )
        .await
        .unwrap();
        assert_ne!(first.identity, moved.identity);

        let (client, cell) = client(first).unwrap();
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::all(client);
        let params = kube::api::ListParams::default();
        let (seen, listed) = tokio::join!(one_request(&listener), api.list(&params));
        listed.unwrap();
        assert_eq!(seen, "Bearer old-token");
        set_token(&cell, rotated.token.as_deref());
        let (seen, listed) = tokio::join!(one_request(&listener), api.list(&params));
        listed.unwrap();
        assert_eq!(seen, "Bearer new-token");
    }

    #[tokio::test]
    async fn garbage_is_an_error_that_says_so() {
        let Err(error) = parse("not: [a kubeconfig", Allowed::default()).await else {
            panic!("garbage parsed");
        };
        assert!(
            error.to_string().contains("not a usable kubeconfig"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn exec_and_local_files_are_refused_unless_allowed() {
        let with_user = |user: &str| {
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
                 clusters: [{{name: k, cluster: {{server: \"http://127.0.0.1:1\"}}}}]\n\
                 users: [{{name: u, user: {user}}}]\n\
                 contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n"
            )
        };
        let exec =
            with_user("{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true}}");
        let file = with_user("{tokenFile: /etc/shadow}");
        for (text, opt_in) in [(&exec, "allow_exec"), (&file, "allow_local_files")] {
            let Err(error) = parse(text, Allowed::default()).await else {
                panic!("accepted: {text}");
            };
            assert!(error.to_string().contains(opt_in), "{error}");
            assert!(!error.is_transient());
        }
        let files = Allowed {
            exec: false,
            local_files: true,
        };
        assert!(
            parse(&exec, files).await.is_err(),
            "exec needs its own opt-in"
        );
    }
}
