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
//! ## What is here so far
//!
//! - [`key`]: object keys (`namespace/name` or `name`): [`ObjectKey`],
//!   [`meta_namespace_key`], [`split_meta_namespace_key`].
//! - [`store`] and [`index`]: the thread-safe, indexed cache [`Store`] (alias [`Indexer`]),
//!   holding `Arc<K>` so reads never copy an object, with named index functions
//!   ([`Indexers`]) kept exactly in step with every write, and atomic relists.
//! - [`fifo`]: the queue between reflector and informer, one contract ([`fifo::DeltaQueue`])
//!   with two implementations: [`RealFifo`] (strict arrival order, client-go 1.36's default)
//!   and [`DeltaFifo`] (per-key coalescing, the classic design). Tombstones are the
//!   [`DeletedObject`] enum, so a handler cannot forget the "final state unknown" case.
//!   Beside them, client-go's plain FIFO, [`fifo::Fifo`]: the newest state of each key,
//!   deletes dropped.
//! - [`list_watch`] and [`reflector`]: the [`list_watch::ListerWatcher`] source (implemented
//!   for `kube::Api` of typed objects, `DynamicObject` and `PartialObjectMeta`) and the
//!   [`reflector::Reflector`] that keeps a FIFO in step with the API server through every
//!   failure: streaming lists with LIST fallback, client-go's resourceVersion ladder, paged
//!   consistent lists, resumed watches, 410 relists, Retry-After, jittered backoff, idle
//!   detection of half-open watches, metrics.
//! - [`informer`]: [`informer::SharedIndexInformer`] — one reflector, one cache, any number
//!   of handlers, each told of every change in order on its own task (panics isolated,
//!   optional per-object coalescing, per-handler resync and sync tracking, batched and atomic
//!   application to the cache), and [`factory::SharedInformerFactory`], which shares one
//!   informer per type between controllers.
//! - [`lister`]: [`Lister`] and [`NamespaceLister`], typed read-only views of the cache with
//!   label selectors.
//! - [`workqueue`]: client-go's work queues for controllers: [`workqueue::Queue`],
//!   [`workqueue::DelayingQueue`], [`workqueue::RateLimitingQueue`], rate limiters, and
//!   Prometheus metrics; a [`workqueue::WorkItem`] guard makes Get/Done/Forget impossible to
//!   mismatch; [`workqueue::Workers`], the worker loop a controller is built on, owned by
//!   its caller (drain, abort, or drop it), fed by [`informer::enqueue_keys`].
//!
//! The controller runtime (controllers with relations and predicates, finalizers, events,
//! leader election, a manager) is the `kube-informer-runtime` crate, built on these parts.
//!
//! Objects are any [`kube::Resource`]: k8s-openapi types, `DynamicObject`,
//! `PartialObjectMeta`.
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
pub mod reflector;
pub mod store;
mod util;
pub mod workqueue;

pub(crate) use self::util::{FastMap, FastSet, panic_message};

pub use self::{
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
    fifo::DeletedObject,
    index::{IndexError, Indexers, NAMESPACE_INDEX},
    informer::{
        HandlerFuncs, HandlerRegistration, InformerOptions, Notification, ResourceEventHandler,
        SharedIndexInformer,
    },
    key::{KeyError, ObjectKey, meta_namespace_key, split_meta_namespace_key},
    lister::{Lister, NamespaceLister},
    store::{ReadOnlyStore, Store},
};

/// The README's examples, compiled and run as doc tests so they cannot rot.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
