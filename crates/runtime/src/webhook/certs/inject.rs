//! The CA bundle written into what calls the webhooks: each webhook of the named
//! Mutating/ValidatingWebhookConfigurations, and the conversion webhook of the named CRDs.
//! Written only when it differs, so a GitOps tool or a person that reset it is corrected
//! at the next check, and a settled cluster sees no writes.

use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use serde_json::Value;

use super::CertError;

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

/// Writes `bundle` (base64 PEM) wherever `targets` names. A target that does not exist is
/// skipped with a warning (it may not be applied yet); other failures are returned.
pub(super) async fn inject(
    client: &kube::Client,
    targets: &Targets,
    bundle: &str,
) -> Result<usize, CertError> {
    let reg = "admissionregistration.k8s.io";
    let kinds = [
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
    ];
    let mut written = 0;
    for (api, names, conversion) in kinds {
        for name in names {
            written += usize::from(put(&api, name, bundle, conversion).await?);
        }
    }
    Ok(written)
}

/// Writes `bundle` into the object `name`, if it needs it; whether it was written. A
/// conflict (another replica, or another writer, got there first) reads it again.
async fn put(
    api: &Api<DynamicObject>,
    name: &str,
    bundle: &str,
    conversion: bool,
) -> Result<bool, CertError> {
    for _ in 0..5 {
        let Some(mut object) = api.get_opt(name).await.map_err(CertError::Inject)? else {
            tracing::warn!(%name, "cannot inject the webhook CA bundle: no such object (yet)");
            return Ok(false);
        };
        if !set(&mut object, bundle, conversion) {
            return Ok(false);
        }
        // With the resourceVersion read: a writer in between is a conflict, not a loss.
        match api.replace(name, &PostParams::default(), &object).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(error) => return Err(CertError::Inject(error)),
        }
    }
    Err(CertError::Contended {
        what: format!("{name} (for its caBundle)"),
        tries: 5,
    })
}
