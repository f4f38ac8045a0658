//! The source a reflector lists and watches: [`ListerWatcher`], implemented for
//! [`kube::Api`] (typed k8s-openapi objects, `DynamicObject`, `PartialObjectMeta`) and open to
//! any other source (tests, non-Kubernetes data).

mod batch;
mod decode;
pub(crate) mod decode_pool;
mod decode_stream;
mod live_share;
#[cfg(feature = "testing")]
mod memory;
mod page;
mod request;
mod selectors;
mod shard_selector;
mod skip_managed_fields;

use std::{
    future::Future,
    sync::atomic::{AtomicUsize, Ordering},
};

use futures_util::stream::BoxStream;
use kube::{
    Api,
    api::{ListParams, ObjectList, WatchEvent, WatchParams},
};
use serde::de::DeserializeOwned;

pub(crate) use self::live_share::Shards;
#[cfg(feature = "testing")]
pub use self::memory::MemorySource;
pub use self::{
    decode::UndecodableLine,
    live_share::LiveShare,
    page::ListPage,
    selectors::Selectors,
    shard_selector::{HASH_SPACE_END, InvalidShardSelector, ShardField, ShardSelector, shard_hash},
};

/// The decoding threads wanted; `usize::MAX`: not set, the default.
static DECODING_THREADS: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Sets how many threads decode the objects of every LIST page and watch event in this
/// process. By default there is one per core (at least two), shared by all informers.
/// Returns the number in effect before the call.
///
/// `0` decodes on each reflector's own task instead, with no threads: for tests on a paused
/// tokio clock (`start_paused`), where waiting for a decoding thread counts as idle and lets
/// the clock jump ahead in the middle of an event, and for programs that must not start
/// threads. It costs throughput: the watch is not read while it decodes. It takes effect
/// at the next page or event, also for informers already running. Another number takes
/// effect when the threads are next started (once no informer holds them).
///
/// ```
/// // At the top of a test that runs informers over HTTP on a paused clock:
/// kube_informer::list_watch::set_decoding_threads(0);
/// assert_eq!(kube_informer::list_watch::set_decoding_threads(0), 0);
/// ```
pub fn set_decoding_threads(threads: usize) -> usize {
    let before = DECODING_THREADS.swap(threads.min(usize::MAX - 1), Ordering::SeqCst);
    if before == usize::MAX {
        default_decoding_threads()
    } else {
        before
    }
}

/// One per core, at least two; asked of the system once (on Linux it reads the cgroup's
/// files), since every decoding job asks whether there are threads.
fn default_decoding_threads() -> usize {
    static DEFAULT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get().max(2)))
}

/// LIST pages and watch batches read and waiting for a decoding thread, in the whole
/// process (`informer_decode_backlog` in the [metrics](crate::metrics)). Near zero when the
/// threads keep up; a backlog that stays high means decoding is the bottleneck: more
/// [decoding threads](set_decoding_threads), or protobuf.
pub fn decode_backlog() -> usize {
    decode_pool::waiting()
}

/// The decoding threads (see [`set_decoding_threads`]); 0 decodes in place.
pub(crate) fn decoding_threads() -> usize {
    match DECODING_THREADS.load(Ordering::SeqCst) {
        usize::MAX => default_decoding_threads(),
        threads => threads,
    }
}

/// How many LIST pages or watch batches decode at once: one per decoding thread (at least
/// one).
pub(crate) fn decoders() -> usize {
    decoding_threads().max(1)
}

/// The events of one watch, decoded. An `Err` ends the watch (the reflector resumes it).
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, kube::Error>>;

