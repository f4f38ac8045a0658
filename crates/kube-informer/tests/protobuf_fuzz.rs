//! Mutation fuzzing of every protobuf entry point — objects of every built-in kind, lists,
//! watch frames and the frame splitter, Status, compact objects — from Kubernetes' golden
//! objects (`tests/protobuf/testdata`, one per kind) wrapped as a GET, a LIST and a watch
//! stream would carry them. Each input is one of those bodies changed by a few seeded,
//! structure-aware mutations: length prefixes and frame headers rewritten (to 0, off by
//! one, 2³¹, 2⁶⁴−1), tags given another wire type or an unknown number, fields cut,
//! duplicated, spliced from another kind or nested in themselves, varints made overlong,
//! bytes flipped, bodies cut short. Nothing may panic: every refusal is a `DecodeError`.
//!
//! And every reader must agree (differential fuzzing): each mangled GET body of a kind
//! k8s-openapi has is decoded by the generated decoder, by the serde path, as JSON (the
//! serde path's JSON read by serde_json) and kept compact then decoded — with and without
//! managedFields. Where both typed readers read it, every reader must, and give the same
//! object (where only one does, the other met malformed bytes it alone looks at; counted). Inputs
//! encoded as no Go encoder would in a way the readers take differently by design (a
//! field meant once given twice, a repeated field in two runs: protobuf merges or appends
//! where JSON keeps the last) are left out of the comparison (`differs_by_design`).
//!
//! `cargo test` runs a short pass; CI runs a long one optimised (`.ci/run`, a few minutes):
//! `KUBE_INFORMER_FUZZ_ITERATIONS` (default 3,000) and `KUBE_INFORMER_FUZZ_SEED` (default
//! 28) choose the run. An input that panics is written to
//! `$CARGO_TARGET_TMPDIR/protobuf-crashers/` and fails the test; moved into
//! `tests/protobuf/crashers/`, it is replayed by every run from then on
//! (`kept_crashers_stay_fixed`).

use std::{
    ops::Range,
    panic::{AssertUnwindSafe, catch_unwind},
    path::{Path, PathBuf},
};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, fixtures::realistic_pod};
use http_body_util::BodyExt;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::Resource;
use kube::api::WatchEvent;
use kube_informer::{
    compact::Compact,
    protobuf::{
        ListBody, ProtoKind, decode_object, decode_object_of, decode_status, decode_watch_event,
        split_frames,
    },
};
use kube_protobuf_schema as schema;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

