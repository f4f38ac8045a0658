//! Every built-in kind k8s-openapi has, decoded from Kubernetes' own protobuf golden files
//! (k8s.io/api `testdata/HEAD`, the same fuzzed object in protobuf and in JSON) equals the
//! same object decoded from the JSON by serde: the protobuf decoder is as faithful as JSON
//! for each of them, field by field (times, quantities, int-or-strings, raw extensions,
//! managed fields, maps, inlined structs, bytes, zero values JSON omits).

use std::path::Path;

use kube_informer::protobuf::{ProtoKind, decode_object_of};
use serde::{Serialize, de::DeserializeOwned};

#[macro_use]
#[path = "protobuf/kinds.rs"]
mod kinds;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/protobuf/testdata");

/// The first path where two JSON values differ.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let (l, r) = (
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                );
                if let Some(found) = first_difference(l, r, &format!("{path}.{key}")) {
                    return Some(found);
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (l, r))| first_difference(l, r, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: protobuf {a} / JSON {b}")),
    }
}

fn check<K>(name: &str, failures: &mut Vec<String>, unreadable: &mut Vec<String>)
where
    K: k8s_openapi::Resource + DeserializeOwned + Serialize + PartialEq + 'static,
{
    let dir = Path::new(DIR);
    let pb = std::fs::read(dir.join(format!("{name}.pb"))).unwrap();
    let json = std::fs::read(dir.join(format!("{name}.json"))).unwrap();
    // The fuzzer writes values k8s-openapi's types refuse (`null` where they want a time,
    // say): such a file says nothing about protobuf.
    let from_json: K = match serde_json::from_slice(&json) {
        Ok(object) => object,
        Err(error) => {
            unreadable.push(format!("{name}: {error}"));
            return;
        }
    };
    let kind = ProtoKind::of_type::<K>().expect("a built-in kind");
    assert!(kind.has_generated_decoder(), "{name}: no generated decoder");
    // The generated decoder, and the serde path (which DynamicObject and compact objects
    // take): each equal to JSON.
    for (path, kind) in [
        ("generated", kind),
        ("serde", kind.without_generated_decoder()),
    ] {
        match decode_object_of::<K>(&pb, kind) {
            Err(error) => failures.push(format!("{name} ({path}): {error}")),
            Ok(from_pb) if from_pb != from_json => {
                let (a, b) = (
                    serde_json::to_value(&from_pb).unwrap(),
                    serde_json::to_value(&from_json).unwrap(),
                );
                let found =
                    first_difference(&a, &b, "").unwrap_or_else(|| "equal as JSON".to_owned());
                failures.push(format!("{name} ({path}): {found}"));
            }
            Ok(_) => {}
        }
    }
}

macro_rules! kinds {
    ($($name:literal => $ty:ty,)*) => {
        #[test]
        fn every_built_in_kind_decodes_from_protobuf_as_from_json() {
            let (mut failures, mut unreadable) = (Vec::new(), Vec::new());
            let mut checked = 0;
            $(
                check::<$ty>($name, &mut failures, &mut unreadable);
                checked += 1;
            )*
            eprintln!("{} kinds; JSON that k8s-openapi cannot read ({}):\n{}", checked, unreadable.len(), unreadable.join("\n"));
            assert!(failures.is_empty(), "{} of {checked} kinds differ:\n{}", failures.len(), failures.join("\n"));
            assert!(unreadable.len() * 10 < checked, "too few kinds compared: {}", unreadable.len());
        }
    };
}

every_kind!(kinds);