/// Lists and watches a collection.
///
/// `list` returns one page as the server answered it; `watch` opens a watch from
/// `resource_version` (`""` or `"0"`: from the current state). Errors are
/// [`kube::Error`]s, so a server's answer keeps its code and reason: the reflector tells a
/// 410 Gone from a 429 from anything else by them.
#[doc(alias = "ListWatch")]
pub trait ListerWatcher<K: Clone>: Send + Sync + 'static {
    /// One LIST request.
    fn list(
        &self,
        params: &ListParams,
    ) -> impl Future<Output = Result<ObjectList<K>, kube::Error>> + Send;

    /// One LIST request as a [`ListPage`], whose items may be decoded later on another
    /// thread while the next page is fetched. The default calls [`list`](Self::list) and so
    /// decodes at once; `kube::Api` and [`ClientListerWatcher`] defer the decoding.
    fn list_page(
        &self,
        params: &ListParams,
    ) -> impl Future<Output = Result<ListPage<K>, kube::Error>> + Send {
        async move { self.list(params).await.map(ListPage::from) }
    }

    /// One LIST page of `share` only, when a sharded informer's share grew and it lists
    /// just the ranges it gained. A source that sends a `shardSelector`
    /// ([`ClientListerWatcher`]) sends this one instead of its own; the default asks as
    /// [`list_page`](Self::list_page) does. The reflector drops whatever comes from outside
    /// `share` either way.
    fn list_page_of(
        &self,
        params: &ListParams,
        share: &ShardSelector,
    ) -> impl Future<Output = Result<ListPage<K>, kube::Error>> + Send {
        let _ = share;
        self.list_page(params)
    }

    /// One WATCH request, from `resource_version`.
    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> impl Future<Output = Result<WatchStream<K>, kube::Error>> + Send;
}

impl<K> ListerWatcher<K> for Api<K>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        Api::list(self, params).await
    }

    async fn list_page(&self, params: &ListParams) -> Result<ListPage<K>, kube::Error> {
        let request = kube::core::Request::new(self.resource_url());
        let client = self.clone().into_client();
        raw_list_page(&client, &Asking::plain(&request, K::metadata_api()), params).await
    }

    /// The response's lines are decoded straight into `K` (no intermediate
    /// `serde_json::Value`) on the decoding threads, in parallel batches, order kept; errors
    /// read as kube reads them.
    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, kube::Error> {
        let request = kube::core::Request::new(self.resource_url());
        let client = self.clone().into_client();
        let asking = Asking::plain(&request, K::metadata_api());
        parallel_watch(&client, &asking, params, resource_version).await
    }
}

/// Lists and watches `K` through a [`kube::Client`], in one namespace or in all, whatever
/// the resource's scope (unlike `kube::Api`, whose namespaced constructor needs it known at
/// compile time). `metadata_only` asks the server for `PartialObjectMetadata`.
///
/// ```no_run
/// # async fn example(client: kube::Client) {
/// use k8s_openapi::api::{core::v1::Pod, rbac::v1::ClusterRole};
/// use kube_informer::{informer::{InformerOptions, SharedIndexInformer}, list_watch::ClientListerWatcher};
///
/// // Pods of one namespace, and a cluster-scoped type, through the same constructor.
/// let pods = ClientListerWatcher::<Pod>::new(client.clone(), Some("shop"), &());
/// let roles = ClientListerWatcher::<ClusterRole>::new(client, None, &()).metadata_only();
/// let informer = SharedIndexInformer::new(pods, InformerOptions::default());
/// # let _ = (informer, roles);
/// # }
/// ```
pub struct ClientListerWatcher<K> {
    client: kube::Client,
    request: kube::core::Request,
    metadata_only: bool,
    /// `K`'s protobuf encoding, if it has one.
    encoding: Option<crate::protobuf::ProtoKind>,
    protobuf: bool,
    without_managed_fields: bool,
    /// The share whose `shardSelector` is sent with every request, if any.
    shards: Option<Shards>,
    _objects: std::marker::PhantomData<fn() -> K>,
}

impl<K> std::fmt::Debug for ClientListerWatcher<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientListerWatcher")
            .field("url", &self.request.url_path)
            .field("metadata_only", &self.metadata_only)
            .field("protobuf", &self.protobuf)
            .field("kind", &self.encoding)
            .field("shards", &self.shards)
            .finish()
    }
}

impl<K: kube::Resource> ClientListerWatcher<K> {
    /// `K` in `namespace` (`None`: all namespaces, or a cluster-scoped type).
    pub fn new(client: kube::Client, namespace: Option<&str>, dyntype: &K::DynamicType) -> Self {
        Self {
            client,
            request: kube::core::Request::new(K::url_path(dyntype, namespace)),
            metadata_only: false,
            encoding: crate::protobuf::ProtoKind::of(&K::api_version(dyntype), &K::kind(dyntype)),
            protobuf: false,
            without_managed_fields: false,
            shards: None,
            _objects: std::marker::PhantomData,
        }
    }

    /// Ask for metadata only (use with `K = PartialObjectMeta<T>`).
    #[must_use]
    pub fn metadata_only(mut self) -> Self {
        self.metadata_only = true;
        self
    }

