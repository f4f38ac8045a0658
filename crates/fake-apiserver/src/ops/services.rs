//! What kube-apiserver 1.36 fills into a Service (recorded from its answers, held to it by
//! `crates/e2e/tests/defaults.rs`): the type, session affinity, each port's protocol and
//! target port, the IP family fields; a cluster IP from the service range and node ports
//! from 30000–32767, each unused; on an update that leaves them out, the allocated ones
//! stay (the real server keeps them for clients that never send them).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::{registry::Gvr, storage::Storage, util::Rng};

/// kube-apiserver's default service range is 10.0.0.0/24; `.1` is the `kubernetes`
/// Service's.
const SERVICE_RANGE: std::ops::RangeInclusive<u8> = 2..=254;
/// The default node port range.
const NODE_PORTS: std::ops::RangeInclusive<u16> = 30000..=32767;

fn exposes_node_ports(spec: &Value) -> bool {
    matches!(spec["type"].as_str(), Some("NodePort" | "LoadBalancer"))
}

/// The static defaults of a Service's spec (no allocation).
pub(super) fn defaults(spec: &mut Value) {
    let Some(object) = spec.as_object_mut() else {
        return;
    };
    object.entry("type").or_insert(json!("ClusterIP"));
    object.entry("sessionAffinity").or_insert(json!("None"));
    for port in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(port) = port.as_object_mut() {
            port.entry("protocol").or_insert(json!("TCP"));
            if let Some(number) = port.get("port").cloned() {
                port.entry("targetPort").or_insert(number);
            }
        }
    }
    if spec["type"] == "ExternalName" {
        return;
    }
    let object = spec.as_object_mut().expect("checked");
    object.entry("ipFamilies").or_insert(json!(["IPv4"]));
    object
        .entry("ipFamilyPolicy")
        .or_insert(json!("SingleStack"));
    object
        .entry("internalTrafficPolicy")
        .or_insert(json!("Cluster"));
    if spec["clusterIP"] == "None" && spec["clusterIPs"].is_null() {
        spec["clusterIPs"] = json!(["None"]);
    }
    if exposes_node_ports(spec) {
        let object = spec.as_object_mut().expect("checked");
        object
            .entry("externalTrafficPolicy")
            .or_insert(json!("Cluster"));
        if spec["type"] == "LoadBalancer" {
            let object = spec.as_object_mut().expect("checked");
            object
                .entry("allocateLoadBalancerNodePorts")
                .or_insert(json!(true));
        }
    }
}

/// What other Services hold: cluster IPs and node ports.
fn taken(storage: &Storage) -> (BTreeSet<String>, BTreeSet<u64>) {
    let (mut ips, mut ports) = (BTreeSet::new(), BTreeSet::new());
    let services = storage.resource(&Gvr::core("services"));
    for object in services.into_iter().flat_map(|r| r.live_objects()) {
        let value: Value = serde_json::from_slice(&object.body).unwrap_or_default();
        ips.extend(value["spec"]["clusterIP"].as_str().map(str::to_owned));
        for port in value["spec"]["ports"].as_array().into_iter().flatten() {
            ports.extend(port["nodePort"].as_u64());
        }
    }
    (ips, ports)
}

/// Allocates a new Service's cluster IP and node ports, where it asks for none.
pub(super) fn allocate(storage: &Storage, rng: &mut Rng, value: &mut Value) {
    let spec = &mut value["spec"];
    if !spec.is_object() || spec["type"] == "ExternalName" {
        return;
    }
    let (ips, ports) = taken(storage);
    if spec["clusterIP"].as_str().is_none_or(str::is_empty) {
        let free: Vec<String> = SERVICE_RANGE
            .map(|last| format!("10.0.0.{last}"))
            .filter(|ip| !ips.contains(ip))
            .collect();
        if let Some(ip) = pick(rng, &free) {
            spec["clusterIP"] = json!(ip);
            spec["clusterIPs"] = json!([ip]);
        }
    } else if spec["clusterIPs"].is_null() {
        spec["clusterIPs"] = json!([spec["clusterIP"]]);
    }
    if exposes_node_ports(spec) {
        let mut used = ports;
        for port in spec
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if port.get("nodePort").is_none() {
                let free: Vec<u64> = NODE_PORTS
                    .map(u64::from)
                    .filter(|p| !used.contains(p))
                    .collect();
                if let Some(chosen) = pick(rng, &free) {
                    used.insert(chosen);
                    port["nodePort"] = json!(chosen);
                }
            }
        }
    }
}

fn pick<T: Clone>(rng: &mut Rng, free: &[T]) -> Option<T> {
    if free.is_empty() {
        return None;
    }
    let at = (rng.next_u64() % free.len() as u64) as usize;
    Some(free[at].clone())
}

/// On an update, the cluster IPs and node ports the new body leaves out stay as allocated.
pub(super) fn keep_allocated(value: &mut Value, stored: &Value) {
    let (spec, old) = (&mut value["spec"], &stored["spec"]);
    let type_of = |spec: &Value| spec["type"].as_str().unwrap_or("ClusterIP").to_owned();
    if !spec.is_object() || type_of(spec) != type_of(old) {
        return;
    }
    for field in ["clusterIP", "clusterIPs"] {
        if spec[field].is_null() && !old[field].is_null() {
            spec[field] = old[field].clone();
        }
    }
    let old_ports: Vec<&Value> = old["ports"].as_array().into_iter().flatten().collect();
    for port in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if port.get("nodePort").is_some() {
            continue;
        }
        let protocol = |p: &Value| p["protocol"].as_str().unwrap_or("TCP").to_owned();
        let same = old_ports
            .iter()
            .find(|o| o["port"] == port["port"] && protocol(o) == protocol(port));
        if let Some(node_port) = same.and_then(|o| o.get("nodePort")) {
            port["nodePort"] = node_port.clone();
        }
    }
}
