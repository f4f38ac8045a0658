//! The shard selector as kube-apiserver 1.36 parses and matches it: FNV-1a 64 of the
//! field's string, `[start, end)` ranges joined with `||`, the upstream error texts.

use super::{ShardSelector, hash};
use crate::meta::Meta;

fn meta(uid: &str, namespace: Option<&str>) -> Meta {
    let value = serde_json::json!({"metadata": {"name": "x", "uid": uid, "namespace": namespace}});
    Meta::from_value(&value)
}

#[test]
fn the_hash_is_fnv_1a_64_of_the_string() {
    for (text, expected) in [
        ("", 0xcbf2_9ce4_8422_2325u64),
        ("a", 0xaf63_dc4c_8601_ec8c),
        ("default", 0xebad_a516_8620_c5fe),
        ("kube-system", 0xdf65_c7bc_1d82_b35e),
        (
            "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
            0x9375_4b72_48a0_0eb9,
        ),
    ] {
        assert_eq!(hash(text), expected, "{text:?}");
    }
}

#[test]
fn ranges_are_half_open_and_joined_with_or() {
    let h = hash("default");
    let at = format!("0x{h:016x}");
    let next = format!("0x{:016x}", h + 1);
    let one = |start: &str, end: &str| {
        ShardSelector::parse(&format!(
            "shardRange(object.metadata.namespace, '{start}', '{end}')"
        ))
        .unwrap()
    };
    let default = meta("u", Some("default"));
    assert!(one(&at, &next).matches(&default), "start included");
    assert!(
        !one("0x0000000000000000", &at).matches(&default),
        "end excluded"
    );
    assert!(one("0x0000000000000000", "0x10000000000000000").matches(&default));
    let either = ShardSelector::parse(&format!(
        "shardRange(object.metadata.namespace,'0x0000000000000000','{at}') ||shardRange(object.metadata.namespace, \"{at}\", '0x10000000000000000')"
    ))
    .unwrap();
    assert!(either.matches(&default));
    assert_eq!(
        either.canonical(),
        format!(
            "shardRange(object.metadata.namespace, '0x0000000000000000', '{at}') || shardRange(object.metadata.namespace, '{at}', '0x10000000000000000')"
        ),
        "normalised as the server echoes it"
    );
    // Cluster-scoped objects hash the empty namespace.
    let everything_but_empty = one("0x0000000000000000", "0xcbf29ce484222325");
    assert!(!everything_but_empty.matches(&meta("u", None)));
}

#[test]
fn uids_are_hashed_as_written() {
    let uid = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    let selector = ShardSelector::parse(
        "shardRange(object.metadata.uid, '0x9375000000000000', '0x9376000000000000')",
    )
    .unwrap();
    assert!(selector.matches(&meta(uid, Some("ns"))));
    assert!(!selector.matches(&meta(&uid.to_uppercase(), Some("ns"))));
}

#[test]
fn malformed_selectors_get_the_servers_messages() {
    let zero = "'0x0000000000000000'";
    let top = "'0x8000000000000000'";
    for (text, expected) in [
        ("  ", "empty shard selector is not allowed"),
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
        ),
        (
            &format!("shardRange(object.metadata.uid, {zero}, '0x8000000000000ABC')"),
            "hexEnd must be a 0x-prefixed 16-digit hex value",
        ),
        (
            &format!("shardRange(object.metadata.uid, {zero}, '8000000000000000')"),
            "hexEnd must have '0x' prefix",
        ),
        (
            &format!("shardRange(object.metadata.uid, {top}, {zero})"),
            "shard range start 0x8000000000000000 must be less than end 0x0000000000000000",
        ),
        (
            &format!("shardRange(object.metadata.name, {zero}, {top})"),
            "unsupported field path \"object.metadata.name\"",
        ),
        (
            &format!("shardRange(object.metadata.uid, {zero})"),
            "shardRange() requires exactly 3 arguments, got 2",
        ),
        (
            &format!("hashRange(object.metadata.uid, {zero}, {top})"),
            "unsupported function \"hashRange\"",
        ),
        (
            &format!(
                "shardRange(object.metadata.uid, {zero}, {top}) || shardRange(object.metadata.namespace, {zero}, {top})"
            ),
            "all shard ranges must use the same field",
        ),
    ] {
        let err = ShardSelector::parse(text).expect_err(text);
        assert!(err.starts_with(expected), "{text:?}: {err}");
    }
}
