//! The generated decoders against the serde path on hand-built messages, one for each rule
//! the golden files do not exercise: sub-second times, zero times, zeros JSON omits, packed
//! runs, a map entry without its value, repeated occurrences of a message, managed fields
//! skipped, bad UTF-8, nesting too deep. Each is decoded both ways; both must agree, and
//! agree with what JSON would give.

use k8s_openapi::{
    DeepMerge as _,
    api::{
        apps::v1::Deployment,
        coordination::v1::Lease,
        core::v1::{Pod, Service},
    },
    apimachinery::pkg::util::intstr::IntOrString,
};
use serde::de::DeserializeOwned;

use kube_protobuf_schema as schema;

use crate::protobuf::{DecodeError, ProtoKind};

/// A message under construction, its fields named as JSON names them.
struct Msg {
    name: &'static str,
    bytes: Vec<u8>,
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Msg {
    fn new(name: &'static str) -> Msg {
        Msg {
            name: schema::named(name).expect("in the schema").name,
            bytes: Vec::new(),
        }
    }

    /// A field's number: by its JSON name, or given as `#N` (special messages, whose
    /// fields JSON does not name).
    fn number(&self, json: &str) -> u64 {
        if let Some(number) = json.strip_prefix('#') {
            return number.parse().unwrap();
        }
        let message = schema::named(self.name).unwrap();
        let field = message.fields.iter().find(|f| f.json == json);
        u64::from(
            field
                .unwrap_or_else(|| panic!("{}.{json}", self.name))
                .number,
        )
    }

    fn bytes(mut self, json: &str, value: &[u8]) -> Msg {
        let tag = self.number(json) << 3 | 2;
        varint(&mut self.bytes, tag);
        varint(&mut self.bytes, value.len() as u64);
        self.bytes.extend_from_slice(value);
        self
    }

    fn str(self, json: &str, value: &str) -> Msg {
        self.bytes(json, value.as_bytes())
    }

    fn msg(self, json: &str, value: Msg) -> Msg {
        self.bytes(json, &value.bytes)
    }

    fn int(mut self, json: &str, value: u64) -> Msg {
        let tag = self.number(json) << 3;
        varint(&mut self.bytes, tag);
        varint(&mut self.bytes, value);
        self
    }
}

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";

fn time(seconds: u64, nanos: u64) -> Msg {
    Msg::new(TIME).int("#1", seconds).int("#2", nanos)
}

/// Decodes `message` as `K` both ways; they must agree.
fn both<K: k8s_openapi::Resource + DeserializeOwned + PartialEq + std::fmt::Debug + 'static>(
    message: &Msg,
    skip_managed_fields: bool,
) -> Result<K, DecodeError> {
    let mut kind = ProtoKind::of_type::<K>().unwrap();
    if skip_managed_fields {
        kind = kind.without_managed_fields();
    }
    assert!(kind.has_generated_decoder());
    let generated = kind.decode::<K>(&message.bytes, 0);
    let serde = kind
        .without_generated_decoder()
        .decode::<K>(&message.bytes, 0);
    match (&generated, &serde) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "the generated decoder and the serde path differ"),
        (Err(_), Err(_)) => {}
        _ => panic!("generated {generated:?}, serde {serde:?}"),
    }
    generated
}

#[test]
fn times_are_cut_as_json_has_them_and_a_zero_time_is_none() {
    let lease = Msg::new("k8s.io.api.coordination.v1.Lease")
        .msg(
            "metadata",
            Msg::new(META)
                .str("name", "l")
                .msg("creationTimestamp", time(1_700_000_000, 987_654_321))
                .msg("deletionTimestamp", Msg::new(TIME)),
        )
        .msg(
            "spec",
            Msg::new("k8s.io.api.coordination.v1.LeaseSpec").msg(
                "renewTime",
                Msg::new("k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime")
                    .int("#1", 1_700_000_000)
                    .int("#2", 123_456_789),
            ),
        );
    let lease: Lease = both(&lease, false).unwrap();
    let created = lease.metadata.creation_timestamp.unwrap().0;
    assert_eq!(created.to_string(), "2023-11-14T22:13:20Z"); // to the second
    assert_eq!(lease.metadata.deletion_timestamp, None); // zero: JSON's null
    let renewed = lease.spec.unwrap().renew_time.unwrap().0;
    assert_eq!(renewed.subsec_nanosecond(), 123_456_000); // to the microsecond
}

