//! Creating manifests on the API server (or replacing what is there), and waiting until
//! each CRD is established and every served version is in discovery — until then, a client
//! of the new kind gets 404s.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use serde_json::Value;

use super::{LocalWebhooks, Manifest, read::read, rewrite};
use crate::Error;

const CRD: &str = "CustomResourceDefinition";
const MUTATING: &str = "MutatingWebhookConfiguration";
const VALIDATING: &str = "ValidatingWebhookConfiguration";

/// How often a wait polls.
const POLL: Duration = Duration::from_millis(50);

fn failed(manifest: &Manifest, reason: impl std::fmt::Display) -> Error {
    Error::Install {
        what: format!(
            "{} {:?} from {}",
            manifest.kind(),
            manifest.name(),
            manifest.path.display()
        ),
        reason: reason.to_string(),
    }
}

fn cluster_api(client: &kube::Client, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1", kind);
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// Creates `manifest` with `api`, or replaces the object of its name.
async fn create_or_replace(api: &Api<DynamicObject>, manifest: &Manifest) -> Result<(), Error> {
    let mut object: DynamicObject =
        serde_json::from_value(manifest.object.clone()).map_err(|e| failed(manifest, e))?;
    let pp = PostParams::default();
    match api.create(&pp, &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = api
                .get(manifest.name())
                .await
                .map_err(|e| failed(manifest, e))?;
            object.metadata.resource_version = existing.metadata.resource_version;
            api.replace(manifest.name(), &pp, &object)
                .await
                .map(drop)
                .map_err(|e| failed(manifest, e))
        }
        Err(error) => Err(failed(manifest, error)),
    }
}

/// Installs the CRDs at `paths` (conversion webhooks pointed at `local`) and waits, at most
/// `timeout`, until each is established and served. Their names, in order.
pub(crate) async fn install_crds(
    client: &kube::Client,
    paths: &[PathBuf],
    local: &LocalWebhooks,
    timeout: Duration,
) -> Result<Vec<String>, Error> {
    let mut crds = read(paths, &[CRD])?;
    let api = cluster_api(
        client,
        "apiextensions.k8s.io",
        CRD,
        "customresourcedefinitions",
    );
    for crd in &mut crds {
        rewrite::crd_conversion(&mut crd.object, local);
        create_or_replace(&api, crd).await?;
    }
    let deadline = Instant::now() + timeout;
    for crd in &crds {
        wait_until_served(client, &api, crd, deadline).await?;
    }
    Ok(crds.iter().map(|c| c.name().to_owned()).collect())
}

/// Whether the CRD's `Established` condition is `True`.
fn established(crd: &DynamicObject) -> bool {
    let conditions = crd.data["status"]["conditions"].as_array();
    conditions.is_some_and(|all| {
        all.iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    })
}

async fn wait_until_served(
    client: &kube::Client,
    api: &Api<DynamicObject>,
    crd: &Manifest,
    deadline: Instant,
) -> Result<(), Error> {
    let spec = &crd.object["spec"];
    let (group, plural) = (spec["group"].as_str(), spec["names"]["plural"].as_str());
    let (Some(group), Some(plural)) = (group, plural) else {
        return Err(failed(crd, "no spec.group or spec.names.plural"));
    };
    let served: Vec<&str> = spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"] == Value::Bool(true))
        .filter_map(|v| v["name"].as_str())
        .collect();
    let mut last = String::from("not established yet");
    loop {
        let ready = match api.get(crd.name()).await {
            Ok(object) if established(&object) => {
                let mut all = true;
                for version in &served {
                    let listed = client
                        .list_api_group_resources(&format!("{group}/{version}"))
                        .await;
                    let found = listed.is_ok_and(|l| l.resources.iter().any(|r| r.name == plural));
                    if !found {
                        last = format!("{plural}.{group}/{version} not in discovery yet");
                        all = false;
                        break;
                    }
                }
                all
            }
            Ok(_) => false,
            Err(error) => {
                last = error.to_string();
                false
            }
        };
        if ready {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(failed(crd, format!("not served in time: {last}")));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Installs the webhook configurations at `paths`, every webhook pointed at `local`. Their
/// names, in order.
pub(crate) async fn install_webhooks(
    client: &kube::Client,
    paths: &[PathBuf],
    local: &LocalWebhooks,
) -> Result<Vec<String>, Error> {
    let mut configurations = read(paths, &[MUTATING, VALIDATING])?;
    for configuration in &mut configurations {
        rewrite::webhook_configuration(&mut configuration.object, local);
        let (kind, plural) = match configuration.kind() {
            MUTATING => (MUTATING, "mutatingwebhookconfigurations"),
            _ => (VALIDATING, "validatingwebhookconfigurations"),
        };
        let api = cluster_api(client, "admissionregistration.k8s.io", kind, plural);
        create_or_replace(&api, configuration).await?;
    }
    Ok(configurations.iter().map(|c| c.name().to_owned()).collect())
}
