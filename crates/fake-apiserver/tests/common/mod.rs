//! Test helpers: a plain hyper HTTP/1.1 client, a watch line reader, and a JSON shape
//! comparison against captures from a real API server.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

use bytes::Bytes;
use fake_apiserver::{FakeApiServer, ServerConfig};
use http_body_util::{BodyExt, Full};
use hyper::{HeaderMap, Method, Request, body::Incoming};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// A server with a `demo` namespace.
pub async fn server(config: ServerConfig) -> FakeApiServer {
    FakeApiServer::start(config.namespaces(["demo"]))
        .await
        .expect("server starts")
}

pub fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "demo"}, "data": {"k": name}})
}

pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

async fn send(server: &FakeApiServer, req: Request<Full<Bytes>>) -> hyper::Response<Incoming> {
    let stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender.send_request(req).await.unwrap()
}

fn build(
    method: Method,
    uri: &str,
    content_type: &str,
    body: Option<&Value>,
) -> Request<Full<Bytes>> {
    let body = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "127.0.0.1")
        .header("content-type", content_type)
        .header("user-agent", "conformance-test/1.0")
        .body(Full::new(body))
        .unwrap()
}

/// A request whose whole body is read.
pub async fn call(server: &FakeApiServer, method: Method, uri: &str, body: Option<&Value>) -> Resp {
    call_with(server, method, uri, "application/json", body).await
}

pub async fn call_with(
    server: &FakeApiServer,
    method: Method,
    uri: &str,
    content_type: &str,
    body: Option<&Value>,
) -> Resp {
    read(send(server, build(method, uri, content_type, body)).await).await
}

async fn read(resp: hyper::Response<Incoming>) -> Resp {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Resp {
        status,
        headers,
        body,
    }
}

pub async fn get(server: &FakeApiServer, uri: &str) -> Resp {
    call(server, Method::GET, uri, None).await
}

/// A GET with an `Accept` header (e.g. kubectl's Table request).
pub async fn call_accepting(server: &FakeApiServer, uri: &str, accept: &str) -> Resp {
    let mut req = build(Method::GET, uri, "application/json", None);
    req.headers_mut().insert("accept", accept.parse().unwrap());
    read(send(server, req).await).await
}

/// Reads a watch (or any streamed) response line by line.
pub struct Lines {
    pub status: u16,
    pub headers: HeaderMap,
    body: Incoming,
    buf: Vec<u8>,
}

impl Lines {
    pub async fn open(server: &FakeApiServer, uri: &str) -> Self {
        Self::open_accepting(server, uri, "application/json").await
    }

    pub async fn open_accepting(server: &FakeApiServer, uri: &str, accept: &str) -> Self {
        let mut req = build(Method::GET, uri, "application/json", None);
        req.headers_mut().insert("accept", accept.parse().unwrap());
        let resp = send(server, req).await;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        Self {
            status,
            headers,
            body: resp.into_body(),
            buf: Vec::new(),
        }
    }

    /// The next raw line; `Ok(None)` at a clean end, `Err` if the connection broke.
    pub async fn next_raw(&mut self) -> Result<Option<String>, String> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Ok(Some(
                    String::from_utf8_lossy(&line[..line.len() - 1]).into_owned(),
                ));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(e.to_string()),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
            }
        }
    }

    /// The next line as JSON.
    pub async fn next(&mut self) -> Option<Value> {
        let line = self.next_raw().await.expect("stream broke")?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line ({e}): {line}")))
    }

    /// The next `n` events, skipping bookmarks.
    pub async fn events(&mut self, n: usize) -> Vec<Value> {
        let mut out = Vec::new();
        while out.len() < n {
            let event = self.next().await.expect("stream ended early");
            if event["type"] != "BOOKMARK" {
                out.push(event);
            }
        }
        out
    }
}

/// The capture `name` from tests/captures.
pub fn capture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/captures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn capture_json(name: &str) -> Value {
    serde_json::from_str(&capture(name)).unwrap()
}

/// Asserts that `ours` has the shape of `real`: the same keys at every level (objects), the
/// same JSON types, arrays compared by their first element. `skip` lists keys whose presence
/// depends on the data (compared elsewhere).
pub fn assert_same_shape(ours: &Value, real: &Value, path: &str) {
    match (ours, real) {
        (Value::Object(a), Value::Object(b)) => {
            let mut ka: Vec<&String> = a.keys().collect();
            let mut kb: Vec<&String> = b.keys().collect();
            ka.sort();
            kb.sort();
            assert_eq!(ka, kb, "keys differ at {path}\nours: {ours}\nreal: {real}");
            for (k, v) in a {
                // Field sets and data are the object's own content, not the server's shape.
                if matches!(k.as_str(), "fieldsV1" | "data" | "labels") {
                    continue;
                }
                assert_same_shape(v, &b[k], &format!("{path}.{k}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if let (Some(x), Some(y)) = (a.first(), b.first()) {
                assert_same_shape(x, y, &format!("{path}[0]"));
            }
        }
        (a, b) => {
            let kind = |v: &Value| match v {
                Value::Null => "null",
                Value::Bool(_) => "bool",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            };
            assert_eq!(
                kind(a),
                kind(b),
                "type differs at {path}: ours {a}, real {b}"
            );
        }
    }
}

/// Asserts that two `Status` objects agree on everything but the names in their messages.
pub fn assert_same_status(ours: &Value, real: &Value) {
    assert_same_shape(ours, real, "status");
    for field in ["kind", "apiVersion", "status", "reason", "code"] {
        assert_eq!(
            ours[field], real[field],
            "{field}: ours {ours}\nreal {real}"
        );
    }
    let causes = |v: &Value| -> Vec<(Value, Value)> {
        v["details"]["causes"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|c| (c["reason"].clone(), c["field"].clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(causes(ours), causes(real));
}