#[test]
fn zeros_json_omits_packed_runs_and_a_map_entry_without_value() {
    let port = Msg::new("k8s.io.api.core.v1.ContainerPort")
        .int("containerPort", 8080)
        .int("hostPort", 0) // omitempty in Go: protobuf writes the zero, JSON leaves it out
        .str("hostIP", "");
    let container = Msg::new("k8s.io.api.core.v1.Container")
        .str("name", "app")
        .msg("ports", port);
    // supplementalGroups packed (a run of varints), then one more unpacked.
    let mut packed = Vec::new();
    for group in [1u64, 2, 300] {
        varint(&mut packed, group);
    }
    let security = Msg::new("k8s.io.api.core.v1.PodSecurityContext")
        .bytes("supplementalGroups", &packed)
        .int("supplementalGroups", 7);
    let label = Msg::new(META).number("labels");
    let mut entry = Vec::new();
    varint(&mut entry, 1 << 3 | 2);
    varint(&mut entry, 3);
    entry.extend_from_slice(b"key"); // no value: the value type's zero
    let mut meta = Msg::new(META).str("name", "p");
    varint(&mut meta.bytes, label << 3 | 2);
    varint(&mut meta.bytes, entry.len() as u64);
    meta.bytes.extend_from_slice(&entry);
    let pod = Msg::new("k8s.io.api.core.v1.Pod")
        .msg("metadata", meta)
        .msg(
            "spec",
            Msg::new("k8s.io.api.core.v1.PodSpec")
                .msg("containers", container)
                .msg("securityContext", security),
        );
    let pod: Pod = both(&pod, false).unwrap();
    assert_eq!(pod.metadata.labels.unwrap()["key"], "");
    let spec = pod.spec.unwrap();
    let port = &spec.containers[0].ports.as_ref().unwrap()[0];
    assert_eq!((port.container_port, port.host_port), (8080, None));
    let groups = spec.security_context.unwrap().supplemental_groups.unwrap();
    assert_eq!(groups, [1, 2, 300, 7]);
}

#[test]
fn int_or_strings_are_either() {
    let port = |target: Msg| {
        Msg::new("k8s.io.api.core.v1.ServicePort")
            .int("port", 80)
            .msg("targetPort", target)
    };
    let int_or_string = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
    let service = Msg::new("k8s.io.api.core.v1.Service").msg(
        "spec",
        Msg::new("k8s.io.api.core.v1.ServiceSpec")
            .msg("ports", port(Msg::new(int_or_string).int("#2", 8080)))
            .msg(
                "ports",
                port(Msg::new(int_or_string).int("#1", 1).str("#3", "http")),
            ),
    );
    let service: Service = both(&service, false).unwrap();
    let ports = service.spec.unwrap().ports.unwrap();
    assert_eq!(ports[0].target_port, Some(IntOrString::Int(8080)));
    assert_eq!(
        ports[1].target_port,
        Some(IntOrString::String("http".into()))
    );
}

