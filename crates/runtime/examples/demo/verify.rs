//! The demo's verdict: what the controllers wrote, against the server's own objects.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet};

use fake_apiserver::{FakeApiServer, Gvr};
use serde_json::Value;

use super::controllers::{READY, SUMMARY};

/// What disagrees (empty: everything matches).
#[derive(Debug, Default)]
pub struct Verdict {
    pub mismatches: Vec<String>,
    pub deployments: usize,
    pub namespaces: usize,
}

fn name(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn namespace(v: &Value) -> String {
    v["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The Deployment a pod (as JSON) belongs to: the same rule as the controllers' index.
fn deployment_of(pod: &Value) -> Option<String> {
    let owner = pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true)?;
    let name = owner["name"].as_str()?;
    match owner["kind"].as_str()? {
        "Deployment" => Some(name.to_owned()),
        "ReplicaSet" => {
            let hash = pod["metadata"]["labels"]["pod-template-hash"].as_str()?;
            name.strip_suffix(&format!("-{hash}")).map(str::to_owned)
        }
        _ => None,
    }
}

/// [`verify_objects`] on the simulated cluster's own state.
pub fn verify(server: &FakeApiServer) -> Verdict {
    let list = |gvr: Gvr| server.list(&gvr).unwrap_or_default();
    verify_objects(
        &list(Gvr::core("pods")),
        &list(Gvr::new("apps", "v1", "deployments")),
        &list(Gvr::core("configmaps")),
        &list(Gvr::core("namespaces")),
        |ns| ns.starts_with("team-"),
    )
}

/// Compares every Deployment's annotation and report, and the summary of every namespace
/// `summarised` names, with the pods (any server's objects, as JSON). A namespace without pods may
/// have no summary at all.
pub fn verify_objects(
    pods: &[Value],
    deployments: &[Value],
    config_maps: &[Value],
    namespaces: &[Value],
    summarised: impl Fn(&str) -> bool,
) -> Verdict {
    let mut verdict = Verdict {
        deployments: deployments.len(),
        namespaces: namespaces.len(),
        ..Verdict::default()
    };
    let cm = |ns: &str, n: &str| {
        config_maps
            .iter()
            .find(|c| namespace(c) == ns && name(c) == n)
    };
    let mut live = BTreeSet::new();
    for deploy in deployments {
        let (ns, n) = (namespace(deploy), name(deploy));
        if !deploy["metadata"]["deletionTimestamp"].is_null() {
            verdict.mismatches.push(format!(
                "{ns}/{n} is still terminating (finalizer not removed)"
            ));
            continue;
        }
        live.insert((ns.clone(), format!("ready-{n}")));
        let owned: Vec<&Value> = pods
            .iter()
            .filter(|p| namespace(p) == ns && deployment_of(p).as_deref() == Some(n.as_str()))
            .collect();
        let ready = owned
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        let truth = format!("{ready}/{}", owned.len());
        let said = deploy["metadata"]["annotations"][READY]
            .as_str()
            .unwrap_or("-");
        if said != truth {
            verdict
                .mismatches
                .push(format!("{ns}/{n}: annotation {said}, server {truth}"));
        }
        let report = cm(&ns, &format!("ready-{n}"));
        let reported = report.map(|r| {
            format!(
                "{}/{}",
                r["data"]["ready"].as_str().unwrap_or("-"),
                r["data"]["total"].as_str().unwrap_or("-")
            )
        });
        if reported.as_deref() != Some(truth.as_str()) {
            verdict.mismatches.push(format!(
                "{ns}/ready-{n}: report {reported:?}, server {truth}"
            ));
        }
    }
    for c in config_maps {
        let (ns, n) = (namespace(c), name(c));
        if n.starts_with("ready-") && !live.contains(&(ns.clone(), n.clone())) {
            verdict.mismatches.push(format!(
                "{ns}/{n}: the report of a deleted Deployment remains"
            ));
        }
    }
    let mut per_namespace: BTreeMap<String, usize> = BTreeMap::new();
    for p in pods {
        *per_namespace.entry(namespace(p)).or_default() += 1;
    }
    for ns in namespaces.iter().map(name).filter(|n| summarised(n)) {
        let truth = per_namespace.get(&ns).copied().unwrap_or(0);
        let said = cm(&ns, SUMMARY).and_then(|s| s["data"]["pods"].as_str().map(str::to_owned));
        let agrees = match &said {
            Some(said) => *said == truth.to_string(),
            None => truth == 0, // nothing to summarise, nothing written: fine
        };
        if !agrees {
            verdict.mismatches.push(format!(
                "{ns}: summary says {said:?}, server has {truth} pods"
            ));
        }
    }
    verdict
}

/// Prints the verdict; an error when anything disagrees.
pub fn report(verdict: &Verdict) -> Result<(), String> {
    println!(
        "\nverdict: {}, {} checked against the server: {}",
        plural(verdict.deployments, "deployments"),
        plural(verdict.namespaces, "namespaces"),
        if verdict.mismatches.is_empty() {
            "all match"
        } else {
            "MISMATCH"
        }
    );
    for m in verdict.mismatches.iter().take(20) {
        println!("  {m}");
    }
    match verdict.mismatches.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{} mismatches with the server",
            verdict.mismatches.len()
        )),
    }
}

/// 1 thing, 2 things.
pub fn plural(n: usize, things: &str) -> String {
    match n {
        1 => format!("1 {}", things.strip_suffix('s').unwrap_or(things)),
        n => format!("{n} {things}"),
    }
}
