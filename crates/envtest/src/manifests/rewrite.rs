//! Webhook client configurations pointed at the local webhook server: the path a
//! configuration names (`service.path`, or its URL's path) is kept, the host becomes
//! `127.0.0.1:PORT`, and the environment's CA is the `caBundle` — as controller-runtime's
//! envtest rewrites them.

use serde_json::{Value, json};

use super::LocalWebhooks;

/// The path a `clientConfig` sends to: its service's path, or its URL's, or `/`.
fn path_of(client_config: &Value) -> String {
    if let Some(path) = client_config["service"]["path"].as_str() {
        return path.to_owned();
    }
    let url = client_config["url"].as_str().unwrap_or_default();
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    match after_scheme.find('/') {
        Some(slash) => after_scheme[slash..].to_owned(),
        None => "/".to_owned(),
    }
}

fn local(client_config: &Value, local: &LocalWebhooks) -> Value {
    json!({
        "url": local.url(&path_of(client_config)),
        "caBundle": local.certs().ca_bundle(),
    })
}

/// Every webhook of a Mutating/ValidatingWebhookConfiguration, pointed at `local`.
pub(super) fn webhook_configuration(object: &mut Value, to: &LocalWebhooks) {
    if let Some(Value::Array(webhooks)) = object.get_mut("webhooks") {
        for webhook in webhooks {
            webhook["clientConfig"] = local(&webhook["clientConfig"], to);
        }
    }
}

/// A CRD's conversion webhook (strategy `Webhook`), pointed at `local`; other CRDs as
/// they are.
pub(super) fn crd_conversion(object: &mut Value, to: &LocalWebhooks) {
    let conversion = &mut object["spec"]["conversion"];
    if conversion["strategy"] != "Webhook" {
        return;
    }
    let client_config = &mut conversion["webhook"]["clientConfig"];
    *client_config = local(client_config, to);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> (crate::tempdir::TempDir, LocalWebhooks) {
        let dir = crate::tempdir::TempDir::new(false).unwrap();
        let webhooks = LocalWebhooks::new(9443, dir.path().to_owned()).unwrap();
        (dir, webhooks)
    }

    #[test]
    fn service_and_url_configs_keep_their_path_and_trust_the_local_ca() {
        let (_dir, to) = local();
        let mut config = json!({"kind": "ValidatingWebhookConfiguration", "webhooks": [
            {"name": "a", "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/validate-v1-widget"}}},
            {"name": "b", "clientConfig": {"url": "https://example.com:8443/mutate?x=1"}},
            {"name": "c", "clientConfig": {"service": {"name": "s", "namespace": "n"}}},
        ]});
        webhook_configuration(&mut config, &to);
        let urls: Vec<&str> = (0..3)
            .map(|i| {
                config["webhooks"][i]["clientConfig"]["url"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(
            urls,
            [
                "https://127.0.0.1:9443/validate-v1-widget",
                "https://127.0.0.1:9443/mutate?x=1",
                "https://127.0.0.1:9443/",
            ]
        );
        let bundle = &config["webhooks"][0]["clientConfig"]["caBundle"];
        assert_eq!(bundle.as_str(), Some(to.certs().ca_bundle().as_str()));
        assert!(
            config["webhooks"][0]["clientConfig"]
                .get("service")
                .is_none()
        );
    }

    #[test]
    fn only_a_webhook_conversion_is_rewritten() {
        let (_dir, to) = local();
        let mut none = json!({"spec": {"conversion": {"strategy": "None"}}});
        crd_conversion(&mut none, &to);
        assert_eq!(none, json!({"spec": {"conversion": {"strategy": "None"}}}));
        let mut hook = json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/convert"}}}}}});
        crd_conversion(&mut hook, &to);
        let webhook = &hook["spec"]["conversion"]["webhook"];
        assert_eq!(
            webhook["clientConfig"]["url"],
            "https://127.0.0.1:9443/convert"
        );
        assert_eq!(webhook["conversionReviewVersions"], json!(["v1"]));
    }
}