#[test]
fn managed_fields_are_skipped_when_asked_and_kept_otherwise() {
    let entry = Msg::new("k8s.io.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry")
        .str("manager", "kubectl")
        .msg(
            "fieldsV1",
            Msg::new("k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1").str("#1", r#"{"f:data":{}}"#),
        );
    let pod = Msg::new("k8s.io.api.core.v1.Pod").msg(
        "metadata",
        Msg::new(META).str("name", "p").msg("managedFields", entry),
    );
    let kept: Pod = both(&pod, false).unwrap();
    let entries = kept.metadata.managed_fields.unwrap();
    assert_eq!(entries[0].manager.as_deref(), Some("kubectl"));
    assert_eq!(
        entries[0].fields_v1.as_ref().unwrap().0["f:data"],
        serde_json::json!({})
    );
    let skipped: Pod = both(&pod, true).unwrap();
    assert_eq!(skipped.metadata.managed_fields, None);
    assert_eq!(skipped.metadata.name.as_deref(), Some("p"));
}

/// Only the object's own managed fields are skipped: a template's metadata is data, kept
/// by both decoders as the JSON path keeps it.
#[test]
fn managed_fields_of_a_template_are_kept_when_the_objects_own_are_skipped() {
    let entry =
        || Msg::new("k8s.io.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry").str("manager", "m");
    let deployment = Msg::new("k8s.io.api.apps.v1.Deployment")
        .msg(
            "metadata",
            Msg::new(META)
                .str("name", "d")
                .msg("managedFields", entry()),
        )
        .msg(
            "spec",
            Msg::new("k8s.io.api.apps.v1.DeploymentSpec").msg(
                "template",
                Msg::new("k8s.io.api.core.v1.PodTemplateSpec").msg(
                    "metadata",
                    Msg::new(META)
                        .str("name", "t")
                        .msg("managedFields", entry()),
                ),
            ),
        );
    let skipped: Deployment = both(&deployment, true).unwrap();
    assert_eq!(skipped.metadata.managed_fields, None);
    let template = skipped.spec.unwrap().template.metadata.unwrap();
    assert_eq!(
        template.managed_fields.unwrap()[0].manager.as_deref(),
        Some("m")
    );
}

#[test]
fn a_message_sent_twice_merges_as_protobuf_merges() {
    // Go merges a repeated occurrence of a message field into the first; the serde path
    // (JSON's last-wins) cannot, so only the generated decoder is asked here.
    let kind = ProtoKind::of_type::<Pod>().unwrap();
    let pod = Msg::new("k8s.io.api.core.v1.Pod")
        .msg("metadata", Msg::new(META).str("name", "p"))
        .msg("metadata", Msg::new(META).str("namespace", "ns"));
    let pod: Pod = kind.decode(&pod.bytes, 0).unwrap();
    let mut expected = Pod::default();
    expected.metadata.name = Some("p".into());
    expected
        .metadata
        .merge_from(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            namespace: Some("ns".into()),
            ..Default::default()
        });
    assert_eq!(pod, expected);
}

#[test]
fn bad_input_is_an_error_that_says_where() {
    let bad = Msg::new("k8s.io.api.core.v1.Pod")
        .msg("metadata", Msg::new(META).bytes("name", b"\xff\xfe"));
    let error = both::<Pod>(&bad, false).unwrap_err().to_string();
    assert!(
        error.contains("metadata.name") && error.contains("UTF-8"),
        "{error}"
    );
    // A varint where a message belongs.
    let wrong = Msg::new("k8s.io.api.core.v1.Pod").int("spec", 3);
    let error = both::<Pod>(&wrong, false).unwrap_err().to_string();
    assert!(
        error.contains("spec") && error.contains("wire type"),
        "{error}"
    );
}

/// A message holding itself at field 1, as a recursive type would be generated.
#[derive(Default)]
struct Nest(Option<Box<Nest>>);

impl super::Decode for Nest {
    fn decode(v: super::Val<'_>) -> Result<Option<Self>, DecodeError> {
        super::message(v)
    }

    fn merge(&mut self, v: super::Val<'_>) -> Result<(), DecodeError> {
        v.each(|n, v| {
            if n == 1 {
                let mut inner = Nest::default();
                inner.merge(v)?;
                self.0 = Some(Box::new(inner));
            }
            Ok(())
        })
    }
}

#[test]
fn a_self_nesting_message_sent_too_deep_is_an_error_not_a_stack_overflow() {
    use super::Decode as _;
    let nest = |depth: usize| {
        (0..depth).fold(Vec::new(), |inner, _| {
            let mut out = Vec::new();
            varint(&mut out, 1 << 3 | 2);
            varint(&mut out, inner.len() as u64);
            out.extend_from_slice(&inner);
            out
        })
    };
    fn val(bytes: &[u8]) -> super::Val<'_> {
        super::Val {
            raw: crate::protobuf::wire::RawValue::Len(bytes),
            offset: 0,
            skip: Default::default(),
            depth: 0,
        }
    }
    let shallow = nest(20);
    assert!(Nest::decode(val(&shallow)).is_ok());
    let deep = nest(400);
    let error = Nest::decode(val(&deep))
        .err()
        .expect("too deep")
        .to_string();
    assert!(error.contains("nested deeper than 128"), "{error}");
}

