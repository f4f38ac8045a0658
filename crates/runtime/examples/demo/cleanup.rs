//! `--cleanup`: removes what any run of the demo wrote on a real cluster, this version's
//! (labelled `app.kubernetes.io/managed-by=kube-informer-demo`, in its namespace) and earlier
//! versions' (which wrote in every namespace, unlabelled: recognised by name and content).
#![allow(dead_code, unreachable_pub)]

use std::{collections::BTreeSet, path::Path};

use k8s_openapi::api::{
    apps::v1::Deployment, coordination::v1::Lease, core::v1::ConfigMap, core::v1::Namespace,
    events::v1::Event,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use serde_json::json;

use super::{
    Failure,
    controllers::{MANAGED_BY, READY, REPORT_FINALIZER, SUMMARY},
    real::{DEMO_NAMESPACE, connect, list},
    replicas::LEASE,
    verify::plural,
};

/// The reporting controller of the demo's events.
const REPORTER: &str = "demo.kube-informer.io/ready-pods";

pub async fn run(path: &Path) -> Result<(), Failure> {
    let client = connect(path).await?;
    let failed = |what: &str, e: kube::Error| Failure::Error(format!("{what}: {e}"));

    let mut unpatched = 0;
    for deployment in list::<Deployment>(&client, None).await? {
        let finalized = deployment
            .finalizers()
            .iter()
            .any(|f| f == REPORT_FINALIZER);
        if !finalized && !deployment.annotations().contains_key(READY) {
            continue;
        }
        let ns = deployment.namespace().unwrap_or_default();
        let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let patch = json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": [REPORT_FINALIZER],
            "annotations": {READY: null},
        }});
        api.patch(
            &deployment.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .map_err(|e| {
            failed(
                &format!("patch deployment {ns}/{}", deployment.name_any()),
                e,
            )
        })?;
        unpatched += 1;
    }

    let summary_keys: BTreeSet<&str> = ["pending", "running", "succeeded", "failed", "pods"].into();
    let report_keys: BTreeSet<&str> = ["ready", "total"].into();
    let mut config_maps = 0;
    for cm in list::<ConfigMap>(&client, None).await? {
        let keys: BTreeSet<&str> = cm.data.iter().flatten().map(|(k, _)| k.as_str()).collect();
        let name = cm.name_any();
        let labelled = cm.labels().get(MANAGED_BY.0).map(String::as_str) == Some(MANAGED_BY.1);
        let legacy = (name == SUMMARY && keys == summary_keys)
            || (name.starts_with("ready-") && keys == report_keys);
        if !labelled && !legacy {
            continue;
        }
        let ns = cm.namespace().unwrap_or_default();
        delete(Api::<ConfigMap>::namespaced(client.clone(), &ns), &name).await?;
        config_maps += 1;
    }

    let mut events = 0;
    for event in list::<Event>(&client, None).await? {
        if event.reporting_controller.as_deref() != Some(REPORTER) {
            continue;
        }
        let ns = event.namespace().unwrap_or_default();
        delete(
            Api::<Event>::namespaced(client.clone(), &ns),
            &event.name_any(),
        )
        .await?;
        events += 1;
    }

    let mut leases = 0;
    for lease in list::<Lease>(&client, None).await? {
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default();
        let ours =
            lease.name_any() == LEASE && (holder.is_empty() || holder.starts_with("replica-"));
        if ours {
            let ns = lease.namespace().unwrap_or_default();
            delete(Api::<Lease>::namespaced(client.clone(), &ns), LEASE).await?;
            leases += 1;
        }
    }

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let ours = namespaces
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| failed("list namespaces", e))?;
    for namespace in &ours.items {
        delete(namespaces.clone(), &namespace.name_any()).await?;
    }
    println!(
        "cleaned up: {} (finalizer and annotation removed), {}, {}, {}, {} ({DEMO_NAMESPACE} \
         is deleted with what remains in it)",
        plural(unpatched, "Deployments"),
        plural(config_maps, "ConfigMaps"),
        plural(events, "Events"),
        plural(leases, "Leases"),
        plural(ours.items.len(), "namespaces"),
    );
    Ok(())
}

/// Deletes `name`; already gone is fine.
async fn delete<K>(api: Api<K>, name: &str) -> Result<(), Failure>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(format!("delete {name}: {e}").into()),
    }
}
