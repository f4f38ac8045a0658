//! One LIST page whose items can be decoded later, on another thread.

use std::{fmt, ops::Range, sync::Arc};

use kube::api::{ListMeta, ObjectList};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::value::RawValue;

use super::{decode::from_json, skip_managed_fields::Shape};
use crate::protobuf::ProtoKind;
use crate::protobuf::ShardEcho;

/// One LIST page: its metadata (resourceVersion, continue token) at once, its items when
/// [`ListPage::into_items`] is called.
///
/// Decoding typed objects is most of the cost of a LIST. With the continue token known
/// before the items are decoded, the reflector fetches the next page while earlier pages
/// decode on other cores.
pub struct ListPage<K> {
    /// The page's list metadata.
    pub metadata: ListMeta,
    /// `metadata.shardInfo.selector`: the shard selector the server applied.
    shard_selector: Option<String>,
    items: Items<K>,
}

enum Items<K> {
    Decoded(Vec<K>),
    /// A body's items, still to decode.
    Deferred(Box<dyn Deferred<K>>),
}

/// A body whose items are still to decode: whole, or in shares.
trait Deferred<K>: Send {
    fn decode(self: Box<Self>) -> Result<Vec<K>, kube::Error>;
    /// Up to `parts` shares (see [`ListPage::into_parts`]); `None`: too few items to split.
    fn split(&self, parts: usize) -> Option<Vec<Part<K>>>;
}

/// A JSON body's items (managed fields passed over when `skip`).
struct JsonItems {
    body: Arc<String>,
    skip: bool,
}

/// A protobuf body's `count` items.
struct ProtobufItems {
    body: bytes::Bytes,
    kind: ProtoKind,
    count: usize,
}

/// A share of a page's items, decoded by calling it (on a decoding thread).
pub(crate) type Part<K> = Box<dyn FnOnce() -> Result<Vec<K>, kube::Error> + Send>;

/// A page is split for several decoding threads only from this many items: a paged LIST's
/// pages (500 items) already decode one per thread.
const SPLIT_FROM: usize = 1000;

impl<K> fmt::Debug for ListPage<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListPage")
            .field("metadata", &self.metadata)
            .field("decoded", &self.is_decoded())
            .finish()
    }
}

impl<K> ListPage<K> {
    /// The shard selector the server says it applied to this page
    /// (`metadata.shardInfo.selector`): `None` from a server that ignored the
    /// `shardSelector` parameter, and from kube-apiserver 1.36 for custom resources and
    /// metadata-only lists, which it filters without saying so.
    pub(crate) fn shard_selector(&self) -> Option<&str> {
        self.shard_selector.as_deref()
    }

    /// Whether the items are decoded already.
    pub(crate) fn is_decoded(&self) -> bool {
        matches!(self.items, Items::Decoded(_))
    }

    /// The page's objects, decoding them if not done yet.
    pub fn into_items(self) -> Result<Vec<K>, kube::Error> {
        match self.items {
            Items::Decoded(items) => Ok(items),
            Items::Deferred(items) => items.decode(),
        }
    }

    /// The page's items in up to `parts` shares of consecutive items, to decode on as many
    /// threads (concatenated in order, they are [`into_items`](Self::into_items)). A page
    /// under [`SPLIT_FROM`] items is one share. Finding a JSON page's items scans its body
    /// (without decoding it): call this on a decoding thread too. Anything wrong with the
    /// body makes one share, whose decoding reports it.
    pub(crate) fn into_parts(self, parts: usize) -> Vec<Part<K>>
    where
        K: Send + 'static,
    {
        if let Items::Deferred(items) = &self.items
            && parts > 1
            && let Some(shares) = items.split(parts)
        {
            return shares;
        }
        vec![Box::new(move || self.into_items())]
    }
}

