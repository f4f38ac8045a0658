use std::path::Path;

use serde_json::{Value, json};

use super::wire::len_field;
use super::*;

/// Kubernetes' own golden files (k8s.io/api `testdata/HEAD`): the same fuzzed object of
/// each kind as protobuf (`.pb`) and JSON (`.json`).
fn golden() -> Vec<(String, Vec<u8>, Value)> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../kube-informer/tests/protobuf/testdata");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the golden files") {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("pb") {
            continue;
        }
        let pb = std::fs::read(&path).unwrap();
        let json =
            serde_json::from_slice(&std::fs::read(path.with_extension("json")).unwrap()).unwrap();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((name, pb, json));
    }
    assert!(out.len() > 90, "{} golden files", out.len());
    out
}

#[test]
fn every_golden_protobuf_body_reads_as_its_json_twin() {
    let mut differ = Vec::new();
    for (name, pb, json) in golden() {
        let read = read_body(&pb).unwrap_or_else(|e| panic!("{name}: {:?}", e.body));
        if read != json {
            differ.push(name);
        }
    }
    assert!(
        differ.is_empty(),
        "read differently from their JSON: {differ:?}"
    );
}

#[test]
fn every_golden_object_written_as_protobuf_reads_back_the_same() {
    for (name, _, json) in golden() {
        let message = schema::kind(
            json["apiVersion"].as_str().unwrap(),
            json["kind"].as_str().unwrap(),
        )
        .unwrap_or_else(|| panic!("{name}: no message"));
        let body = object(message, &json).unwrap_or_else(|e| panic!("{name}: {:?}", e.body));
        assert!(body.starts_with(MAGIC));
        let back = read_body(&body).unwrap_or_else(|e| panic!("{name}: {:?}", e.body));
        assert_eq!(back, json, "{name}");
    }
}

#[test]
fn answers_follow_the_accept_header_in_order() {
    let pb = "application/vnd.kubernetes.protobuf";
    assert!(
        negotiate(&format!("{pb}, application/json"), "v1", "Pod")
            .unwrap()
            .is_protobuf()
    );
    assert!(
        negotiate(&format!("{pb};stream=watch"), "v1", "Pod")
            .unwrap()
            .is_protobuf()
    );
    assert!(
        !negotiate(&format!("application/json, {pb}"), "v1", "Pod")
            .unwrap()
            .is_protobuf()
    );
    assert!(!negotiate("", "v1", "Pod").unwrap().is_protobuf());
    assert!(!negotiate("*/*", "v1", "Pod").unwrap().is_protobuf());
    // Ranked as kube-apiserver ranks them: by q, then specific types before wildcards.
    assert!(
        negotiate(&format!("*/*, {pb}"), "v1", "Pod")
            .unwrap()
            .is_protobuf()
    );
    assert!(
        negotiate(&format!("application/json;q=0.5, {pb}"), "v1", "Pod")
            .unwrap()
            .is_protobuf()
    );
    assert!(
        !negotiate(&format!("{pb};q=0, application/json"), "v1", "Pod")
            .unwrap()
            .is_protobuf()
    );
    // A custom resource: JSON when the client takes it, 406 when it takes only protobuf.
    assert!(
        !negotiate(
            &format!("{pb}, application/json"),
            "example.com/v1",
            "Widget"
        )
        .unwrap()
        .is_protobuf()
    );
    assert_eq!(
        negotiate(pb, "example.com/v1", "Widget").unwrap_err().code,
        406
    );
}

#[test]
fn a_watch_frame_is_a_length_and_an_event_around_the_body() {
    let body = envelope("v1", "ConfigMap", b"");
    let frame = frame("ADDED", &body);
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - 4);
    let mut reader = Reader::new(&frame[4..]);
    let (n, Raw::Len(kind)) = reader.next().unwrap().unwrap() else {
        panic!()
    };
    assert_eq!((n, kind), (1, &b"ADDED"[..]));
    let (n, Raw::Len(raw_extension)) = reader.next().unwrap().unwrap() else {
        panic!()
    };
    assert_eq!(n, 2);
    let (n, Raw::Len(object)) = Reader::new(raw_extension).next().unwrap().unwrap() else {
        panic!()
    };
    assert_eq!((n, object), (1, &body[..]));
}

#[test]
fn bad_bodies_are_400s_that_say_what_is_wrong() {
    let cases: [(&[u8], &str); 4] = [
        (b"{\"kind\":\"Pod\"}", "magic"),
        (b"k8s\0\x0a\x7f", "a length of 127 with 0 bytes left"),
        (
            b"k8s\0\x0a\x0c\x0a\x02v1\x12\x06Widget",
            "Widget (v1) has no protobuf encoding",
        ),
        (
            b"k8s\0\x0a\x09\x0a\x02v1\x12\x03Pod\x12\x02\x0f\x00",
            "wire type 7",
        ),
    ];
    for (body, expected) in cases {
        let error = read_body(body).unwrap_err();
        assert_eq!(error.code, 400);
        let message = error.body["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message:?} lacks {expected:?}");
    }
}

#[test]
fn an_object_json_cannot_hold_in_protobuf_is_a_500_naming_the_field() {
    let pod = schema::kind("v1", "Pod").unwrap();
    let error = object(
        pod,
        &json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": "nginx"}}),
    )
    .unwrap_err();
    assert_eq!(error.code, 500);
    let message = error.body["message"].as_str().unwrap();
    assert!(
        message.contains("spec: containers: a string is not an array"),
        "{message}"
    );
}

#[test]
fn mangled_bodies_are_errors_never_panics() {
    // Every golden body cut short, and with bytes overwritten, 40 times each (seeded).
    let mut rng = fastrand::Rng::with_seed(28);
    let mut refused = 0;
    for (name, pb, _) in golden() {
        for _ in 0..40 {
            let mut body = pb.clone();
            match rng.u8(0..3) {
                0 => body.truncate(rng.usize(0..body.len())),
                1 => {
                    for _ in 0..rng.usize(1..8) {
                        let at = rng.usize(4..body.len());
                        body[at] = rng.u8(..);
                    }
                }
                _ => {
                    let at = rng.usize(4..body.len());
                    body.insert(at, rng.u8(..));
                }
            }
            if let Err(error) = read_body(&body) {
                assert_eq!(error.code, 400, "{name}");
                refused += 1;
            }
        }
    }
    assert!(refused > 1000, "most mangled bodies are refused: {refused}");
}

#[test]
fn a_body_nested_without_end_is_refused_not_a_stack_overflow() {
    // A message that holds itself (the schema has one), nested 1,000 deep.
    let (index, number) = schema::messages()
        .iter()
        .enumerate()
        .find_map(|(i, m)| {
            let own = kube_protobuf_schema::Ty::Message(u16::try_from(i).ok()?);
            m.fields
                .iter()
                .find(|f| f.ty == own && !f.inline)
                .map(|f| (i, f.number))
        })
        .expect("a self-nesting message");
    let message = &schema::messages()[index];
    let mut inner = Vec::new();
    for _ in 0..1_000 {
        let mut outer = Vec::new();
        len_field(&mut outer, number, &inner);
        inner = outer;
    }
    let error = decode::object(&inner, message).unwrap_err();
    assert!(error.contains("nested deeper than"), "{error}");
}
