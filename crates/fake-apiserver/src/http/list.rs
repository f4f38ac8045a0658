//! LIST: paging at one consistent revision, the resourceVersion semantics of a 1.36 server,
//! and the real server's 410 answers.

use base64::{Engine, engine::general_purpose::STANDARD};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{Params, response::Reply};
use std::sync::Arc;

use kube_protobuf_schema::Message;

use crate::{
    Inner, protobuf,
    registry::{Gvr, ResourceType},
    selector::Filter,
    status::ApiError,
    storage::{ObjKey, StoredObject},
};

/// The size of the buffers a LIST body is written in.
const CHUNK: usize = 64 * 1024;

/// A continue token: the revision of the first page and the last key returned, in the shape
/// the real server uses (`{"v":"meta.k8s.io/v1","rv":..,"start":"..\u0000"}`, base64).
fn encode_continue(revision: i64, last: &ObjKey) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": format!("{}\u{0}", last.to_token())});
    STANDARD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(i64, ObjKey), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let json = STANDARD.decode(token).map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&json).map_err(|_| bad())?;
    let revision = value["rv"].as_i64().ok_or_else(bad)?;
    let start = value["start"].as_str().ok_or_else(bad)?;
    Ok((revision, ObjKey::from_token(start.trim_end_matches('\0'))))
}