/// A known field of the wrong wire type is malformed, for the serde path as for the
/// generated decoders (and Go): a map key, an int-or-string's number, a quantity's string.
/// The serde path read the first two as absent and the third as empty.
#[test]
fn a_known_field_of_the_wrong_wire_type_is_refused_by_both_decoders() {
    let mut entry = Vec::new();
    varint(&mut entry, 1 << 3); // key (1) as a varint
    varint(&mut entry, 5);
    let pod = Msg::new("k8s.io.api.core.v1.Pod").msg(
        "metadata",
        Msg::new(META).str("name", "p").bytes("labels", &entry),
    );
    assert!(
        both::<Pod>(&pod, false).is_err(),
        "a map key of the wrong wire type"
    );

    let port = Msg::new("k8s.io.apimachinery.pkg.util.intstr.IntOrString")
        .int("#1", 0)
        .str("#2", "80"); // the number as a string
    let service = Msg::new("k8s.io.api.core.v1.Service").msg(
        "spec",
        Msg::new("k8s.io.api.core.v1.ServiceSpec").msg(
            "ports",
            Msg::new("k8s.io.api.core.v1.ServicePort")
                .int("port", 80)
                .msg("targetPort", port),
        ),
    );
    assert!(
        both::<Service>(&service, false).is_err(),
        "an int-or-string"
    );

    let quantity = Msg::new("k8s.io.apimachinery.pkg.api.resource.Quantity").int("#1", 5);
    let requirements = Msg::new("k8s.io.api.core.v1.ResourceRequirements").bytes("limits", &{
        let mut entry = Vec::new();
        let key = b"cpu";
        varint(&mut entry, 1 << 3 | 2);
        varint(&mut entry, key.len() as u64);
        entry.extend_from_slice(key);
        varint(&mut entry, 2 << 3 | 2);
        varint(&mut entry, quantity.bytes.len() as u64);
        entry.extend_from_slice(&quantity.bytes);
        entry
    });
    let pod = Msg::new("k8s.io.api.core.v1.Pod").msg(
        "spec",
        Msg::new("k8s.io.api.core.v1.PodSpec").msg(
            "containers",
            Msg::new("k8s.io.api.core.v1.Container")
                .str("name", "c")
                .msg("resources", requirements),
        ),
    );
    assert!(
        both::<Pod>(&pod, false).is_err(),
        "a quantity's string as a number"
    );
}

/// A short repeated field is kept in exactly the room it needs (a cache keeps the object,
/// and any spare room, for its life); a long one grows by doubling past eight, so a long
/// list costs no more copies than a `Vec`'s own growth.
#[test]
fn short_repeated_fields_are_kept_without_spare_room() {
    let status = |name: &str| Msg::new("k8s.io.api.core.v1.ContainerStatus").str("name", name);
    let container = |name: &str| {
        let mut container = Msg::new("k8s.io.api.core.v1.Container").str("name", name);
        for i in 0..3 {
            let env = Msg::new("k8s.io.api.core.v1.EnvVar").str("name", &format!("E{i}"));
            container = container.msg("env", env);
        }
        container
    };
    let mut spec = Msg::new("k8s.io.api.core.v1.PodSpec")
        .msg("containers", container("a"))
        .msg("containers", container("b"));
    let mut packed = Vec::new();
    for group in 0..20u64 {
        varint(&mut packed, group);
    }
    spec = spec.msg(
        "securityContext",
        Msg::new("k8s.io.api.core.v1.PodSecurityContext").bytes("supplementalGroups", &packed),
    );
    let pod = Msg::new("k8s.io.api.core.v1.Pod").msg("spec", spec).msg(
        "status",
        Msg::new("k8s.io.api.core.v1.PodStatus")
            .msg("containerStatuses", status("a"))
            .msg("containerStatuses", status("b")),
    );
    let pod: Pod = both(&pod, false).unwrap();
    let (spec, status) = (pod.spec.unwrap(), pod.status.unwrap());
    assert_eq!(spec.containers.capacity(), 2);
    let env = spec.containers[1].env.as_ref().unwrap();
    assert_eq!((env.len(), env.capacity()), (3, 3));
    let statuses = status.container_statuses.unwrap();
    assert_eq!((statuses.len(), statuses.capacity()), (2, 2));
    let groups = spec.security_context.unwrap().supplemental_groups.unwrap();
    assert_eq!(groups.len(), 20);
    assert!(groups.capacity() <= 32, "{}", groups.capacity());
}
