//! A LIST's answer ([`ListBody`]): its metadata read at once, its items kept encoded until
//! asked for.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::de::DeserializeOwned;

use kube_protobuf_schema as schema;

use super::{
    DecodeError, ProtoKind, de,
    object::envelope,
    wire::{RawValue, Reader},
};

/// A LIST's answer: its metadata, and its items still encoded (decode each with
/// [`ListBody::items`], on any thread).
// Public for the protobuf tests, fuzzing, e2e and informer-bench; not part of the supported API.
#[doc(hidden)]
#[derive(Debug)]
pub struct ListBody<'a> {
    /// The list's metadata (resourceVersion, continue).
    pub metadata: ListMeta,
    /// The shard selector the server applied (`metadata.shardInfo.selector`, KEP-5866),
    /// which k8s-openapi's `ListMeta` has no field for.
    pub shard_selector: Option<String>,
    items: Vec<(usize, &'a [u8])>,
    item: ProtoKind,
}

impl<'a> ListBody<'a> {
    /// Reads a list of `kind` (`<Kind>List`).
    ///
    /// # Errors
    /// A body that is not a protobuf list of `kind`.
    pub fn parse(body: &'a [u8], kind: ProtoKind) -> Result<Self, DecodeError> {
        let envelope = envelope(body, 0)?;
        kind.expect(&envelope, true, 0)?;
        let list_meta = schema::named("k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta")
            .expect("ListMeta in the schema");
        let mut reader = Reader::new(envelope.raw, envelope.raw_offset);
        let (mut metadata, mut items) = (ListMeta::default(), Vec::new());
        let mut shard_selector = None;
        while let Some(field) = reader.next_field()? {
            match (field.number, field.value) {
                (1, RawValue::Len(meta)) => {
                    let at = reader.offset_of(meta);
                    metadata = de::decode(meta, at, list_meta, de::Skip::default())?;
                    let echo: ShardEcho = de::decode(meta, at, list_meta, de::Skip::default())?;
                    shard_selector = echo.selector();
                }
                (2, RawValue::Len(object)) => items.push((reader.offset_of(object), object)),
                _ => {}
            }
        }
        Ok(ListBody {
            metadata,
            shard_selector,
            items,
            item: kind,
        })
    }

    /// How many items the list holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether it holds none.
    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Decodes the items at `range` (positions in the list), in order: a share of a large
    /// list, for one decoding thread.
    ///
    /// # Errors
    /// The first item that does not decode.
    pub(crate) fn items_in<K: DeserializeOwned + 'static>(
        &self,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<K>, DecodeError> {
        self.items[range]
            .iter()
            .map(|(offset, object)| self.item.decode(object, *offset))
            .collect()
    }

    /// Decodes the items, in order.
    ///
    /// # Errors
    /// The first item that does not decode.
    pub fn items<K: DeserializeOwned + 'static>(&self) -> Result<Vec<K>, DecodeError> {
        self.items_in(0..self.len())
    }
}

/// What a list's metadata says of sharding (`shardInfo`, KEP-5866), which k8s-openapi's
/// `ListMeta` has no field for.
#[derive(serde::Deserialize, Default)]
pub(crate) struct ShardEcho {
    #[serde(rename = "shardInfo", default)]
    shard_info: Option<ShardInfo>,
}

#[derive(serde::Deserialize)]
struct ShardInfo {
    #[serde(default)]
    selector: String,
}

impl ShardEcho {
    /// The selector echoed, if any.
    pub(crate) fn selector(self) -> Option<String> {
        self.shard_info.map(|info| info.selector)
    }
}
