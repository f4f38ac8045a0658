//! The deserializer's unit tests: nesting depth, empty packed runs, error offsets.

use kube_protobuf_schema::{self as schema, Ty};

use super::{Skip, decode};

fn len_field(number: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut put = |mut v: u64| {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    };
    put(u64::from(number) << 3 | 2);
    put(body.len() as u64);
    out.extend_from_slice(body);
    out
}

#[test]
fn a_self_nesting_message_sent_too_deep_is_an_error_not_a_stack_overflow() {
    // A message with a field of its own type (there is one among the built-in types).
    let (index, number) = schema::messages()
        .iter()
        .enumerate()
        .find_map(|(i, m)| {
            let own = Ty::Message(u16::try_from(i).ok()?);
            m.fields
                .iter()
                .find(|f| f.ty == own && !f.inline)
                .map(|f| (i, f.number))
        })
        .expect("a self-nesting message");
    let message = &schema::messages()[index];
    let nest = |depth: usize| (0..depth).fold(Vec::new(), |inner, _| len_field(number, &inner));
    let shallow = decode::<serde_json::Value>(&nest(20), 0, message, Skip::default());
    assert!(shallow.is_ok(), "{shallow:?}");
    let error = decode::<serde_json::Value>(&nest(400), 0, message, Skip::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("nested deeper than 128"), "{error}");
}

#[test]
fn many_empty_packed_runs_are_read_in_a_loop() {
    // PodSecurityContext.supplementalGroups (4, int64): 200k empty packed occurrences.
    let message = schema::named("k8s.io.api.core.v1.PodSecurityContext").unwrap();
    let body: Vec<u8> = std::iter::repeat_n([0x22u8, 0x00], 200_000)
        .flatten()
        .collect();
    let value: serde_json::Value = decode(&body, 0, message, Skip::default()).unwrap();
    assert_eq!(value["supplementalGroups"], serde_json::json!([]));
    // And a real packed run among them.
    let mut body = body;
    body.extend_from_slice(&[0x22, 0x02, 0x05, 0x07]);
    let value: serde_json::Value = decode(&body, 0, message, Skip::default()).unwrap();
    assert_eq!(value["supplementalGroups"], serde_json::json!([5, 7]));
}

#[test]
fn an_error_deep_inside_points_at_its_byte() {
    // Pod{metadata{name: <not UTF-8>}}: the offset is that of the bad bytes.
    let pod = schema::named("k8s.io.api.core.v1.Pod").unwrap();
    let body = len_field(1, &len_field(1, &[b'o', b'k', 0xff]));
    let error = decode::<serde_json::Value>(&body, 100, pod, Skip::default()).unwrap_err();
    let at = error.offset().unwrap() - 100;
    assert_eq!(&body[at..], &[b'o', b'k', 0xff], "{error}");
}
