//! The benchmark's traffic: N realistic pods (with the managedFields a real server keeps),
//! then M watch events (10% ADDED, 80% MODIFIED, 10% DELETED), rendered once and seeded, so
//! every client receives the same bytes.

use bytes::Bytes;
use fake_apiserver::{
    fixtures::realistic_pod,
    replay::{ReplayEvent, Traffic},
};
use serde_json::{Value, json};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// How many of the traffic's watch events are deletes.
pub(crate) fn deletes(traffic: &Traffic) -> usize {
    traffic
        .events
        .iter()
        .filter(|e| e.line.starts_with(br#"{"type":"DELETED""#))
        .count()
}

/// The objects the traffic is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum Objects {
    /// Realistic pods (served as JSON and protobuf).
    #[default]
    Pods,
    /// A custom resource (`widgets.example.com`), JSON only: what an operator's own kinds
    /// get from kube-apiserver.
    Widgets,
}

impl Objects {
    fn bytes(self, i: usize, resource_version: u64, revision: u64) -> Vec<u8> {
        match self {
            Objects::Pods => pod_bytes(i, resource_version, revision),
            Objects::Widgets => crate::widgets::widget_bytes(i, resource_version, revision),
        }
    }

    /// The list's kind and apiVersion.
    fn list(self) -> (&'static str, &'static str) {
        match self {
            Objects::Pods => ("PodList", "v1"),
            Objects::Widgets => ("WidgetList", "example.com/v1"),
        }
    }
}

/// Renders N objects listed at resourceVersion N, then M events at N+1, N+2, ...
pub(crate) fn render_objects(objects_of: Objects, n: usize, m: usize, seed: u64) -> Traffic {
    let render = |i, rv, revision| objects_of.bytes(i, rv, revision);
    let objects = (0..n)
        .map(|i| Bytes::from(render(i, i as u64 + 1, 0)))
        .collect();
    let mut rng = Rng(seed | 1);
    let mut live: Vec<(usize, u64)> = (0..n).map(|i| (i, 0)).collect();
    let mut next_id = n;
    let mut events = Vec::with_capacity(m);
    for j in 0..m {
        let rv = (n + 1 + j) as u64;
        let roll = rng.below(10);
        let (kind, object) = if roll == 0 || live.is_empty() {
            live.push((next_id, 0));
            next_id += 1;
            ("ADDED", render(next_id - 1, rv, 0))
        } else if roll == 1 {
            let (id, revision) = live.swap_remove(rng.below(live.len()));
            ("DELETED", render(id, rv, revision))
        } else {
            let at = rng.below(live.len());
            live[at].1 += 1;
            let (id, revision) = live[at];
            ("MODIFIED", render(id, rv, revision))
        };
        events.push(ReplayEvent::new(rv, kind, &object));
    }
    let (list_kind, api_version) = objects_of.list();
    Traffic {
        list_kind: list_kind.into(),
        api_version: api_version.into(),
        list_resource_version: n as u64,
        objects,
        events,
    }
}

/// Pod `i` at `resource_version`, after `revision` status changes, as the API server
/// renders it.
pub(crate) fn pod_bytes(i: usize, resource_version: u64, revision: u64) -> Vec<u8> {
    let mut pod = realistic_pod(i);
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    let meta = &mut pod["metadata"];
    meta["uid"] = json!(format!("0b6f4c2e-7d1a-4c3b-9e8f-{i:012}"));
    meta["resourceVersion"] = json!(resource_version.to_string());
    meta["creationTimestamp"] = json!("2026-11-20T10:00:00Z");
    meta["generateName"] = json!("web-7d9c5b8f6-");
    pod["metadata"]["managedFields"] = managed_fields(&pod);
    let status = &mut pod["status"];
    status["containerStatuses"][0]["restartCount"] = json!(revision);
    status["podIPs"] = json!([{"ip": status["podIP"].clone()}]);
    if revision > 0 {
        status["conditions"][1]["lastTransitionTime"] = json!(format!(
            "2026-11-20T10:{:02}:{:02}Z",
            revision / 60 % 60,
            revision % 60
        ));
    }
    serde_json::to_vec(&pod).expect("a Value renders")
}

/// The managedFields a real cluster records for a ReplicaSet's pod: the controller's
/// create (metadata and spec) and the kubelet's status updates.
fn managed_fields(pod: &Value) -> Value {
    let set = |names: &[&str]| -> Value {
        let mut map = serde_json::Map::new();
        map.insert(".".into(), json!({}));
        for name in names {
            map.insert(format!("f:{name}"), json!({}));
        }
        Value::Object(map)
    };
    let container = json!({
        ".": {}, "f:env": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:ports": {},
        "f:resources": {".": {}, "f:limits": set(&["cpu", "memory"])},
        "f:terminationMessagePath": {}, "f:volumeMounts": {}
    });
    let condition = set(&["lastProbeTime", "lastTransitionTime", "status", "type"]);
    let owner = format!(
        "k:{{\"uid\":\"{}\"}}",
        pod["metadata"]["ownerReferences"][0]["uid"]
            .as_str()
            .unwrap_or("")
    );
    let ip = format!(
        "k:{{\"ip\":\"{}\"}}",
        pod["status"]["podIP"].as_str().unwrap_or("")
    );
    json!([
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
         "time": "2026-11-20T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {
            "f:metadata": {
                "f:annotations": set(&["kubectl.kubernetes.io/restartedAt", "prometheus.io/scrape"]),
                "f:generateName": {},
                "f:labels": set(&["app", "pod-template-hash", "tier", "version"]),
                "f:ownerReferences": {".": {}, owner: {}}
            },
            "f:spec": {
                "f:containers": {"k:{\"name\":\"web\"}": container.clone(), "k:{\"name\":\"sidecar\"}": container},
                "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                "f:securityContext": {}, "f:serviceAccount": {}, "f:serviceAccountName": {},
                "f:terminationGracePeriodSeconds": {}, "f:tolerations": {},
                "f:volumes": {".": {}, "k:{\"name\":\"config\"}": {".": {}, "f:configMap": set(&["defaultMode", "name"]), "f:name": {}}}
            }
        }},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-20T10:00:09Z",
         "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {
            "f:status": {
                "f:conditions": {
                    "k:{\"type\":\"ContainersReady\"}": condition.clone(),
                    "k:{\"type\":\"Initialized\"}": condition.clone(),
                    "k:{\"type\":\"PodScheduled\"}": condition.clone(),
                    "k:{\"type\":\"Ready\"}": condition
                },
                "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
                "f:podIPs": {".": {}, ip: {".": {}, "f:ip": {}}}, "f:qosClass": {}, "f:startTime": {}
            }
        }}
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_realistic_and_events_have_the_mix() {
        let t = render_objects(Objects::Pods, 1000, 10_000, 7);
        let avg = t.objects.iter().map(Bytes::len).sum::<usize>() / t.objects.len();
        assert!((5550..5850).contains(&avg), "average pod is {avg} bytes");
        let count = |kind: &str| {
            let tag = format!("{{\"type\":\"{kind}\"");
            t.events
                .iter()
                .filter(|e| e.line.starts_with(tag.as_bytes()))
                .count()
        };
        let (a, m, d) = (count("ADDED"), count("MODIFIED"), count("DELETED"));
        assert_eq!(a + m + d, 10_000);
        assert!(
            (800..1200).contains(&a) && (800..1200).contains(&d),
            "{a} {m} {d}"
        );
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_slice(&t.objects[3]).unwrap();
        let widgets = render_objects(Objects::Widgets, 10, 100, 7);
        assert_eq!(widgets.list_kind, "WidgetList");
        let widget: crate::widgets::Widget = serde_json::from_slice(&widgets.objects[3]).unwrap();
        assert_eq!(widget.metadata.managed_fields.map(|m| m.len()), Some(2));
        assert_eq!(pod.metadata.managed_fields.map(|m| m.len()), Some(2));
        assert!(
            t.events
                .windows(2)
                .all(|w| w[0].resource_version < w[1].resource_version)
        );
    }
}
