//! The generator of `src/protobuf/typed/generated.rs`, the per-type protobuf decoders, and
//! the check that the checked-in file is what it generates today.
//!
//! It reads two things: the protobuf schema (`kube-protobuf-schema`: each message's fields
//! by number, with their JSON names, shapes and zero rules) and k8s-openapi's sources, for
//! every Kubernetes version the crate supports (each struct's fields: Rust name, type, and
//! the JSON name its `Deserialize` matches). For each message that is a k8s-openapi struct
//! it writes a `Decode` impl whose `match` maps field numbers to the struct's fields; a
//! struct that differs between versions gets one impl per version, behind k8s-openapi's
//! `k8s_if_1_NN!` macros, so the file compiles for whichever version a user enables.
//!
//! Regenerate after updating k8s-openapi or the schema:
//! `UPDATE_PROTOBUF_DECODERS=1 cargo test -p kube-informer --test integration protobuf_codegen`.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    path::{Path, PathBuf},
};

use kube_protobuf_schema::{self as schema, Message, Rep, Shape, Ty};

const OUT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/protobuf/typed/generated.rs"
);
const VERSIONS: std::ops::RangeInclusive<u32> = 33..=37;
const OBJECT_META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// One k8s-openapi struct of one version.
#[derive(Debug)]
struct Struct {
    /// `k8s_openapi::api::core::v1::Pod`.
    path: String,
    /// JSON name → (Rust field, Rust type).
    fields: BTreeMap<String, (String, String)>,
    /// Whether it is a struct of named fields that derives `Default` (not when a field is a
    /// required time): else the serde path reads it.
    default: bool,
}

fn k8s_openapi_src() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let rustc = std::process::Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    let host = String::from_utf8(rustc.stdout).unwrap();
    let host = host
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc names its host");
    // Only this platform's packages: every one of them is on disk, as it was built.
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            host,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata failed");
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let manifest = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "k8s-openapi")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("k8s-openapi among the packages");
    Path::new(manifest).parent().unwrap().join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("mod.rs") {
            out.push(path);
        }
    }
}

/// Every struct of one version, by its OpenAPI definition name (`io.k8s.api.core.v1.Pod`).
fn structs(src: &Path, version: u32) -> BTreeMap<String, Struct> {
    let root = src.join(format!("v1_{version}"));
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut found = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let Some(definition) = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// Generated from definition "))
        else {
            continue;
        };
        let module = file
            .strip_prefix(&root)
            .unwrap()
            .parent()
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_str().unwrap())
            .collect::<Vec<_>>()
            .join("::");
        let Some(name) = text.lines().find_map(|l| {
            l.strip_prefix("pub struct ")
                .and_then(|rest| rest.strip_suffix(" {"))
        }) else {
            // A newtype (`StorageVersionSpec(Value)`): the serde path reads it. (Enums are
            // messages of other shapes, or none: `Patch`, `WatchEvent<T>`.)
            let declared = text.lines().find_map(|l| {
                let rest = l.strip_prefix("pub struct ")?;
                Some(rest.split_once('(')?.0.to_owned())
            });
            if let Some(name) = declared {
                let strukt = Struct {
                    path: format!("k8s_openapi::{module}::{name}"),
                    fields: BTreeMap::new(),
                    default: false,
                };
                found.insert(definition.replace('-', "_"), strukt);
            }
            continue;
        };
        // The struct's fields, in declaration order.
        let mut types = BTreeMap::new();
        let mut in_struct = false;
        for line in text.lines() {
            if line == format!("pub struct {name} {{") {
                in_struct = true;
            } else if in_struct && line == "}" {
                break;
            } else if in_struct && let Some(decl) = line.trim().strip_prefix("pub ") {
                let (field, ty) = decl.split_once(": ").unwrap();
                let ty = ty
                    .strip_suffix(',')
                    .unwrap()
                    .replace("crate::", "k8s_openapi::");
                types.insert(field.to_owned(), ty);
            }
        }
        // The JSON names its Deserialize matches: `"hostIP" => Field::Key_host_ip,`.
        let mut fields = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            let Some((json, key)) = line.split_once(" => Field::Key_") else {
                continue;
            };
            let (Some(json), Some(rust)) = (
                json.strip_prefix('"').and_then(|j| j.strip_suffix('"')),
                key.strip_suffix(','),
            ) else {
                continue;
            };
            if let Some(ty) = types.get(rust) {
                fields.insert(json.to_owned(), (rust.to_owned(), ty.clone()));
            }
        }
        let path = format!("k8s_openapi::{module}::{name}");
        let default = text.contains("#[derive(Clone, Debug, Default, PartialEq)]\npub struct ");
        let strukt = Struct {
            path,
            fields,
            default,
        };
        found.insert(definition.replace('-', "_"), strukt);
    }
    found
}

