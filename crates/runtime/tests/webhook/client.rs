//! An HTTPS client for the webhook tests: one connection, trusting one CA, that reports the
//! certificate the server presented.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::task::JoinSet;

pub(crate) struct Connection {
    sender: SendRequest<Full<Bytes>>,
    pub(crate) presented: CertificateDer<'static>,
    _driver: JoinSet<()>,
}

/// A TLS stream to `addr` that trusts only `ca_pem`, for writing raw HTTP.
pub(crate) async fn tls_stream(
    addr: SocketAddr,
    ca_pem: &str,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(
        rustls::crypto::ring::default_provider().into(),
    )
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").expect("an IP address");
    connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())
}

/// Opens a TLS connection to `addr` that trusts only `ca_pem`.
pub(crate) async fn connect(addr: SocketAddr, ca_pem: &str) -> Result<Connection, String> {
    let tls = tls_stream(addr, ca_pem).await?;
    let presented = tls
        .get_ref()
        .1
        .peer_certificates()
        .expect("a server certificate")[0]
        .clone()
        .into_owned();
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    let mut driver = JoinSet::new();
    driver.spawn(async move {
        let _ = connection.await;
    });
    Ok(Connection {
        sender,
        presented,
        _driver: driver,
    })
}

impl Connection {
    /// Sends a request on this connection; the status and body of the answer.
    pub(crate) async fn send(&mut self, request: http::Request<Full<Bytes>>) -> (u16, Vec<u8>) {
        let response = self
            .sender
            .send_request(request)
            .await
            .expect("the server answers on the same connection");
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, body.to_vec())
    }

    /// POSTs `body` as JSON to `path`; the status and the decoded answer (or the text).
    pub(crate) async fn post(
        &mut self,
        path: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let request = http::Request::post(path)
            .header("content-type", "application/json")
            .header("host", "127.0.0.1")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        let (status, body) = self.send(request).await;
        let value = serde_json::from_slice(&body)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&body).into()));
        (status, value)
    }
}

/// The time a hung handler's refusal says it had: "the handler had 599.8ms of it" (or
/// "1.74s").
pub(crate) fn handler_had(message: &str) -> std::time::Duration {
    let text = message
        .split("the handler had ")
        .nth(1)
        .and_then(|rest| rest.split(['"', ' ', ',']).next())
        .unwrap_or_else(|| panic!("no duration in {message}"));
    let (number, scale) = match text.strip_suffix("ms") {
        Some(ms) => (ms, 1e-3),
        None => (text.trim_end_matches('s'), 1.0),
    };
    std::time::Duration::from_secs_f64(number.parse::<f64>().expect("a number") * scale)
}
