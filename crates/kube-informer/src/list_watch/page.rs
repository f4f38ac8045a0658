//! One LIST page whose items can be decoded later, on another thread.

use std::fmt;

use kube::api::{ListMeta, ObjectList};
use serde::{Deserialize, de::DeserializeOwned};

/// One LIST page: its metadata (resourceVersion, continue token) at once, its items when
/// [`ListPage::into_items`] is called.
///
/// Decoding typed objects is most of the cost of a LIST. With the continue token known
/// before the items are decoded, the reflector fetches the next page while earlier pages
/// decode on other cores.
pub struct ListPage<K> {
    /// The page's list metadata.
    pub metadata: ListMeta,
    items: Items<K>,
}

enum Items<K> {
    Decoded(Vec<K>),
    /// Decodes the response body's items.
    Deferred(Box<dyn FnOnce() -> Result<Vec<K>, kube::Error> + Send>),
}

impl<K> fmt::Debug for ListPage<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListPage")
            .field("metadata", &self.metadata)
            .field("decoded", &self.is_decoded())
            .finish()
    }
}

impl<K> ListPage<K> {
    /// Whether the items are decoded already.
    pub(crate) fn is_decoded(&self) -> bool {
        matches!(self.items, Items::Decoded(_))
    }

    /// The page's objects, decoding them if not done yet.
    pub fn into_items(self) -> Result<Vec<K>, kube::Error> {
        match self.items {
            Items::Decoded(items) => Ok(items),
            Items::Deferred(decode) => decode(),
        }
    }
}

impl<K> From<ObjectList<K>> for ListPage<K>
where
    K: Clone,
{
    fn from(list: ObjectList<K>) -> Self {
        Self {
            metadata: list.metadata,
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
        match crate::json_prefix::leading_field::<ListMeta>(&body, "metadata", Some("items"))
            .ok()
            .flatten()
        {
            Some(metadata) => Ok(Self {
                metadata,
                items: Items::Deferred(Box::new(move || {
                    super::decode::from_json::<ItemsOnly<K>>(&body, skip_managed_fields)
                        .map(|list| list.items.unwrap_or_default())
                        .map_err(kube::Error::SerdeError)
                })),
            }),
            None => super::decode::from_json::<ObjectList<K>>(&body, skip_managed_fields)
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
        let decode_error = |e: crate::protobuf::DecodeError| kube::Error::Service(Box::new(e));
        let list = crate::protobuf::ListBody::parse(&body, kind).map_err(decode_error)?;
        let metadata = list.metadata.clone();
        drop(list);
        Ok(Self {
            metadata,
            items: Items::Deferred(Box::new(move || {
                crate::protobuf::ListBody::parse(&body, kind)
                    .and_then(|list| list.items())
                    .map_err(decode_error)
            })),
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
}
