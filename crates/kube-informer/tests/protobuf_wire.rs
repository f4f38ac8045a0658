//! The protobuf envelope, lists and watch frames as kube-apiserver writes them (built here
//! byte by byte after its encoders), and every kind of bad input: each a `DecodeError`
//! that says what and where, never a panic, never an allocation of a claimed length
//! before it is checked. Arbitrary bytes are thrown at every entry point (proptest).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::WatchEvent;
use kube_informer::protobuf::{
    self, DecodeError, ListBody, ProtoKind, decode_object, decode_object_of, decode_status,
    decode_watch_event, split_frames,
};
use proptest::prelude::*;

/// A protobuf message under construction.
#[derive(Default, Clone)]
struct Msg(Vec<u8>);

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Msg {
    fn bytes(mut self, number: u32, value: &[u8]) -> Self {
        varint(&mut self.0, u64::from(number) << 3 | 2);
        varint(&mut self.0, value.len() as u64);
        self.0.extend_from_slice(value);
        self
    }
    fn text(self, number: u32, value: &str) -> Self {
        self.bytes(number, value.as_bytes())
    }
    fn msg(self, number: u32, value: Msg) -> Self {
        self.bytes(number, &value.0)
    }
    fn int(mut self, number: u32, value: u64) -> Self {
        varint(&mut self.0, u64::from(number) << 3);
        varint(&mut self.0, value);
        self
    }
}

/// `k8s\0` + Unknown{typeMeta{apiVersion, kind}, raw}, as the API server's serializer writes.
fn envelope(api_version: &str, kind: &str, raw: Msg) -> Vec<u8> {
    let unknown = Msg::default()
        .msg(1, Msg::default().text(1, api_version).text(2, kind))
        .msg(2, raw)
        .text(3, "")
        .text(4, "");
    [b"k8s\0".as_slice(), &unknown.0].concat()
}

fn object_meta(name: &str, rv: &str) -> Msg {
    // ObjectMeta: name=1, namespace=3, uid=5, resourceVersion=6, generation=7 (written even
    // when 0), creationTimestamp=8 (an empty Time: zero), labels=11.
    Msg::default()
        .text(1, name)
        .text(3, "shop")
        .text(5, "")
        .text(6, rv)
        .int(7, 0)
        .msg(8, Msg::default())
        .msg(11, Msg::default().text(1, "app").text(2, "web"))
}

fn config_map(name: &str, rv: &str) -> Msg {
    // ConfigMap: metadata=1, data=2 (map), immutable=4 absent.
    Msg::default()
        .msg(1, object_meta(name, rv))
        .msg(2, Msg::default().text(1, "k").text(2, "v"))
}

fn frame(event: &str, object: Vec<u8>) -> Vec<u8> {
    let body = Msg::default()
        .text(1, event)
        .msg(2, Msg(Vec::new()).bytes(1, &object));
    let mut framed = (body.0.len() as u32).to_be_bytes().to_vec();
    framed.extend_from_slice(&body.0);
    framed
}

fn cm_kind() -> ProtoKind {
    ProtoKind::of_type::<ConfigMap>().expect("ConfigMap has a protobuf encoding")
}

#[test]
fn an_object_decodes_with_json_s_omissions() {
    let body = envelope("v1", "ConfigMap", config_map("web", "42"));
    let cm: ConfigMap = decode_object(&body).unwrap();
    let meta = &cm.metadata;
    assert_eq!(meta.name.as_deref(), Some("web"));
    assert_eq!(meta.resource_version.as_deref(), Some("42"));
    // Written as zero by protobuf, omitted by JSON: absent, as from JSON.
    assert_eq!(meta.uid, None);
    assert_eq!(meta.generation, None);
    assert_eq!(meta.creation_timestamp, None);
    assert_eq!(
        meta.labels,
        Some(BTreeMap::from([("app".into(), "web".into())]))
    );
    assert_eq!(cm.data, Some(BTreeMap::from([("k".into(), "v".into())])));
}

