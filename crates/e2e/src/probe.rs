//! A probe's GET of a manager's endpoint (`/readyz`, `/metrics`), as the kubelet sends it.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET path` on `addr` (plain HTTP, one request per connection): the status code and the
/// body.
///
/// # Panics
/// When nothing listens at `addr` or the answer is not HTTP.
pub async fn probe(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("the endpoint listens");
    let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let code = response
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .expect("an HTTP status line");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}