/// What a LIST answer holds.
#[derive(Clone, Copy)]
pub(crate) enum Shape {
    /// The objects, in JSON.
    Object,
    /// `PartialObjectMetadata` (metadata informers), in JSON.
    Metadata,
    /// The objects, in protobuf (the kind's message).
    Protobuf(&'static Message),
    /// `PartialObjectMetadata`, in protobuf.
    MetadataProtobuf,
}

/// One page of a LIST: its items, its `ListMeta`, and its type.
struct Page {
    items: Vec<Arc<StoredObject>>,
    metadata: Value,
    ty: Arc<ResourceType>,
}

/// Renders one LIST answer in JSON: its pieces, in order (the whole list JSON once joined).
pub(crate) fn render(
    inner: &Inner,
    gvr: &Gvr,
    filter: &Filter,
    params: &Params,
    metadata_only: bool,
) -> Result<Vec<Bytes>, ApiError> {
    let mut page = page(inner, gvr, filter, params)?;
    if metadata_only {
        drop_shard_info(&mut page.metadata);
    }
    // Items are copied into large buffers: a few big writes beat one per item.
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut buf = BytesMut::with_capacity(CHUNK);
    for (i, object) in page.items.iter().enumerate() {
        if i > 0 {
            buf.extend_from_slice(b",");
        }
        if metadata_only {
            buf.extend_from_slice(&super::metadata::object(&object.body));
        } else {
            buf.extend_from_slice(&object.body);
        }
        if buf.len() >= CHUNK {
            chunks.push(buf.split().freeze());
        }
    }
    if !buf.is_empty() {
        chunks.push(buf.freeze());
    }
    let (kind, api_version) = match metadata_only {
        true => (
            super::metadata::LIST_KIND.to_owned(),
            super::metadata::API_VERSION.to_owned(),
        ),
        false => (page.ty.list_kind(), page.ty.gvr.api_version()),
    };
    let head = format!(
        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
        Value::from(kind),
        Value::from(api_version),
        page.metadata
    );
    let mut body = Vec::with_capacity(chunks.len() + 2);
    body.push(Bytes::from(head));
    body.extend(chunks);
    body.push(Bytes::from_static(b"]}\n"));
    Ok(body)
}

/// Renders one LIST answer in protobuf: the kind's `message`, or (`None`)
/// `PartialObjectMetadata`.
fn render_protobuf(
    inner: &Inner,
    gvr: &Gvr,
    filter: &Filter,
    params: &Params,
    message: Option<&Message>,
) -> Result<Vec<Bytes>, ApiError> {
    let mut page = page(inner, gvr, filter, params)?;
    if message.is_none() {
        drop_shard_info(&mut page.metadata);
    }
    let items = page
        .items
        .iter()
        .map(|object| match message {
            Some(message) => object.protobuf(message),
            None => super::metadata::message_bytes(&object.body).map(Bytes::from),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (api_version, list_kind) = match message {
        Some(_) => (page.ty.gvr.api_version(), page.ty.list_kind()),
        None => (
            super::metadata::API_VERSION.to_owned(),
            super::metadata::LIST_KIND.to_owned(),
        ),
    };
    let body = protobuf::list(
        &api_version,
        &list_kind,
        &page.metadata,
        items.iter().map(|b| &b[..]),
    )?;
    Ok(vec![Bytes::from(body)])
}

/// kube-apiserver 1.36 copies only the version, continue token and count into a
/// `PartialObjectMetadataList`'s metadata: a sharded one says nothing of its shard.
fn drop_shard_info(metadata: &mut Value) {
    if let Some(map) = metadata.as_object_mut() {
        map.remove("shardInfo");
    }
}

/// Reads one page at the revision the parameters ask for.
fn page(inner: &Inner, gvr: &Gvr, filter: &Filter, params: &Params) -> Result<Page, ApiError> {
    let mut storage = inner.storage.lock();
    let served_before = params
        .continue_token
        .as_deref()
        .and_then(|t| storage.resource_mut(gvr)?.take_served(t));
    let store = storage.resource(gvr).ok_or_else(ApiError::not_found_path)?;
    let (current, compacted) = (storage.revision(), storage.compacted());
    if params.resource_version_match.is_some()
        && params.resource_version.as_deref().unwrap_or("").is_empty()
    {
        return Err(ApiError::invalid_list_options(
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    if let Some(other) = params
        .resource_version_match
        .as_deref()
        .filter(|m| !matches!(*m, "Exact" | "NotOlderThan"))
    {
        return Err(ApiError::invalid_options(
            "ListOptions",
            "resourceVersionMatch",
            "FieldValueNotSupported",
            &format!(
                "Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
            ),
        ));
    }
    let mut limit = params.limit.filter(|l| *l > 0);
    let (revision, start) = match (&params.continue_token, params.resource_version.as_deref()) {
        (Some(_), Some(rv)) if !rv.is_empty() => {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        (Some(token), _) => {
            let (revision, start) = decode_continue(token)?;
            if revision < 0 {
                (current, Some(start)) // an "inconsistent" continuation reads the latest state
            } else if (revision as u64) < compacted {
                return Err(ApiError::continue_expired(encode_continue(-1, &start)));
            } else {
                (revision as u64, Some(start))
            }
        }
        (None, None | Some("")) => (current, None),
        (None, Some("0")) => {
            // "Any": served from the watch cache, which ignores limit.
            limit = None;
            (current, None)
        }
        (None, Some(rv)) => {
            let requested: u64 = rv
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?;
            let exact = match params.resource_version_match.as_deref() {
                Some("Exact") => true,
                Some("NotOlderThan") => false,
                // Legacy: a limit with a resourceVersion means "exactly that version".
                _ => limit.is_some(),
            };
            if requested > current {
                return Err(ApiError::too_large_resource_version(requested, current));
            }
            if exact && requested < compacted {
                return Err(ApiError::list_too_old());
            }
            (if exact { requested } else { current }, None)
        }
    };

    let keep = |o: &StoredObject| filter.matches(&o.meta);
    let mut items = store.scan(revision, filter.namespace.as_deref(), start.as_ref(), keep);
    let mut page = Vec::new();
    let mut last = None;
    let mut count = 0u64;
    for (key, object) in items.by_ref() {
        page.push(object.clone());
        count += 1;
        last = Some(key);
        if limit.is_some_and(|l| count >= l) {
            break;
        }
    }
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if let Some(shard) = &filter.shard {
        metadata["shardInfo"] = json!({"selector": shard.canonical()});
    }
    let mut remember = None;
    if limit.is_some_and(|l| count >= l) && items.next().is_some() {
        let last = last.expect("a full page has a last item");
        let token = encode_continue(revision as i64, last);
        metadata["continue"] = token.clone().into();
        if !filter.has_selectors() {
            // Items served so far: remembered from the previous page, or counted once.
            let before = served_before.unwrap_or_else(|| match &start {
                Some(start) => {
                    let scope = store.scan(revision, filter.namespace.as_deref(), None, |_| true);
                    scope.take_while(|(k, _)| *k <= start).count() as u64
                }
                None => 0,
            });
            let served = before + count;
            let total = store.count_at(revision, filter.namespace.as_deref());
            metadata["remainingItemCount"] = total.saturating_sub(served).into();
            remember = Some((token, served));
        }
    }
    drop(items);
    let ty = store.ty.clone();
    if let (Some((token, served)), Some(store)) = (remember, storage.resource_mut(gvr)) {
        store.remember_served(token, served);
    }
    drop(storage);
    Ok(Page {
        items: page,
        metadata,
        ty,
    })
}

/// Answers a LIST: the list's bytes, streamed as they were rendered (or cut mid-body).
pub(crate) fn list(
    inner: &Inner,
    gvr: &Gvr,
    filter: &Filter,
    params: &Params,
    cut: bool,
    shape: Shape,
) -> Result<Reply, ApiError> {
    let body = match shape {
        Shape::Object => render(inner, gvr, filter, params, false)?,
        Shape::Metadata => render(inner, gvr, filter, params, true)?,
        Shape::Protobuf(message) => render_protobuf(inner, gvr, filter, params, Some(message))?,
        Shape::MetadataProtobuf => render_protobuf(inner, gvr, filter, params, None)?,
    };
    let mut reply = match cut {
        true => Reply::stream(200, Box::pin(cut_stream(body))),
        false => Reply::stream(200, futures_util::stream::iter(body.into_iter().map(Ok))),
    };
    if let Shape::Protobuf(_) | Shape::MetadataProtobuf = shape {
        reply.content_type = protobuf::CONTENT_TYPE;
    }
    Ok(reply)
}

/// The first half of `body`'s bytes, then a broken connection (after letting hyper flush
/// the half it has).
fn cut_stream(body: Vec<Bytes>) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let mut whole = BytesMut::new();
    body.iter().for_each(|chunk| whole.extend_from_slice(chunk));
    let half = whole.split_to(whole.len() / 2).freeze();
    futures_util::stream::unfold(Some(half), |half| async move {
        match half {
            Some(half) => Some((Ok(half), None)),
            None => {
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
                let err = std::io::Error::other(
                    "fake-apiserver: injected fault: LIST response cut mid-body",
                );
                Some((Err(err), None))
            }
        }
    })
    .take(2)
}