#[test]
fn a_list_gives_its_metadata_then_its_items() {
    let list = Msg::default()
        .msg(1, Msg::default().text(2, "77").text(3, "next-page"))
        .msg(2, config_map("a", "70"))
        .msg(2, config_map("b", "71"));
    let body = envelope("v1", "ConfigMapList", list);
    let parsed = ListBody::parse(&body, cm_kind()).unwrap();
    assert_eq!(parsed.metadata.resource_version.as_deref(), Some("77"));
    assert_eq!(parsed.metadata.continue_.as_deref(), Some("next-page"));
    assert_eq!(parsed.len(), 2);
    let items: Vec<ConfigMap> = parsed.items().unwrap();
    let names: Vec<_> = items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn watch_frames_carry_events_bookmarks_and_errors() {
    let added = frame("ADDED", envelope("v1", "ConfigMap", config_map("web", "5")));
    let bookmark_meta = Msg::default().text(6, "9").msg(
        12,
        Msg::default()
            .text(1, "k8s.io/initial-events-end")
            .text(2, "true"),
    );
    let bookmark = frame(
        "BOOKMARK",
        envelope("v1", "ConfigMap", Msg::default().msg(1, bookmark_meta)),
    );
    // Status: status=2, message=3, reason=4, code=6.
    let gone = Msg::default()
        .text(2, "Failure")
        .text(3, "too old resource version: 1 (9)")
        .text(4, "Expired")
        .int(6, 410);
    let error = frame("ERROR", envelope("v1", "Status", gone));
    let stream = [added, bookmark, error].concat();

    let (frames, used) = split_frames(&stream, protobuf::MAX_FRAME).unwrap();
    assert_eq!((frames.len(), used), (3, stream.len()));
    match decode_watch_event::<ConfigMap>(frames[0], cm_kind()).unwrap() {
        WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("web")),
        other => panic!("{other:?}"),
    }
    match decode_watch_event::<ConfigMap>(frames[1], cm_kind()).unwrap() {
        WatchEvent::Bookmark(b) => {
            assert_eq!(b.metadata.resource_version, "9");
            assert_eq!(b.metadata.annotations["k8s.io/initial-events-end"], "true");
        }
        other => panic!("{other:?}"),
    }
    match decode_watch_event::<ConfigMap>(frames[2], cm_kind()).unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(status.is_failure());
        }
        other => panic!("{other:?}"),
    }
    // A frame cut short waits for the rest.
    let (frames, used) = split_frames(&stream[..stream.len() - 1], protobuf::MAX_FRAME).unwrap();
    assert_eq!(frames.len(), 2);
    assert!(used < stream.len());
}

#[test]
fn an_empty_raw_extension_is_absent_as_in_json() {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    // ControllerRevision: metadata=1, data=2 (an empty RawExtension), revision=3.
    let raw = Msg::default()
        .msg(1, object_meta("r", "1"))
        .msg(2, Msg::default())
        .int(3, 4);
    let revision: ControllerRevision =
        decode_object(&envelope("apps/v1", "ControllerRevision", raw)).unwrap();
    assert_eq!((revision.data, revision.revision), (None, 4));
}

#[test]
fn an_error_status_decodes_from_protobuf() {
    let forbidden = Msg::default()
        .text(2, "Failure")
        .text(3, "configmaps is forbidden")
        .text(4, "Forbidden")
        .int(6, 403);
    let status = decode_status(&envelope("v1", "Status", forbidden)).unwrap();
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(status.message, "configmaps is forbidden");
}