impl<K: DeserializeOwned + 'static> Deferred<K> for JsonItems {
    fn decode(self: Box<Self>) -> Result<Vec<K>, kube::Error> {
        from_json::<ItemsOnly<K>>(&self.body, self.skip, Shape::Envelope)
            .map(|list| list.items.unwrap_or_default())
            .map_err(kube::Error::SerdeError)
    }

    fn split(&self, parts: usize) -> Option<Vec<Part<K>>> {
        let ranges = json_items(&self.body).filter(|r| r.len() >= SPLIT_FROM)?;
        let split = shares(ranges.len(), parts).map(|share| {
            let (ranges, body, skip) = (ranges[share].to_vec(), Arc::clone(&self.body), self.skip);
            Box::new(move || {
                ranges
                    .into_iter()
                    .map(|range| from_json::<K>(&body[range], skip, Shape::Object))
                    .collect::<Result<Vec<K>, _>>()
                    .map_err(kube::Error::SerdeError)
            }) as Part<K>
        });
        Some(split.collect())
    }
}

impl<K: DeserializeOwned + 'static> Deferred<K> for ProtobufItems {
    fn decode(self: Box<Self>) -> Result<Vec<K>, kube::Error> {
        crate::protobuf::ListBody::parse(&self.body, self.kind)
            .and_then(|list| list.items())
            .map_err(decode_error)
    }

    fn split(&self, parts: usize) -> Option<Vec<Part<K>>> {
        if self.count < SPLIT_FROM {
            return None;
        }
        let split = shares(self.count, parts).map(|share| {
            let (body, kind) = (self.body.clone(), self.kind);
            Box::new(move || {
                crate::protobuf::ListBody::parse(&body, kind)
                    .and_then(|list| list.items_in(share))
                    .map_err(decode_error)
            }) as Part<K>
        });
        Some(split.collect())
    }
}

fn decode_error(e: crate::protobuf::DecodeError) -> kube::Error {
    kube::Error::Service(Box::new(e))
}

/// `count` positions in `parts` ranges of consecutive positions, as even as can be.
fn shares(count: usize, parts: usize) -> impl Iterator<Item = Range<usize>> {
    let size = count.div_ceil(parts.max(1)).max(1);
    (0..count)
        .step_by(size)
        .map(move |start| start..(start + size).min(count))
}

/// Where each item of a JSON list body is (byte ranges), found by a scan that decodes
/// nothing; `None` if the body does not scan.
fn json_items(body: &str) -> Option<Vec<Range<usize>>> {
    #[derive(Deserialize)]
    struct RawItems<'a> {
        #[serde(borrow, default)]
        items: Option<Vec<&'a RawValue>>,
    }
    let list: RawItems<'_> = serde_json::from_str(body).ok()?;
    let start = body.as_ptr() as usize;
    Some(
        list.items
            .unwrap_or_default()
            .into_iter()
            .map(|item| {
                let at = item.get().as_ptr() as usize - start;
                at..at + item.get().len()
            })
            .collect(),
    )
}

impl<K> From<ObjectList<K>> for ListPage<K>
where
    K: Clone,
{
    fn from(list: ObjectList<K>) -> Self {
        Self {
            metadata: list.metadata,
            shard_selector: None,
            items: Items::Decoded(list.items),
        }
    }
}

impl<K: DeserializeOwned + Clone + 'static> ListPage<K> {
    /// A page from a LIST response body. Only the list metadata is read now when it comes
    /// before the items (as the API server writes it); otherwise the whole body is decoded
    /// at once.
    pub fn from_body(body: String) -> Result<Self, kube::Error> {
        Self::from_json(body, false)
    }

    /// [`from_body`](Self::from_body) with every item's `metadata.managedFields` scanned
    /// past without being built (what factory informers read by default): for a
    /// [`ListerWatcher`](super::ListerWatcher) of your own that fetches LIST bodies.
    pub fn from_body_without_managed_fields(body: String) -> Result<Self, kube::Error> {
        Self::from_json(body, true)
    }

    /// [`from_body`](Self::from_body), with `metadata.managedFields` passed over unbuilt
    /// when `skip_managed_fields`.
    pub(crate) fn from_json(body: String, skip_managed_fields: bool) -> Result<Self, kube::Error> {
        let leading = |body: &str| {
            let list =
                crate::json_prefix::leading_field::<ListMeta>(body, "metadata", Some("items"));
            // Read apart: `ListMeta` has no field for it (a second scan of a short prefix).
            let echo =
                crate::json_prefix::leading_field::<ShardEcho>(body, "metadata", Some("items"));
            Some((list.ok()??, echo.ok().flatten().unwrap_or_default()))
        };
        match leading(&body) {
            Some((metadata, echo)) => Ok(Self {
                metadata,
                shard_selector: echo.selector(),
                items: Items::Deferred(Box::new(JsonItems {
                    body: Arc::new(body),
                    skip: skip_managed_fields,
                })),
            }),
            None => from_json::<ObjectList<K>>(&body, skip_managed_fields, Shape::Envelope)
                .map(Self::from)
                .map_err(kube::Error::SerdeError),
        }
    }
}