    /// Ask for protobuf, when `K` is a built-in kind (see [`crate::protobuf`]): answers are
    /// decoded as their `Content-Type` says, so a server that answers JSON is read as JSON.
    /// Off by default here; factory informers follow
    /// [`FactoryOptions::protobuf`](crate::factory::FactoryOptions::protobuf).
    /// Metadata-only, any kind (custom resources too) is asked for as protobuf
    /// `PartialObjectMetadata`, as client-go's metadata client asks. A `DynamicObject`
    /// decoded from protobuf has no `apiVersion` and `kind` of its own (as items of a JSON
    /// list have none). `Compact<K>` then keeps the protobuf message; types that cannot be
    /// read from protobuf (that read JSON text themselves) stay JSON.
    #[must_use]
    pub fn protobuf(mut self, on: bool) -> Self
    where
        K: DeserializeOwned,
    {
        self.protobuf = on;
        self
    }
}

impl<K> ClientListerWatcher<K> {
    /// Leave `metadata.managedFields` out of every object while decoding: over protobuf
    /// skipped unread (see `protobuf::ProtoKind::without_managed_fields`), over JSON
    /// scanned past without building anything. Factories do this unless told to
    /// [`keep_managed_fields`](crate::factory::FactoryOptions::keep_managed_fields).
    #[must_use]
    pub fn without_managed_fields(mut self) -> Self {
        self.without_managed_fields = true;
        self
    }

    /// Send `selector` as the `shardSelector` of every LIST and WATCH (KEP-5866): a server
    /// with the `ShardedListAndWatch` gate sends only that share. This source does not
    /// filter what a server without it sends; a [`Reflector`](crate::reflector::Reflector)
    /// given the same selector ([`Selectors::shards`]) does. Factory informers do both.
    #[must_use]
    pub fn shards(mut self, selector: &ShardSelector) -> Self {
        self.shards = Some(Shards::Fixed(selector.clone()));
        self
    }

    /// [`shards`](Self::shards) with a share that may be live.
    pub(crate) fn with_shards(mut self, shards: Shards) -> Self {
        self.shards = Some(shards);
        self
    }

    /// The `shardSelector` to send now. An empty live share sends one range of one hash
    /// value (the reflector asks for nothing while its share is empty, and drops whatever
    /// comes; this covers a request made as the share emptied).
    fn shard_query(&self) -> Option<String> {
        let shards = self.shards.as_ref()?;
        Some(match shards.now() {
            Some(selector) => selector.to_string(),
            None => "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')"
                .to_owned(),
        })
    }

    /// How this source asks, with `protobuf` as the encoding.
    fn asking<'a>(
        &'a self,
        protobuf: Option<crate::protobuf::ProtoKind>,
        shards: Option<&'a str>,
    ) -> Asking<'a> {
        Asking {
            request: &self.request,
            metadata_only: self.metadata_only,
            protobuf,
            without_managed_fields: self.without_managed_fields,
            shards,
        }
    }

    /// The encoding asked for when protobuf is on: `PartialObjectMetadata` for metadata
    /// only, else `K`'s kind when it has one; `None` when `K` cannot be read from it.
    fn encoding(&self) -> Option<crate::protobuf::ProtoKind>
    where
        K: DeserializeOwned,
    {
        use crate::protobuf::ProtoKind;
        if !self.protobuf {
            return None;
        }
        let kind = match self.metadata_only {
            true => ProtoKind::of("meta.k8s.io/v1", "PartialObjectMetadata"),
            false => self.encoding,
        }?;
        let kind = match self.without_managed_fields {
            true => kind.without_managed_fields(),
            false => kind,
        };
        kind.decodes::<K>().then_some(kind)
    }
}