fn definition(message: &Message) -> String {
    let name = message.name.strip_prefix("k8s.io.").unwrap_or(message.name);
    format!("io.k8s.{name}").replace('-', "_")
}

/// The helper a field is read with, from its protobuf shape and its Rust type.
fn helper(field: &schema::Field, ty: &str, context: &str) -> &'static str {
    let optional = ty.starts_with("Option<");
    let inner = ty
        .strip_prefix("Option<")
        .and_then(|t| t.strip_suffix('>'))
        .unwrap_or(ty);
    match field.rep {
        Rep::Single => {
            let list = field.ty.message().is_some_and(|m| m.shape == Shape::List);
            assert!(
                !inner.starts_with("std::vec::Vec<") || list,
                "{context}: one value into {ty}"
            );
            match (optional, field.omit_zero) {
                (true, false) => "opt",
                (true, true) => "opt_nz",
                (false, false) => "req",
                (false, true) => "req_nz",
            }
        }
        Rep::Repeated => {
            assert!(
                inner.starts_with("std::vec::Vec<"),
                "{context}: repeated into {ty}"
            );
            if optional { "vec_opt" } else { "vec_req" }
        }
        Rep::Map => {
            assert!(
                inner.starts_with("std::collections::BTreeMap<std::string::String, "),
                "{context}: a map into {ty}"
            );
            if optional { "map_opt" } else { "map_req" }
        }
    }
}

/// The arms of a message's `match`, onto `strukt`'s fields (inlined messages flattened).
fn arms(message: &Message, strukt: &Struct, indent: &str, out: &mut String) {
    if message.name == OBJECT_META {
        writeln!(out, "{indent}17 if v.skips_managed_fields() => Ok(()),").unwrap();
    }
    for field in message.fields {
        let context = format!("{}.{}", message.name, field.json);
        if field.inline {
            let Ty::Message(index) = field.ty else {
                continue;
            };
            let inner = schema::message(index);
            let mut nested = String::new();
            arms(inner, strukt, &format!("{indent}        "), &mut nested);
            if nested.is_empty() {
                continue;
            }
            writeln!(out, "{indent}{} => v.each(|n, v| match n {{", field.number).unwrap();
            out.push_str(&nested);
            writeln!(out, "{indent}    _ => Ok(()),\n{indent}}}),").unwrap();
            continue;
        }
        let Some((rust, ty)) = strukt.fields.get(field.json) else {
            continue; // a field this version of k8s-openapi does not have
        };
        let helper = helper(field, ty, &context);
        writeln!(
            out,
            "{indent}{} => {helper}(&mut self.{rust}, v).map_err(|e| e.within({:?})),",
            field.number, field.json
        )
        .unwrap();
    }
}

fn decoder(message: &Message, strukt: &Struct) -> String {
    let this = &strukt.path;
    if !strukt.default {
        // No empty value to fill in (a required time): the serde path builds it.
        return format!(
            "impl Decode for {this} {{\n    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {{\n        serde(v, {:?})\n    }}\n}}\n",
            message.name
        );
    }
    let mut body = String::new();
    arms(message, strukt, "            ", &mut body);
    let in_place = "fn merge_option(slot: &mut Option<Self>, v: Val<'_>) -> Result<(), DecodeError> {\n        message_in_place(slot, v)\n    }\n\n    fn extend(out: &mut Vec<Self>, v: Val<'_>) -> Result<(), DecodeError> {\n        element_in_place(out, v)\n    }";
    let merge = if body.is_empty() {
        "fn merge(&mut self, _: Val<'_>) -> Result<(), DecodeError> {\n        Ok(())\n    }"
            .to_owned()
    } else {
        format!(
            "fn merge(&mut self, v: Val<'_>) -> Result<(), DecodeError> {{\n        v.each(|n, v| match n {{\n{body}            _ => Ok(()),\n        }})\n    }}"
        )
    };
    format!(
        "impl Decode for {this} {{\n    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {{\n        message(v)\n    }}\n\n    {merge}\n\n    {in_place}\n}}\n"
    )
}

