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
    /// The client could not be built (an HTTPS server without a TLS feature of `kube`).
    #[error("cannot build a client: {0}")]
    Client(#[source] kube::Error),
}

/// A parsed kubeconfig: where and who, the token apart.
pub(crate) struct Parsed {
    pub(crate) config: kube::Config,
    pub(crate) token: Option<String>,
    /// Everything but the token, to tell a token rotation from a new identity.
    pub(crate) identity: String,
}

/// Parses `text` (its current context).
pub(crate) async fn parse(text: &str) -> Result<Parsed, MemberError> {
    let kubeconfig =
        Kubeconfig::from_yaml(text).map_err(|e| MemberError::Kubeconfig(e.to_string()))?;
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
    Ok(Parsed {
        config,
        token,
        identity,
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
        let first = parse(&kubeconfig(&server, "old-token")).await.unwrap();
        let rotated = parse(&kubeconfig(&server, "new-token")).await.unwrap();
        assert_eq!(first.identity, rotated.identity, "only the token differs");
        let moved = parse(&kubeconfig("http://127.0.0.1:1", "old-token"))
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
        let Err(error) = parse("not: [a kubeconfig").await else {
            panic!("garbage parsed");
        };
        assert!(
            error.to_string().contains("not a usable kubeconfig"),
            "{error}"
        );
    }
}
