//! # kube-informer
//!
//! client-go's informer machinery for Rust: a local, indexed, always-fresh cache of
//! Kubernetes objects fed by one LIST+WATCH per resource, shared by any number of
//! controllers.
//!
//! ```text
//!  API server ──LIST/WATCH──▶ ListerWatcher ──▶ Reflector ──Delta──▶ DeltaQueue ──pop──▶ handle_deltas
//!                                                │ resync tick        (RealFifo |            │
//!                                                ▼                     DeltaFifo)            ├─▶ Store (the cache + indexes)
//!                                            DeltaQueue::resync()                            └─▶ handlers ─▶ work queues
//!  readers (any thread): Store::get_by_key / Store::by_index  ◀── read the cache, never the API server
//! ```
//!
//! ## Example: workers over an informer
//!
//! One shared informer, a handler queueing keys, and workers reconciling them from the cache
//! (run here against the in-process fake-apiserver; with a real cluster, pass your
//! `kube::Client`). For a controller with relations, predicates, metrics, leader election
//! and a manager, use `kube-informer-runtime`'s `Controller`, which is built on these parts.
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube_informer::{
//!     ObjectKey,
//!     factory::{FactoryOptions, SharedInformerFactory},
//!     informer::{enqueue_keys, HandlerOptions},
//!     workqueue::{RateLimitingQueue, Requeue, Workers},
//! };
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
//! server.seed(&Gvr::core("configmaps"), [json!({"metadata": {"name": "app", "namespace": "default"}, "data": {"k": "v"}})]).unwrap();
//!
//! let factory = SharedInformerFactory::new(server.client().unwrap(), FactoryOptions::default());
//! let configs = factory.informer::<ConfigMap>();
//! let queue = RateLimitingQueue::<ObjectKey>::default();
//! configs.add_event_handler(enqueue_keys(queue.clone()), HandlerOptions::default());
//! factory.start();
//! factory.wait_for_sync(Duration::from_secs(10)).await.unwrap();
//!
//! let (cache, seen) = (configs.store(), Arc::new(std::sync::Mutex::new(Vec::new())));
//! let log = seen.clone();
//! let mut workers = Workers::spawn(&queue, 2, move |key: ObjectKey| {
//!     let exists = cache.get_by_key(key.as_str()).is_some();
//!     log.lock().unwrap().push(format!("{key} exists={exists}"));
//!     async { Requeue::Never }
//! });
//! while seen.lock().unwrap().is_empty() { tokio::task::yield_now().await }
//! workers.drain(Some(Duration::from_secs(30))).await; // finish what is held and queued
//! assert_eq!(*seen.lock().unwrap(), ["default/app exists=true"]);
//! factory.shutdown().await;
//! # }
//! ```
//!
//! ## Start here
//!
//! - [`SharedInformerFactory`]: one informer per resource type (and namespaces, selectors),
//!   shared by every controller that asks; [`FactoryOptions`] are its defaults,
//!   [`InformerSpec`] one informer's own settings (the precedence table is in [`factory`]).
//! - [`SharedIndexInformer`]: one LIST+WATCH, one cache, any number of handlers. Read the
//!   cache through [`ReadOnlyStore`] (`informer.store()`: get, list, `by_index`, wait for a
//!   resourceVersion) or a [`Lister`] (label selectors, per namespace); be told of changes by
//!   a [`ResourceEventHandler`] ([`HandlerFuncs`] for closures), removed through its
//!   [`HandlerRegistration`], or pull them as a stream (`informer.stream()`).
//! - [`Indexers`]: named index functions, kept in step with every write.
//! - [`ObjectKey`] (`namespace/name`) and [`DeletedObject`] (a deletion, or a tombstone when
//!   the final state is unknown: a handler cannot forget that case).
//! - [`workqueue`]: client-go's work queues and rate limiters, and [`workqueue::Workers`], the
//!   worker loop a controller is built on, fed by [`informer::enqueue_keys`].
//! - [`compact::Compact`]: objects kept as their JSON and metadata, a fraction of the memory.
//!
//! For a controller with relations, predicates, finalizers, events, leader election and a
//! manager with health and metrics endpoints, use
//! [kube-informer-runtime](https://docs.rs/kube-informer-runtime), built on these parts (its
//! front page starts with a complete operator). The repository's README lists small
//! runnable examples.
//!
//! ## The layers underneath
//!
//! For custom pipelines and tests: [`list_watch`] (the [`list_watch::ListerWatcher`]
//! source, implemented for `kube::Api` and an in-memory `MemorySource`), [`reflector`]
//! (keeps a FIFO in step with the API server through every failure: streaming lists,
//! client-go's resourceVersion ladder, resumed watches, 410 relists, Retry-After, jittered
//! backoff), [`fifo`] ([`fifo::RealFifo`], client-go 1.36's default, and
//! [`fifo::DeltaFifo`]), [`store`] ([`Store`], the writable cache the informer owns) and
//! `caches` (client-go's mutation, expiration, undelta caches and heap, with the feature
//! `client-go-caches`).
//!
//! Objects are any [`kube::Resource`]: k8s-openapi types, `DynamicObject`,
//! `PartialObjectMeta`, [`compact::Compact`].
//!
//! ## Example: an indexed cache
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::{Pod, PodSpec};
//! use kube::core::ObjectMeta;
//! use kube_informer::{Indexers, Store};
//!
//! let by_node = |pod: &Pod| pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect();
//! let pods: Store<Pod> = Store::new(Indexers::new().namespace().index("by-node", by_node));
//!
//! let pod = |name: &str, node: &str| Arc::new(Pod {
//!     metadata: ObjectMeta { namespace: Some("default".into()), name: Some(name.into()), ..Default::default() },
//!     spec: Some(PodSpec { node_name: Some(node.into()), ..Default::default() }),
//!     ..Default::default()
//! });
//! pods.add(pod("web-1", "node-a"))?;
//! pods.add(pod("web-2", "node-b"))?;
//! pods.update(pod("web-2", "node-a"))?; // rescheduled: moves between buckets
//!
//! assert_eq!(pods.by_index("by-node", "node-a")?.len(), 2);
//! assert!(pods.index_keys("by-node", "node-b")?.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(feature = "client-go-caches")]
pub mod caches;
pub mod compact;
pub mod factory;
pub mod fifo;
pub mod index;
pub mod informer;
mod json_prefix;
pub mod key;
pub mod list_watch;
pub mod lister;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod protobuf;
pub mod reflector;
pub mod resource_version;
pub mod snapshot;
pub mod store;
mod util;
pub mod workqueue;

pub(crate) use self::util::{FastMap, FastSet, panic_message};

pub use self::{
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
    fifo::DeletedObject,
    index::{IndexError, Indexers, NAMESPACE_INDEX},
    informer::{
        HandlerFuncs, HandlerOptions, HandlerRegistration, InformerOptions, Notification,
        ResourceEventHandler, SharedIndexInformer,
    },
    key::{KeyError, ObjectKey, meta_namespace_key, split_meta_namespace_key},
    list_watch::Selectors,
    lister::{Lister, NamespaceLister},
    resource_version::ResourceVersion,
    store::{ReadOnlyStore, Store},
};

/// The README's examples, compiled and run as doc tests so they cannot rot.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

// And the warm restarts page's example.
#[doc = include_str!("../../../docs/warm-restarts.md")]
#[cfg(doctest)]
pub struct WarmRestartsDoctests;