/// Wraps `item` for the versions it holds for.
fn gated(item: &str, versions: &BTreeSet<u32>, out: &mut String) {
    let (first, last) = (*VERSIONS.start(), *VERSIONS.end());
    let all: BTreeSet<u32> = VERSIONS.collect();
    if *versions == all {
        out.push_str(item);
        out.push('\n');
        return;
    }
    let low = *versions.first().unwrap();
    let high = *versions.last().unwrap();
    let contiguous = versions.len() as u32 == high - low + 1;
    let gate = if contiguous && high == last {
        vec![format!("k8s_if_ge_1_{low}")]
    } else if contiguous && low == first {
        vec![format!("k8s_if_le_1_{high}")]
    } else {
        versions.iter().map(|v| format!("k8s_if_1_{v}")).collect()
    };
    for gate in gate {
        writeln!(out, "k8s_openapi::{gate}! {{\n{item}}}\n").unwrap();
    }
}

fn generate() -> String {
    let src = k8s_openapi_src();
    let versions: BTreeMap<u32, BTreeMap<String, Struct>> =
        VERSIONS.map(|v| (v, structs(&src, v))).collect();
    let mut out = String::from(
        "// Generated by `tests/protobuf_codegen.rs` from the protobuf schema and k8s-openapi's\n\
         // sources: do not edit. Regenerate with\n\
         // `UPDATE_PROTOBUF_DECODERS=1 cargo test -p kube-informer --test integration protobuf_codegen`.\n\n\
         use super::*;\n\n",
    );
    // Top-level kinds, per version: (message name, Rust path).
    let mut kinds: BTreeMap<u32, Vec<(String, String)>> = BTreeMap::new();
    for message in schema::messages() {
        if message.shape != Shape::Object {
            continue;
        }
        let definition = definition(message);
        let mut by_text: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
        for (version, structs) in &versions {
            let Some(strukt) = structs.get(&definition) else {
                continue;
            };
            by_text
                .entry(decoder(message, strukt))
                .or_default()
                .insert(*version);
            if strukt.default && schema::kind_of(schema::index_of(message)).is_some() {
                kinds
                    .entry(*version)
                    .or_default()
                    .push((message.name.to_owned(), strukt.path.clone()));
            }
        }
        for (text, versions) in &by_text {
            gated(text, versions, &mut out);
        }
    }
    // The top-level kinds' decoders, by message name, one function per version.
    let mut by_text: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for (version, kinds) in &kinds {
        let mut text = String::from(
            "pub(super) fn direct(message: &str) -> Option<Direct> {\n    Some(match message {\n",
        );
        for (name, path) in kinds {
            writeln!(text, "        {name:?} => Direct::of::<{path}>(),").unwrap();
        }
        text.push_str("        _ => return None,\n    })\n}\n");
        by_text.entry(text).or_default().insert(*version);
    }
    for (text, versions) in &by_text {
        gated(text, versions, &mut out);
    }
    out
}

#[test]
fn the_generated_decoders_are_up_to_date() {
    let generated = generate();
    if std::env::var_os("UPDATE_PROTOBUF_DECODERS").is_some() {
        std::fs::write(OUT, &generated).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(OUT).unwrap_or_default();
    assert!(
        checked_in == generated,
        "src/protobuf/typed/generated.rs is not what the generator makes from this schema and \
         k8s-openapi: regenerate it with \
         `UPDATE_PROTOBUF_DECODERS=1 cargo test -p kube-informer --test integration protobuf_codegen`"
    );
}
