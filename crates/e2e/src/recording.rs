//! A client that records how each answer came: the request's URI and the answer's content
//! type (which encoding the server chose).

use std::sync::Arc;

use parking_lot::Mutex;

/// Each answer's request URI and content type, in order.
pub type Answers = Arc<Mutex<Vec<(String, String)>>>;

/// `client`, recording the content type of every answer it gets.
pub fn recording(client: kube::Client) -> (kube::Client, Answers) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (client, log) = (client.clone(), log.clone());
        let uri = request.uri().to_string();
        async move {
            let response = client.send(request).await?;
            let content_type = response
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            log.lock().push((uri, content_type));
            Ok::<_, kube::Error>(response)
        }
    });
    (kube::Client::new(service, "default"), seen)
}