impl<K> ListerWatcher<K> for ClientListerWatcher<K>
where
    K: Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        let request = if self.metadata_only {
            self.request.list_metadata(params)
        } else {
            self.request.list(params)
        };
        let mut request = request.map_err(kube::Error::BuildRequest)?;
        request::add_query(&mut request, "shardSelector", self.shard_query().as_deref());
        let text = request::text(&self.client, request).await?;
        decode::from_json(
            &text,
            self.without_managed_fields,
            skip_managed_fields::Shape::Envelope,
        )
        .map_err(kube::Error::SerdeError)
    }

    async fn list_page(&self, params: &ListParams) -> Result<ListPage<K>, kube::Error> {
        let shards = self.shard_query();
        let asking = self.asking(self.encoding(), shards.as_deref());
        raw_list_page(&self.client, &asking, params).await
    }

    async fn list_page_of(
        &self,
        params: &ListParams,
        share: &ShardSelector,
    ) -> Result<ListPage<K>, kube::Error> {
        let shards = share.to_string();
        let asking = self.asking(self.encoding(), Some(&shards));
        raw_list_page(&self.client, &asking, params).await
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, kube::Error> {
        let shards = self.shard_query();
        let asking = self.asking(self.encoding(), shards.as_deref());
        parallel_watch(&self.client, &asking, params, resource_version).await
    }
}

/// How a LIST or WATCH is asked for: the URL, and what the source adds to it.
#[derive(Clone, Copy)]
struct Asking<'a> {
    request: &'a kube::core::Request,
    metadata_only: bool,
    /// Ask for protobuf of this kind (answers are read as their `Content-Type` says).
    protobuf: Option<crate::protobuf::ProtoKind>,
    without_managed_fields: bool,
    /// The `shardSelector`, if any.
    shards: Option<&'a str>,
}

impl<'a> Asking<'a> {
    /// JSON, whole objects (or metadata), nothing added: as `kube::Api` asks.
    fn plain(request: &'a kube::core::Request, metadata_only: bool) -> Self {
        Self {
            request,
            metadata_only,
            protobuf: None,
            without_managed_fields: false,
            shards: None,
        }
    }

    /// The request `make` builds from the URL, with the `shardSelector` added.
    fn build(
        &self,
        make: impl FnOnce(
            &kube::core::Request,
        ) -> Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<http::Request<Vec<u8>>, kube::Error> {
        let mut request = make(self.request).map_err(kube::Error::BuildRequest)?;
        request::add_query(&mut request, "shardSelector", self.shards);
        Ok(request)
    }
}

/// One LIST request whose body is kept undecoded (but for its list metadata). With
/// `protobuf`, protobuf is asked for and the answer read as its `Content-Type` says.
async fn raw_list_page<K: DeserializeOwned + Clone + 'static>(
    client: &kube::Client,
    asking: &Asking<'_>,
    params: &ListParams,
) -> Result<ListPage<K>, kube::Error> {
    let (metadata_only, without_managed_fields) =
        (asking.metadata_only, asking.without_managed_fields);
    let mut request = asking.build(|r| match metadata_only {
        true => r.list_metadata(params),
        false => r.list(params),
    })?;
    let Some(kind) = asking.protobuf else {
        let body = request::text(client, request).await?;
        return ListPage::from_json(body, without_managed_fields);
    };
    let accept = match metadata_only {
        true => crate::protobuf::ACCEPT_METADATA_LIST,
        false => crate::protobuf::ACCEPT,
    };
    request
        .headers_mut()
        .insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
    match request::bytes(client, request).await? {
        (true, body) => ListPage::from_protobuf(body, kind),
        (false, body) => {
            let body = String::from_utf8(body.to_vec()).map_err(kube::Error::FromUtf8)?;
            ListPage::from_json(body, without_managed_fields)
        }
    }
}

/// One WATCH request whose objects are decoded on the decoding threads (see `decode`).
async fn parallel_watch<K: DeserializeOwned + Send + 'static>(
    client: &kube::Client,
    asking: &Asking<'_>,
    params: &WatchParams,
    resource_version: &str,
) -> Result<WatchStream<K>, kube::Error> {
    let (metadata_only, protobuf) = (asking.metadata_only, asking.protobuf);
    let mut request = asking.build(|r| match metadata_only {
        true => r.watch_metadata(params, resource_version),
        false => r.watch(params, resource_version),
    })?;
    // As kube does for watches: compressed watch bodies are not decoded reliably.
    request.headers_mut().insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    if protobuf.is_some() {
        let accept = match metadata_only {
            true => crate::protobuf::ACCEPT_METADATA,
            false => crate::protobuf::ACCEPT_WATCH,
        };
        request
            .headers_mut()
            .insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
    }
    let (framed, body) = request::stream(client, request).await?;
    let format = match protobuf {
        Some(kind) if framed => decode::Format::Protobuf(kind),
        _ => decode::Format::Json(asking.without_managed_fields),
    };
    Ok(decode::decode_in_parallel(body, format))
}
