//! Seeded creates, updates and deletes of config maps through the API.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// What a churn does.
#[derive(Debug, Clone, Copy)]
pub struct Churn {
    /// The generator's seed.
    pub seed: u64,
    /// How many writes.
    pub writes: usize,
    /// Objects are named `cm-0` .. `cm-<names>`.
    pub names: u64,
    /// The pause between writes.
    pub pace: Duration,
}

impl Default for Churn {
    fn default() -> Self {
        Self {
            seed: 1,
            writes: 200,
            names: 40,
            pace: Duration::from_millis(2),
        }
    }
}

/// A config map `name` with `data`.
pub fn config_map(name: &str, data: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": data}}))
        .expect("a config map")
}

/// Runs `plan` against `api`: each write picks a name and creates it (if absent), updates
/// it, or deletes it. Ends with a write of the `fence` config map and returns its
/// resourceVersion: once a cache has reached it, it has seen every write of the churn (a
/// delete's answer carries the object's last version, not the deletion's, so it cannot
/// serve as the mark). The fence's value differs on every call: a patch that changes
/// nothing is answered with the object's old resourceVersion, and a fence from before the
/// churn would end a wait before the churn's writes are seen.
pub async fn churn(api: &Api<ConfigMap>, plan: Churn) -> String {
    let mut rng = plan.seed | 1;
    for i in 0..plan.writes {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let name = format!("cm-{}", rng % plan.names.max(1));
        match (rng >> 8) % 4 {
            0 => {
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
            1 | 2 => {
                write(api, &name, &i.to_string()).await;
            }
            _ => {
                let _ = create(api, &name, &i.to_string()).await;
            }
        }
        tokio::time::sleep(plan.pace).await;
    }
    static FENCES: AtomicU64 = AtomicU64::new(0);
    let fence = FENCES.fetch_add(1, Ordering::Relaxed);
    let value = format!("{}-{fence}-{}", std::process::id(), plan.writes);
    write(api, "fence", &value)
        .await
        .expect("the fence write succeeds")
}

/// Updates `name` (or creates it); its new resourceVersion.
async fn write(api: &Api<ConfigMap>, name: &str, value: &str) -> Option<String> {
    let patch = json!({"data": {"v": value}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(cm) => cm.metadata.resource_version,
        Err(_) => create(api, name, value).await,
    }
}

async fn create(api: &Api<ConfigMap>, name: &str, value: &str) -> Option<String> {
    let cm = config_map(name, value);
    api.create(&PostParams::default(), &cm)
        .await
        .ok()
        .and_then(|cm| cm.metadata.resource_version)
}