#[macro_use]
#[path = "protobuf/kinds.rs"]
mod kinds;

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/protobuf/testdata");
const CRASHERS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/protobuf/crashers");

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn len_field(out: &mut Vec<u8>, number: u64, value: &[u8]) {
    varint(out, number << 3 | 2);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn read_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// One field as found: where it starts, where its length prefix is (length-delimited
/// fields), its payload and its end.
#[derive(Clone, Debug)]
struct Field {
    start: usize,
    length: Option<Range<usize>>,
    payload: Range<usize>,
}

/// The fields of `buf[range]`, and those of every length-delimited payload that reads
/// whole as fields (a best-effort walk: it stops where the bytes stop being protobuf).
fn scan(buf: &[u8], range: Range<usize>, depth: u32, out: &mut Vec<Field>) -> bool {
    let mut at = range.start;
    while at < range.end {
        let start = at;
        let Some(tag) = read_varint(&buf[..range.end], &mut at) else {
            return false;
        };
        let (length, payload) = match tag & 7 {
            0 => {
                let from = at;
                if read_varint(&buf[..range.end], &mut at).is_none() {
                    return false;
                }
                (None, from..at)
            }
            1 | 5 => {
                let size = if tag & 7 == 1 { 8 } else { 4 };
                if at + size > range.end {
                    return false;
                }
                at += size;
                (None, at - size..at)
            }
            2 => {
                let from = at;
                let Some(len) = read_varint(&buf[..range.end], &mut at) else {
                    return false;
                };
                let Some(end) = usize::try_from(len).ok().and_then(|l| at.checked_add(l)) else {
                    return false;
                };
                if end > range.end {
                    return false;
                }
                let length = from..at;
                at = end;
                (Some(length), end - len as usize..end)
            }
            _ => return false,
        };
        out.push(Field {
            start,
            length: length.clone(),
            payload: payload.clone(),
        });
        if length.is_some() && depth < SCAN_DEPTH {
            let mut inner = Vec::new();
            if scan(buf, payload, depth + 1, &mut inner) {
                out.extend(inner);
            }
        }
    }
    true
}

/// How deep `scan` goes into length-delimited payloads (started at this depth: only the
/// top level).
const SCAN_DEPTH: u32 = 12;

/// Where a body's protobuf starts: after the `k8s\0` magic, or after a frame's header.
fn fields_of(body: &[u8]) -> Vec<Field> {
    let skip = usize::from(body.starts_with(b"k8s\0")) * 4;
    let mut out = Vec::new();
    scan(body, skip..body.len(), 0, &mut out);
    if out.is_empty() && body.len() > 4 {
        scan(body, 4..body.len(), 0, &mut out);
    }
    out
}

/// A GET's body, the LIST body of two of it, and a watch stream of two frames.
struct Seed {
    kind: ProtoKind,
    /// `<apiVersion with _ for />-<Kind>`: how a crasher of this seed is named.
    name: String,
    /// The golden file's stem (`core.v1.Pod`): which type the readers compared build.
    stem: Option<String>,
    /// The object's message in the schema.
    message: &'static schema::Message,
    shapes: [Vec<u8>; 3],
}

/// `object` (a GET's body) as the three shapes.
fn seed_of(object: Vec<u8>, api_version: &str, kind: &str) -> Option<Seed> {
    let proto = ProtoKind::of(api_version, kind)?;
    // The envelope's raw object: field 2 of the Unknown after the magic.
    let raw = fields_of(&object)
        .into_iter()
        .find(|f| f.start > 4 && object[f.start] == (2 << 3 | 2))
        .map(|f| object[f.payload].to_vec())
        .expect("an envelope with a raw object");
    let mut type_meta = Vec::new();
    len_field(&mut type_meta, 1, api_version.as_bytes());
    len_field(&mut type_meta, 2, format!("{kind}List").as_bytes());
    let mut list_meta = Vec::new();
    len_field(&mut list_meta, 2, b"12345");
    let mut list_raw = Vec::new();
    len_field(&mut list_raw, 1, &list_meta);
    len_field(&mut list_raw, 2, &raw);
    len_field(&mut list_raw, 2, &raw);
    let mut list = b"k8s\0".to_vec();
    len_field(&mut list, 1, &type_meta);
    len_field(&mut list, 2, &list_raw);
    let mut frames = Vec::new();
    for event in ["ADDED", "MODIFIED"] {
        let mut raw_extension = Vec::new();
        len_field(&mut raw_extension, 1, &object);
        let mut watch_event = Vec::new();
        len_field(&mut watch_event, 1, event.as_bytes());
        len_field(&mut watch_event, 2, &raw_extension);
        frames.extend_from_slice(&(watch_event.len() as u32).to_be_bytes());
        frames.extend_from_slice(&watch_event);
    }
    Some(Seed {
        kind: proto,
        name: format!("{}-{kind}", api_version.replace('/', "_")),
        stem: None,
        message: schema::kind(api_version, kind)?,
        shapes: [object, list, frames],
    })
}

/// One golden object of every kind.
fn seeds() -> Vec<Seed> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(TESTDATA)
        .expect("the golden files")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pb"))
        .collect();
    paths.sort();
    let seeds: Vec<Seed> = paths
        .iter()
        .filter_map(|path| {
            let json: Value =
                serde_json::from_slice(&std::fs::read(path.with_extension("json")).unwrap())
                    .unwrap();
            let (api_version, kind) = (json["apiVersion"].as_str()?, json["kind"].as_str()?);
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            let seed = seed_of(std::fs::read(path).unwrap(), api_version, kind)?;
            Some(Seed {
                stem: Some(stem),
                ..seed
            })
        })
        .collect();
    assert!(seeds.len() > 90, "{} golden kinds", seeds.len());
    seeds
}