impl<K: DeserializeOwned + Clone + 'static> ListPage<K> {
    /// A page from a protobuf LIST response body of `kind`: its list metadata now, its
    /// items when asked.
    pub(crate) fn from_protobuf(
        body: bytes::Bytes,
        kind: crate::protobuf::ProtoKind,
    ) -> Result<Self, kube::Error> {
        let list = crate::protobuf::ListBody::parse(&body, kind).map_err(decode_error)?;
        let (metadata, count) = (list.metadata.clone(), list.len());
        let shard_selector = list.shard_selector.clone();
        drop(list);
        Ok(Self {
            metadata,
            shard_selector,
            items: Items::Deferred(Box::new(ProtobufItems { body, kind, count })),
        })
    }
}

/// A list's items; everything else skipped.
#[derive(Deserialize)]
#[serde(bound(deserialize = "K: DeserializeOwned"))]
struct ItemsOnly<K> {
    #[serde(default)]
    items: Option<Vec<K>>,
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    const BODY: &str = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"abc","remainingItemCount":3},"items":[{"metadata":{"name":"a","namespace":"n"}},{"metadata":{"name":"b","namespace":"n"}}]}"#;

    #[test]
    fn metadata_is_read_before_the_items_are_decoded() {
        let page = ListPage::<ConfigMap>::from_body(BODY.into()).unwrap();
        assert!(!page.is_decoded());
        assert_eq!(page.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(page.metadata.continue_.as_deref(), Some("abc"));
        assert_eq!(page.metadata.remaining_item_count, Some(3));
        let names: Vec<_> = page
            .into_items()
            .unwrap()
            .into_iter()
            .map(|cm| cm.metadata.name.unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    /// The shard selector a server applied is read from `metadata.shardInfo`, which
    /// k8s-openapi's `ListMeta` drops, over JSON and protobuf alike.
    #[test]
    fn the_shard_selector_echoed_is_kept() {
        let selector =
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')";
        let body = format!(
            r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"42","shardInfo":{{"selector":"{selector}"}}}},"items":[]}}"#
        );
        let page = ListPage::<ConfigMap>::from_body(body).unwrap();
        assert_eq!(page.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(page.shard_selector(), Some(selector));
        assert_eq!(
            ListPage::<ConfigMap>::from_body(BODY.into())
                .unwrap()
                .shard_selector(),
            None
        );

        // A length-delimited field (each under 128 bytes).
        let field = |n: u8, bytes: &[u8]| [&[n << 3 | 2, bytes.len() as u8][..], bytes].concat();
        // ConfigMapList { metadata: ListMeta { resourceVersion: "42" (2), shardInfo (5) } }
        let info = field(1, selector.as_bytes());
        let meta = [field(2, b"42"), field(5, &info)].concat();
        let list = field(1, &meta);
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMapList")].concat();
        let unknown = [field(1, &type_meta), field(2, &list)].concat();
        let body = [&kube_protobuf_schema::MAGIC[..], &unknown].concat();
        let kind = crate::protobuf::ProtoKind::of("v1", "ConfigMap").unwrap();
        let page = ListPage::<ConfigMap>::from_protobuf(body.into(), kind).unwrap();
        assert_eq!(page.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(page.shard_selector(), Some(selector));
    }

    #[test]
    fn items_before_metadata_are_decoded_at_once() {
        let body = r#"{"items":[{"metadata":{"name":"a"}}],"metadata":{"resourceVersion":"7"}}"#;
        let page = ListPage::<ConfigMap>::from_body(body.into()).unwrap();
        assert!(page.is_decoded());
        assert_eq!(page.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(page.into_items().unwrap().len(), 1);
    }

    #[test]
    fn bad_items_are_an_error_when_decoded() {
        let body = r#"{"metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":5}}]}"#;
        let page = ListPage::<ConfigMap>::from_body(body.into()).unwrap();
        assert!(matches!(page.into_items(), Err(kube::Error::SerdeError(_))));
        let body = r#"{"metadata":{"resourceVersion":"7"},"items":null}"#;
        let page = ListPage::<ConfigMap>::from_body(body.into()).unwrap();
        assert!(page.into_items().unwrap().is_empty());
        assert!(ListPage::<ConfigMap>::from_body("{".into()).is_err());
    }

    fn big_list(count: usize, bad: Option<usize>) -> String {
        let items: Vec<String> = (0..count)
            .map(|i| match Some(i) == bad {
                true => r#"{"metadata":{"name":5}}"#.to_owned(),
                false => format!(
                    r#"{{"metadata":{{"name":"cm-{i}","managedFields":[{{"manager":"m"}}]}},"data":{{"k":"v{i}"}}}}"#
                ),
            })
            .collect();
        format!(
            r#"{{"kind":"ConfigMapList","metadata":{{"resourceVersion":"9"}},"items":[{}]}}"#,
            items.join(",")
        )
    }

    fn decode_shares(
        page: ListPage<ConfigMap>,
        parts: usize,
    ) -> (usize, Result<Vec<String>, String>) {
        let shares = page.into_parts(parts);
        let count = shares.len();
        let mut names = Vec::new();
        for share in shares {
            match share() {
                Ok(items) => names.extend(items.into_iter().map(|cm| cm.metadata.name.unwrap())),
                Err(e) => return (count, Err(e.to_string())),
            }
        }
        (count, Ok(names))
    }

    #[test]
    fn a_large_page_decodes_in_shares_that_add_up_to_it_in_order() {
        let body = big_list(2_500, None);
        let whole: Vec<String> = ListPage::<ConfigMap>::from_body(body.clone())
            .unwrap()
            .into_items()
            .unwrap()
            .into_iter()
            .map(|cm| cm.metadata.name.unwrap())
            .collect();
        assert_eq!(whole.len(), 2_500);
        let (shares, names) = decode_shares(ListPage::from_body(body.clone()).unwrap(), 3);
        assert_eq!((shares, names.unwrap()), (3, whole.clone()));
        // Managed fields are passed over in every share, as in the whole page.
        let page = ListPage::<ConfigMap>::from_body_without_managed_fields(body).unwrap();
        for share in page.into_parts(2) {
            assert!(
                share()
                    .unwrap()
                    .iter()
                    .all(|cm| cm.metadata.managed_fields.is_none())
            );
        }
        // A small page, or one thread: one share.
        let small = ListPage::<ConfigMap>::from_body(big_list(SPLIT_FROM - 1, None)).unwrap();
        assert_eq!(decode_shares(small, 4).0, 1);
        let one = ListPage::<ConfigMap>::from_body(big_list(2_000, None)).unwrap();
        assert_eq!(decode_shares(one, 1).0, 1);
        assert_eq!(shares_of(10, 3), [0..4, 4..8, 8..10]);
        assert_eq!(shares_of(2, 4), [0..1, 1..2]);
    }

    fn shares_of(count: usize, parts: usize) -> Vec<Range<usize>> {
        shares(count, parts).collect()
    }

    #[test]
    fn a_bad_item_fails_its_share_and_a_body_that_does_not_scan_is_one_share() {
        let page = ListPage::<ConfigMap>::from_body(big_list(2_000, Some(1_500))).unwrap();
        let (shares, names) = decode_shares(page, 2);
        assert_eq!(shares, 2);
        assert!(
            names.unwrap_err().contains("invalid type"),
            "the decoder's own error"
        );
        // Cut short: the scan fails, so the whole page is one share, whose error it is.
        let mut cut = big_list(2_000, None);
        cut.truncate(cut.len() - 10);
        let page = ListPage::<ConfigMap>::from_body(cut).unwrap();
        let (shares, names) = decode_shares(page, 2);
        assert_eq!(shares, 1);
        assert!(names.is_err());
    }
}