fn error_of<T: std::fmt::Debug>(result: Result<T, DecodeError>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn bad_input_is_an_error_that_says_what_and_where() {
    // Not protobuf at all (a JSON body, say).
    let json = br#"{"kind":"ConfigMap"}"#;
    assert!(error_of(decode_object::<ConfigMap>(json)).contains("not a protobuf object"));
    // Another kind than asked.
    let pod = envelope("v1", "Pod", Msg::default());
    assert!(error_of(decode_object::<ConfigMap>(&pod)).contains("holds v1 Pod, not v1 ConfigMap"));
    // A length prefix larger than what remains: `raw` (field 2) claims 80 bytes, 1 follows.
    let claims_too_much = [b"k8s\0".as_slice(), &[0x12, 80, b'a']].concat();
    let message = error_of(decode_object::<ConfigMap>(&claims_too_much));
    assert_eq!(message, "at byte 4: field 2 claims 80 bytes, 1 remain");
    // Cut anywhere inside the object: an error. (A cut between two fields of the envelope
    // cannot be told from a shorter message, in protobuf as in any length-delimited
    // format; bodies are framed by HTTP, watch events by their length prefix.)
    let whole = envelope("v1", "ConfigMap", config_map("web", "1"));
    let raw = config_map("web", "1").0.len();
    let raw_start = whole.len() - 4 - raw; // contentEncoding and contentType follow it
    for end in raw_start..whole.len() - 4 {
        assert!(
            decode_object::<ConfigMap>(&whole[..end]).is_err(),
            "cut at {end}"
        );
    }
    // An encoding other than none (found by the fuzzing below: it once panicked).
    let gzipped = [b"k8s\0".as_slice(), &[0x1a, 4, b'g', b'z', b'i', b'p']].concat();
    let message = error_of(decode_object::<ConfigMap>(&gzipped));
    assert!(
        message.contains("content encoding \"gzip\" is not supported"),
        "{message}"
    );
    // A string that is not UTF-8, named by its field.
    let bad = envelope(
        "v1",
        "ConfigMap",
        Msg::default().msg(1, Msg::default().bytes(1, &[0xff, 0xfe])),
    );
    let message = error_of(decode_object::<ConfigMap>(&bad));
    assert!(
        message.contains("metadata") && message.contains("UTF-8"),
        "{message}"
    );
    // A field of the wrong wire type.
    let wrong = envelope(
        "v1",
        "ConfigMap",
        Msg::default().msg(1, Msg::default().int(1, 7)),
    );
    let message = error_of(decode_object::<ConfigMap>(&wrong));
    assert!(message.contains("wire type"), "{message}");
    // Unknown fields (a newer server's) are skipped, as JSON skips unknown keys.
    let newer = envelope("v1", "ConfigMap", config_map("web", "1").text(99, "future"));
    assert_eq!(
        decode_object::<ConfigMap>(&newer)
            .unwrap()
            .metadata
            .name
            .as_deref(),
        Some("web")
    );
    // An event type nobody knows, and an event without its object.
    let odd = frame(
        "EXPLODED",
        envelope("v1", "ConfigMap", config_map("web", "1")),
    );
    assert!(
        error_of(decode_watch_event::<ConfigMap>(&odd[4..], cm_kind()))
            .contains("unknown type \"EXPLODED\"")
    );
    let empty = Msg::default().text(1, "ADDED");
    assert!(
        error_of(decode_watch_event::<ConfigMap>(&empty.0, cm_kind()))
            .contains("without an object")
    );
    // A frame over the limit: refused from its header, before its bytes are awaited.
    let huge = (u32::MAX).to_be_bytes();
    let message = error_of(split_frames(&huge, protobuf::MAX_FRAME));
    assert!(message.contains("over the limit"), "{message}");
}

/// A ConfigMap whose one managedFields entry holds `fields` as its FieldsV1 JSON.
fn with_field_set(fields: &str) -> Vec<u8> {
    // ObjectMeta.managedFields = 17; ManagedFieldsEntry: manager = 1, fieldsType = 6,
    // fieldsV1 = 7; FieldsV1: raw = 1.
    let entry = Msg::default()
        .text(1, "kubectl")
        .text(6, "FieldsV1")
        .msg(7, Msg::default().text(1, fields));
    let meta = object_meta("web", "12").msg(17, entry);
    envelope("v1", "ConfigMap", Msg::default().msg(1, meta))
}

#[test]
fn embedded_json_that_passes_on_arrival_also_renders() {
    use kube_informer::compact::Compact;
    // What serde_json's skipping accepts and its parsing refuses: refused on arrival, so a
    // compact object's `json()` never meets it.
    let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
    let long_number = format!(r#"{{"n":{}}}"#, "9".repeat(400));
    for hostile in [
        r#"{"n":1e400}"#,
        r#"{"s":"\ud800"}"#,
        long_number.as_str(),
        deep.as_str(),
        r#"{"f:data":{}} trailing"#,
    ] {
        let body = with_field_set(hostile);
        let error = error_of(decode_object_of::<Compact<ConfigMap>>(&body, cm_kind()));
        assert!(error.contains("embedded JSON"), "{hostile}: {error}");
    }
    // A field set as servers write it, escapes of `<`, `>` and `&` included, is kept.
    let body = with_field_set(r#"{"f:data":{".":{},"f:a\u0026b":{}},"f:n":{"v":1.5}}"#);
    let compact: Compact<ConfigMap> = decode_object_of(&body, cm_kind()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&compact.json()).unwrap();
    assert_eq!(
        json["metadata"]["managedFields"][0]["fieldsV1"]["f:data"]["f:a&b"],
        serde_json::json!({})
    );
}

#[test]
fn only_built_in_kinds_have_a_protobuf_encoding() {
    assert!(protobuf::supports::<Pod>());
    assert!(ProtoKind::of("apps/v1", "Deployment").is_some());
    assert!(ProtoKind::of("example.com/v1", "Widget").is_none());
    // Compact keeps the message; a type that reads JSON text itself cannot be read from
    // protobuf, and stays JSON.
    assert!(cm_kind().decodes::<ConfigMap>());
    assert!(cm_kind().decodes::<kube_informer::compact::Compact<ConfigMap>>());
    assert!(!cm_kind().decodes::<Box<serde_json::value::RawValue>>());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode_object::<Pod>(&bytes);
        let _ = decode_status(&bytes);
        let _ = decode_watch_event::<Pod>(&bytes, ProtoKind::of_type::<Pod>().unwrap());
        let _ = split_frames(&bytes, 1 << 10);
        if let Ok(list) = ListBody::parse(&bytes, ProtoKind::of_type::<Pod>().unwrap()) {
            let _ = list.items::<Pod>();
        }
    }

    #[test]
    fn mangled_real_shaped_bodies_never_panic(
        cut in 0usize..400,
        flips in proptest::collection::vec((0usize..400, any::<u8>()), 0..8),
    ) {
        mangle_and_decode(cut, &flips);
    }
}

/// A valid body with bytes changed and its end cut: errors, never panics.
fn mangle_and_decode(cut: usize, flips: &[(usize, u8)]) {
    let mut body = envelope("v1", "ConfigMap", config_map("web", "12"));
    for &(at, byte) in flips {
        let len = body.len();
        body[at % len] = byte;
    }
    body.truncate(cut.min(body.len()));
    let _ = decode_object::<ConfigMap>(&body);
    let _ = decode_watch_event::<ConfigMap>(&body, cm_kind());
}

/// The failing case proptest once found (and shrank) for the test above, replayed on every
/// run: the property tests keep no regression file.
#[test]
fn a_mangled_body_proptest_once_found_never_panics() {
    mangle_and_decode(36, &[(301, 57)]);
}