/// A 404's `Status`, as a body and as a watch stream's ERROR frame.
fn status_seed() -> Seed {
    let mut details = Vec::new();
    len_field(&mut details, 1, b"web");
    len_field(&mut details, 3, b"pods");
    let mut status = Vec::new();
    len_field(&mut status, 1, &[]);
    len_field(&mut status, 2, b"Failure");
    len_field(&mut status, 3, br#"pods "web" not found"#);
    len_field(&mut status, 4, b"NotFound");
    len_field(&mut status, 5, &details);
    varint(&mut status, 6 << 3);
    varint(&mut status, 404);
    let mut type_meta = Vec::new();
    len_field(&mut type_meta, 1, b"v1");
    len_field(&mut type_meta, 2, b"Status");
    let mut body = b"k8s\0".to_vec();
    len_field(&mut body, 1, &type_meta);
    len_field(&mut body, 2, &status);
    let mut raw_extension = Vec::new();
    len_field(&mut raw_extension, 1, &body);
    let mut watch_event = Vec::new();
    len_field(&mut watch_event, 1, b"ERROR");
    len_field(&mut watch_event, 2, &raw_extension);
    let mut frame = (watch_event.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&watch_event);
    assert_eq!(decode_status(&body).unwrap().code, 404, "the seed reads");
    Seed {
        kind: ProtoKind::of_type::<Pod>().unwrap(),
        name: "v1-Pod".to_owned(),
        stem: None,
        message: schema::kind("v1", "Pod").unwrap(),
        shapes: [body.clone(), body, frame],
    }
}

/// Pods shaped like real ones (fake-apiserver's fixture: containers, probes, volumes,
/// status, managedFields) as a server writes them in protobuf. The golden Pod is fuzzed
/// data that k8s-openapi's types refuse in places, so typed and compact decoding start
/// from these.
fn real_pods() -> Vec<Seed> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let namespaces = (0..3).map(|i| format!("team-{i}"));
        let server = FakeApiServer::start(ServerConfig::default().namespaces(namespaces))
            .await
            .unwrap();
        server
            .seed(&Gvr::core("pods"), (0..3).map(realistic_pod))
            .unwrap();
        let client = server.client().unwrap();
        let mut pods = Vec::new();
        for i in 0..3 {
            let pod = realistic_pod(i);
            let path = format!(
                "/api/v1/namespaces/{}/pods/{}",
                pod["metadata"]["namespace"].as_str().unwrap(),
                pod["metadata"]["name"].as_str().unwrap()
            );
            let request = http::Request::get(path)
                .header("accept", "application/vnd.kubernetes.protobuf")
                .body(Vec::new())
                .unwrap();
            let response = client
                .send(request.map(kube::client::Body::from))
                .await
                .unwrap();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert!(body.starts_with(b"k8s\0"), "a protobuf pod");
            let pod = seed_of(body.to_vec(), "v1", "Pod").unwrap();
            pods.push(Seed {
                stem: Some("core.v1.Pod".to_owned()),
                ..pod
            });
        }
        server.shutdown().await;
        pods
    })
}

const LENGTHS: [u64; 10] = [
    0,
    1,
    2,
    127,
    128,
    1 << 31,
    u32::MAX as u64,
    1 << 40,
    1 << 63,
    u64::MAX,
];

