//! The CA bundle written into what calls the webhooks: each webhook of the named
//! Mutating/ValidatingWebhookConfigurations, and the conversion webhook of the named CRDs.
//! Written only when it differs, so a GitOps tool or a person that reset it is corrected
//! at the next check, and a settled cluster sees no writes.

use std::collections::HashMap;

use base64::Engine as _;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use parking_lot::Mutex;
use serde_json::Value;

use super::{CertError, metrics, pki, plan::Trusted};

/// What receives the bundle.
#[derive(Clone, Debug, Default)]
pub(super) struct Targets {
    pub(super) mutating: Vec<String>,
    pub(super) validating: Vec<String>,
    pub(super) conversions: Vec<String>,
}

fn api(client: &kube::Client, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1", kind);
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// The client configs of `object` (each webhook's, or the CRD's conversion webhook's).
fn client_configs(object: &DynamicObject, conversion: bool) -> Vec<&Value> {
    if conversion {
        let config = &object.data["spec"]["conversion"]["webhook"]["clientConfig"];
        return config.is_object().then_some(config).into_iter().collect();
    }
    match object.data.get("webhooks") {
        Some(Value::Array(webhooks)) => webhooks
            .iter()
            .map(|w| &w["clientConfig"])
            .filter(|c| c.is_object())
            .collect(),
        _ => Vec::new(),
    }
}

/// Sets `caBundle` in each client config `object` names; whether anything changed.
fn set(object: &mut DynamicObject, bundle: &str, conversion: bool) -> bool {
    let wanted = Value::String(bundle.to_owned());
    let mut changed = false;
    let mut put = |client_config: &mut Value| {
        if client_config.is_object() && client_config["caBundle"] != wanted {
            client_config["caBundle"] = wanted.clone();
            changed = true;
        }
    };
    if conversion {
        put(&mut object.data["spec"]["conversion"]["webhook"]["clientConfig"]);
    } else if let Some(Value::Array(webhooks)) = object.data.get_mut("webhooks") {
        webhooks
            .iter_mut()
            .for_each(|w| put(&mut w["clientConfig"]));
    }
    changed
}

/// Each kind of target, its names, and whether it is a CRD's conversion.
fn kinds<'a>(
    client: &kube::Client,
    targets: &'a Targets,
) -> [(Api<DynamicObject>, &'a [String], bool); 3] {
    let reg = "admissionregistration.k8s.io";
    [
        (
            api(
                client,
                reg,
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
            ),
            &targets.mutating,
            false,
        ),
        (
            api(
                client,
                reg,
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
            ),
            &targets.validating,
            false,
        ),
        (
            api(
                client,
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "customresourcedefinitions",
            ),
            &targets.conversions,
            true,
        ),
    ]
}

/// What the targets trust now: the CAs of each client config's `caBundle`.
/// [`Trusted::Unwatched`] when none is named or none exists yet; [`Trusted::Unknown`]
/// (with a warning) when one could not be read.
pub(super) async fn observe(client: &kube::Client, targets: &Targets) -> Trusted {
    let mut configs = Vec::new();
    for (api, names, conversion) in kinds(client, targets) {
        for name in names {
            let object = match api.get_opt(name).await {
                Ok(Some(object)) => object,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(%name, %error, "cannot read which CAs the webhook configuration trusts: no CA is promoted");
                    return Trusted::Unknown;
                }
            };
            for config in client_configs(&object, conversion) {
                let encoded = config["caBundle"].as_str().unwrap_or_default();
                let pem = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .unwrap_or_default();
                let cas = pki::certificates(&String::from_utf8_lossy(&pem));
                configs.push(cas.into_iter().map(|(pem, _)| pem).collect());
            }
        }
    }
    match configs.is_empty() {
        true => Trusted::Unwatched,
        false => Trusted::Seen(configs),
    }
}

/// The bundle this replica last wrote into each target: one found changed since was
/// reverted by another writer.
pub(super) type Written = Mutex<HashMap<String, String>>;

/// Writes `bundle` (base64 PEM) wherever `targets` names. A target that does not exist is
/// skipped with a warning (it may not be applied yet); other failures are counted
/// (`webhook_certificate_injection_failures_total`) and returned. A target that no longer
/// holds what this replica wrote into it is written again and counted as `reverted`.
pub(super) async fn inject(
    client: &kube::Client,
    targets: &Targets,
    bundle: &str,
    written: &Written,
) -> Result<usize, CertError> {
    let mut count = 0;
    for (api, names, conversion) in kinds(client, targets) {
        for name in names {
            match put(&api, name, bundle, conversion).await {
                Ok(false) => {}
                Ok(true) => {
                    let before = written.lock().insert(name.clone(), bundle.to_owned());
                    if before.as_deref() == Some(bundle) {
                        tracing::warn!(target = %name, "another writer replaced the webhook CA bundle; written again");
                        metrics::injection_failed(name, "reverted");
                    }
                    count += 1;
                }
                Err(error) => {
                    let reason = match error {
                        CertError::Contended { .. } => "contended",
                        _ => "refused",
                    };
                    metrics::injection_failed(name, reason);
                    return Err(error);
                }
            }
        }
    }
    Ok(count)
}

/// Writes `bundle` into the object `name`, if it needs it; whether it was written. A
/// conflict (another replica, or another writer, got there first) reads it again.
async fn put(
    api: &Api<DynamicObject>,
    name: &str,
    bundle: &str,
    conversion: bool,
) -> Result<bool, CertError> {
    let what = || format!("{name} (for its caBundle)");
    super::write_again_on_conflict(what, move || async move {
        let Some(mut object) = api.get_opt(name).await.map_err(CertError::Inject)? else {
            tracing::warn!(%name, "cannot inject the webhook CA bundle: no such object (yet)");
            return Ok(Some(false));
        };
        if !set(&mut object, bundle, conversion) {
            return Ok(Some(false));
        }
        // With the resourceVersion read: a writer in between is a conflict, not a loss.
        let written = api.replace(name, &PostParams::default(), &object).await;
        let written = super::lost_race(written).map_err(CertError::Inject)?;
        Ok(written.map(|_| true))
    })
    .await
}