/// Changes `body` once, at a place its structure makes interesting.
fn mutate(rng: &mut fastrand::Rng, body: &mut Vec<u8>, donor: &[u8]) {
    let fields = fields_of(body);
    let field = (!fields.is_empty()).then(|| fields[rng.usize(..fields.len())].clone());
    let any = |rng: &mut fastrand::Rng, len: usize| rng.usize(..len.max(1));
    match (rng.u8(..10), field) {
        (0, Some(f)) if f.length.is_some() => {
            let length = f.length.unwrap();
            let mut new = Vec::new();
            let claimed = match rng.u8(..3) {
                0 => LENGTHS[rng.usize(..LENGTHS.len())],
                1 => (f.payload.len() as u64).saturating_add(1),
                _ => (f.payload.len() as u64).saturating_sub(1),
            };
            varint(&mut new, claimed);
            body.splice(length, new);
        }
        (1, Some(f)) => {
            // Another wire type, or a field number nobody knows.
            let mut at = f.start;
            let tag = read_varint(body, &mut at).unwrap_or(0);
            let new_tag = if rng.bool() {
                tag & !7 | u64::from(rng.u8(..8))
            } else {
                [0u64, 999, (1 << 29) - 1, 19_000][rng.usize(..4)] << 3 | (tag & 7)
            };
            let mut new = Vec::new();
            varint(&mut new, new_tag);
            body.splice(f.start..at, new);
        }
        (2, Some(f)) => {
            body.drain(f.start..f.payload.end);
        }
        (3, Some(f)) => {
            let copy = body[f.start..f.payload.end].to_vec();
            body.splice(f.payload.end..f.payload.end, copy);
        }
        (4, Some(f)) if f.length.is_some() => {
            // Nested in itself: the field's payload becomes the whole field.
            let whole = body[f.start..f.payload.end].to_vec();
            let mut new = Vec::new();
            varint(&mut new, whole.len() as u64);
            new.extend_from_slice(&whole);
            body.splice(f.length.unwrap().start..f.payload.end, new);
        }
        (5, Some(f)) if f.length.is_some() => {
            // A payload from another kind.
            let donors = fields_of(donor);
            if let Some(d) = donors.get(any(rng, donors.len())) {
                let payload = donor[d.payload.clone()].to_vec();
                let mut new = Vec::new();
                varint(&mut new, payload.len() as u64);
                new.extend_from_slice(&payload);
                body.splice(f.length.unwrap().start..f.payload.end, new);
            }
        }
        (6, Some(f)) => {
            // An overlong varint tag (11 bytes: more than any varint may have).
            let mut at = f.start;
            let tag = read_varint(body, &mut at).unwrap_or(0);
            let mut new: Vec<u8> = (0..10).map(|i| ((tag >> (7 * i)) as u8) | 0x80).collect();
            new.push(0);
            body.splice(f.start..at, new);
        }
        (7, _) if body.len() >= 4 && !body.starts_with(b"k8s\0") => {
            let claimed = LENGTHS[rng.usize(..LENGTHS.len())] as u32;
            body[..4].copy_from_slice(&claimed.to_be_bytes());
        }
        (8, _) => body.truncate(any(rng, body.len())),
        _ => {
            for _ in 0..rng.usize(1..4) {
                let at = any(rng, body.len());
                if let Some(byte) = body.get_mut(at) {
                    *byte = rng.u8(..);
                }
            }
        }
    }
}

/// The entry points, in the order [`decode_everything`] counts what each read.
const ENTRY_POINTS: [&str; 6] = [
    "object",
    "list items",
    "watch frames",
    "Status",
    "typed Pod",
    "compact Pod",
];

/// Every entry point, on one input: which of them read it (a bit each, in
/// [`ENTRY_POINTS`] order). Only a panic is a failure.
fn decode_everything(body: &[u8], kind: ProtoKind) -> u8 {
    let mut read = 0;
    let mut count = |bit: u8, ok: bool| read |= u8::from(ok) << bit;
    count(0, decode_object_of::<Value>(body, kind).is_ok());
    let _ = decode_object_of::<Value>(body, kind.without_managed_fields());
    if let Ok(list) = ListBody::parse(body, kind) {
        count(1, list.items::<Value>().is_ok());
    }
    if let Ok((frames, _)) = split_frames(body, 1 << 20) {
        let decoded = frames
            .iter()
            .filter(|frame| decode_watch_event::<Value>(frame, kind).is_ok())
            .count();
        count(2, decoded > 0);
    }
    let _ = decode_watch_event::<Value>(body, kind);
    count(3, decode_status(body).is_ok());
    count(4, decode_object::<Pod>(body).is_ok());
    let _ = decode_object::<Deployment>(body);
    let pod = ProtoKind::of_type::<Pod>().expect("Pod has a protobuf encoding");
    // The generated decoder reads typed objects; the serde path still reads them where
    // none is generated (and everything else).
    let _ = decode_object_of::<Pod>(body, pod.without_generated_decoder());
    if let Ok(compact) = decode_object_of::<Compact<Pod>>(body, pod) {
        let _ = compact.json();
        count(5, compact.decode().is_ok());
    }
    if let Ok(WatchEvent::Added(compact)) = decode_watch_event::<Compact<Pod>>(body, kind) {
        let _ = compact.json();
    }
    // Any kind's message kept compact, with and without its managed fields: the arrival
    // check and the decoder must agree (debug builds assert it) on every kind's shapes.
    for kind in [kind, kind.without_managed_fields()] {
        if let Ok(compact) = decode_object_of::<Compact<Pod>>(body, kind) {
            let _ = compact.json();
        }
    }
    read
}

/// A field's tag and, for a length-delimited one, its payload.
type TopField<'a> = (u64, Option<&'a [u8]>);

/// The top-level fields of a message's bytes: each tag and, for a length-delimited one, its
/// payload; `None` when the bytes are not fields.
fn top_fields(buf: &[u8]) -> Option<Vec<TopField<'_>>> {
    let mut fields = Vec::new();
    if !scan(buf, 0..buf.len(), SCAN_DEPTH, &mut fields) {
        return None;
    }
    let top = fields.into_iter().map(|field| {
        let tag = read_varint(buf, &mut field.start.clone()).expect("scanned");
        (tag, field.length.map(|_| &buf[field.payload]))
    });
    Some(top.collect())
}

/// Whether `buf`, a `message`, is encoded as no Go encoder would, in a way the readers may
/// take differently by design, at any depth: a field meant to occur once that occurs
/// again (protobuf merges a message and keeps the last scalar; JSON keeps the last, and a
/// compact object's metadata refuses the duplicate key), or a repeated field or map in two
/// runs apart (protobuf appends the second; JSON keeps the last key). `typed/tests.rs`
/// checks the generated decoder's merge. Malformed bytes are not such a case: every reader
/// must refuse them alike.
fn differs_by_design(buf: &[u8], message: &'static schema::Message, depth: u32) -> bool {
    let Some(fields) = top_fields(buf).filter(|_| depth <= 100) else {
        return false;
    };
    let mut seen: Vec<u32> = Vec::new();
    let mut previous = None;
    fields.into_iter().any(|(tag, payload)| {
        let number = (tag >> 3) as u32;
        let Some(field) = message.field(number) else {
            previous = None;
            return false;
        };
        let continues_a_run = previous == Some(number);
        previous = Some(number);
        if seen.contains(&number) && (field.rep == schema::Rep::Single || !continues_a_run) {
            return true;
        }
        seen.push(number);
        let (schema::Ty::Message(index), Some(bytes)) = (field.ty, payload) else {
            return false;
        };
        let inner = schema::message(index);
        match field.rep {
            schema::Rep::Single | schema::Rep::Repeated => {
                differs_by_design(bytes, inner, depth + 1)
            }
            // An entry: its key and value once each, the value as above.
            schema::Rep::Map => {
                let Some(entry) = top_fields(bytes) else {
                    return false;
                };
                let count = |n: u64| entry.iter().filter(|(tag, _)| tag >> 3 == n).count();
                count(1) > 1
                    || count(2) > 1
                    || entry.iter().any(|(tag, value)| {
                        tag >> 3 == 2
                            && value.is_some_and(|v| differs_by_design(v, inner, depth + 1))
                    })
            }
        }
    })
}

/// The object of a GET body: the Unknown envelope's one raw field (field 2).
fn object_of(body: &[u8]) -> Option<&[u8]> {
    let raws: Vec<&[u8]> = top_fields(body.strip_prefix(b"k8s\0")?)?
        .into_iter()
        .filter_map(|(tag, payload)| payload.filter(|_| tag == (2 << 3 | 2)))
        .collect();
    match raws.as_slice() {
        [raw] => Some(raw),
        _ => None,
    }
}

/// How the readers of one kind did on one input.
enum Verdict {
    /// All read it and built the same object.
    Agreed,
    /// All refused it.
    Refused,
    /// One of the typed readers refused what the other read.
    OneRefused,
    /// They differ: how.
    Differ(String),
}

/// `body`, a GET of `K`, read every way (see the module docs), with and without its
/// managedFields.
fn readers_agree<K>(body: &[u8], kind: ProtoKind) -> Verdict
where
    K: Resource + DeserializeOwned + Serialize + PartialEq + std::fmt::Debug + 'static,
{
    let json = |object: &K| serde_json::to_string(object).unwrap();
    let mut verdict = Verdict::Refused;
    for kind in [kind, kind.without_managed_fields()] {
        let generated = decode_object_of::<K>(body, kind);
        let serde = decode_object_of::<K>(body, kind.without_generated_decoder());
        let object = match (generated, serde) {
            (Err(_), Err(_)) => continue,
            (Ok(a), Ok(b)) if a == b => a,
            (Ok(a), Ok(b)) => {
                let (a, b) = (json(&a), json(&b));
                return Verdict::Differ(format!("generated {a}\nserde {b}"));
            }
            // One refuses what the other reads: malformed bytes only one of them looks at —
            // a field of the schema that k8s-openapi's type lacks (a newer Kubernetes'),
            // which the generated decoders skip unread. Counted, not compared.
            (Ok(_), Err(_)) | (Err(_), Ok(_)) => return Verdict::OneRefused,
        };
        // JSON: what the serde path renders, read by serde_json (k8s-openapi refuses some
        // values the schema allows, a null time: nothing to compare then).
        if let Ok(value) = decode_object_of::<Value>(body, kind)
            && let Ok(from_json) = serde_json::from_value::<K>(value)
            && from_json != object
        {
            let (a, b) = (json(&object), json(&from_json));
            return Verdict::Differ(format!("protobuf {a}\nJSON {b}"));
        }
        match decode_object_of::<Compact<K>>(body, kind).map(|c| c.decode()) {
            Ok(Ok(decoded)) if decoded == object => {}
            Ok(Ok(decoded)) => {
                let (a, b) = (json(&object), json(&decoded));
                return Verdict::Differ(format!("typed {a}\ncompact {b}"));
            }
            Ok(Err(e)) => return Verdict::Differ(format!("compact kept it, then: {e}")),
            Err(e) => return Verdict::Differ(format!("compact refused it: {e}")),
        }
        verdict = Verdict::Agreed;
    }
    verdict
}

macro_rules! readers_by_stem {
    ($($stem:literal => $ty:ty,)*) => {
        /// [`readers_agree`] for the type of the golden file `stem`; `None` for a kind
        /// k8s-openapi has no type for.
        fn readers_agree_on(stem: &str, body: &[u8], kind: ProtoKind) -> Option<Verdict> {
            match stem {
                $($stem => Some(readers_agree::<$ty>(body, kind)),)*
                _ => None,
            }
        }
    };
}

every_kind!(readers_by_stem);

/// Runs `body` through every entry point; a panic writes it to the crashers folder.
fn survives(body: &[u8], kind: ProtoKind, name: &str) -> Result<u8, PathBuf> {
    if let Ok(read) = catch_unwind(AssertUnwindSafe(|| decode_everything(body, kind))) {
        return Ok(read);
    }
    Err(save(body, "protobuf-crashers", name))
}

/// Writes `body` under the test's temporary folder `folder`, named by `name` and its hash.
fn save(body: &[u8], folder: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    let hash = body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    });
    let path = dir.join(format!("{name}-{hash:016x}.bin"));
    std::fs::write(&path, body).unwrap();
    path
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
        })
        .unwrap_or(default)
}

#[test]
fn mangled_bodies_of_every_kind_never_panic() {
    let iterations = env_number("KUBE_INFORMER_FUZZ_ITERATIONS", 3_000);
    let seed = env_number("KUBE_INFORMER_FUZZ_SEED", 28);
    let (seeds, pods, status) = (seeds(), real_pods(), status_seed());
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut crashers = Vec::new();
    let mut read = [0u64; ENTRY_POINTS.len()];
    let (mut differences, mut agreed, mut compared) = (Vec::new(), 0u64, 0u64);
    let mut one_refused = 0u64;
    for _ in 0..iterations {
        // A quarter real-shaped pods, one in sixteen a Status, the rest every kind.
        let from = match rng.u8(..16) {
            0..4 => &pods[rng.usize(..pods.len())],
            4 => &status,
            _ => &seeds[rng.usize(..seeds.len())],
        };
        let shape = rng.usize(..3);
        let mut body = from.shapes[shape].clone();
        let donor = &seeds[rng.usize(..seeds.len())].shapes[0];
        // Mostly one mutation, which leaves the rest of the input valid to be read.
        let mutations = [1, 1, 1, 1, 1, 2, 2, 3, 4][rng.usize(..9)];
        for _ in 0..mutations {
            mutate(&mut rng, &mut body, donor);
        }
        if shape == 0
            && let Some(stem) = &from.stem
            && let Some(object) = object_of(&body)
            && !differs_by_design(object, from.message, 0)
        {
            let verdict = catch_unwind(AssertUnwindSafe(|| {
                readers_agree_on(stem, &body, from.kind)
            }));
            match verdict {
                Ok(Some(Verdict::Agreed)) => (agreed, compared) = (agreed + 1, compared + 1),
                Ok(Some(Verdict::Refused)) => compared += 1,
                Ok(Some(Verdict::OneRefused)) => one_refused += 1,
                Ok(Some(Verdict::Differ(how))) => {
                    let path = save(&body, "protobuf-differences", stem);
                    differences.push(format!("{}: {how}", path.display()));
                }
                Ok(None) | Err(_) => {} // a panic is `survives`' to report
            }
        }
        match survives(&body, from.kind, &from.name) {
            Ok(bits) => {
                for (bit, count) in read.iter_mut().enumerate() {
                    *count += u64::from(bits >> bit & 1);
                }
            }
            Err(path) => crashers.push(path),
        }
    }
    eprintln!(
        "{compared} GET bodies compared across the readers, {agreed} read alike by all of them; \
         {one_refused} refused by one typed reader only"
    );
    assert!(
        differences.is_empty(),
        "{} inputs read differently (seed {seed}):\n{}",
        differences.len(),
        differences.join("\n")
    );
    assert!(
        agreed > 0 && compared > agreed,
        "the comparison saw too little: {agreed} read of {compared}"
    );
    eprintln!("{iterations} inputs (seed {seed}); read by each entry point:");
    for (name, count) in ENTRY_POINTS.iter().zip(read) {
        eprintln!("  {name}: {count}");
    }
    assert!(
        crashers.is_empty(),
        "{} inputs panicked (seed {seed}); each is saved, move it into {CRASHERS} to keep it \
         as a regression: {crashers:#?}",
        crashers.len()
    );
    // A fuzzer whose inputs all fail at the first byte tests nothing: some mangled inputs
    // still read, at every entry point.
    for (name, count) in ENTRY_POINTS.iter().zip(read) {
        assert!(count > 0, "no mangled input was read as a {name}");
    }
}

#[test]
fn the_mutations_reach_the_decoders_and_most_are_refused() {
    // A fuzzer whose inputs all fail at the first byte tests nothing: most mangled inputs
    // are refused, and some still decode (the mutation hit a field that tolerates it).
    let seeds = seeds();
    let mut rng = fastrand::Rng::with_seed(7);
    let (mut refused, mut read) = (0, 0);
    for _ in 0..600 {
        let from = &seeds[rng.usize(..seeds.len())];
        let mut body = from.shapes[0].clone();
        mutate(&mut rng, &mut body, &seeds[0].shapes[0]);
        match decode_object_of::<Value>(&body, from.kind) {
            Ok(_) => read += 1,
            Err(error) => {
                assert!(!error.to_string().is_empty());
                refused += 1;
            }
        }
    }
    assert!(refused > 200 && read > 20, "refused {refused}, read {read}");
}

#[test]
fn kept_crashers_stay_fixed() {
    let entries = std::fs::read_dir(CRASHERS).expect("the kept crashers");
    let mut replayed = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "bin") {
            continue;
        }
        let body = std::fs::read(&path).unwrap();
        // Named `<apiVersion with _ for />-<Kind>-<anything>.bin`: replayed as that kind.
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let mut parts = stem.splitn(3, '-');
        let (api_version, kind) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let proto = ProtoKind::of(&api_version.replace('_', "/"), kind).unwrap_or_else(|| {
            panic!(
                "{}: not named <apiVersion>-<Kind>-<anything>.bin",
                path.display()
            )
        });
        assert!(
            survives(&body, proto, &format!("{api_version}-{kind}")).is_ok(),
            "{} panics again",
            path.display()
        );
        replayed += 1;
    }
    assert!(replayed > 0, "no crashers kept in {CRASHERS}");
}
