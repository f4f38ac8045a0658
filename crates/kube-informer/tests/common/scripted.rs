//! A scripted `ListerWatcher`: each LIST and WATCH answered as a test says (including never),
//! every call recorded with its parameters and the (paused) time.

#![allow(dead_code)]

use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    api::{ListParams, ObjectList, WatchEvent, WatchParams},
    core::Status,
};
use kube_informer::list_watch::{ListerWatcher, WatchStream};
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;

/// One request the source saw.
#[derive(Debug, Clone)]
pub(crate) enum Call {
    List {
        resource_version: Option<String>,
        at: Instant,
    },
    Watch {
        resource_version: String,
        initial_events: bool,
        timeout: Option<u32>,
        at: Instant,
    },
}

impl Call {
    pub(crate) fn is_watch(&self) -> bool {
        matches!(self, Self::Watch { .. })
    }

    pub(crate) fn at(&self) -> Instant {
        match self {
            Self::List { at, .. } | Self::Watch { at, .. } => *at,
        }
    }
}

/// How a LIST is answered.
pub(crate) enum ListReply {
    Items(Vec<ConfigMap>, &'static str),
    Fail(kube::Error),
    /// Accepted and never answered.
    Hang,
}

/// How a WATCH is answered.
pub(crate) enum WatchReply {
    /// These events, then the stream closes.
    Close(Vec<WatchEvent<ConfigMap>>),
    /// These events, then the stream stays open and silent.
    Stay(Vec<WatchEvent<ConfigMap>>),
    Fail(kube::Error),
    /// No response headers, ever.
    Hang,
}

type ListScript = Box<dyn Fn(usize) -> ListReply + Send + Sync>;
type WatchScript = Box<dyn Fn(usize, &WatchParams) -> WatchReply + Send + Sync>;

/// The source. `list(n)` and `watch(n, params)` get the 0-based count of earlier calls of
/// their kind.
pub(crate) struct Scripted {
    pub(crate) calls: Arc<Mutex<Vec<Call>>>,
    list: ListScript,
    watch: WatchScript,
}

impl Scripted {
    pub(crate) fn new(
        list: impl Fn(usize) -> ListReply + Send + Sync + 'static,
        watch: impl Fn(usize, &WatchParams) -> WatchReply + Send + Sync + 'static,
    ) -> Self {
        Self {
            calls: Arc::default(),
            list: Box::new(list),
            watch: Box::new(watch),
        }
    }

    fn count(&self, watch: bool) -> usize {
        self.calls
            .lock()
            .iter()
            .filter(|c| c.is_watch() == watch)
            .count()
    }
}

impl ListerWatcher<ConfigMap> for Scripted {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<ConfigMap>, kube::Error> {
        let n = self.count(false);
        self.calls.lock().push(Call::List {
            resource_version: params.resource_version.clone(),
            at: Instant::now(),
        });
        match (self.list)(n) {
            ListReply::Items(items, rv) => {
                let list = json!({"metadata": {"resourceVersion": rv}, "items": items});
                Ok(serde_json::from_value(list).expect("a list"))
            }
            ListReply::Fail(err) => Err(err),
            ListReply::Hang => std::future::pending().await,
        }
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<ConfigMap>, kube::Error> {
        let n = self.count(true);
        self.calls.lock().push(Call::Watch {
            resource_version: resource_version.to_owned(),
            initial_events: params.send_initial_events,
            timeout: params.timeout,
            at: Instant::now(),
        });
        match (self.watch)(n, params) {
            WatchReply::Close(events) => {
                Ok(futures_util::stream::iter(events.into_iter().map(Ok)).boxed())
            }
            WatchReply::Stay(events) => Ok(futures_util::stream::iter(events.into_iter().map(Ok))
                .chain(futures_util::stream::pending())
                .boxed()),
            WatchReply::Fail(err) => Err(err),
            WatchReply::Hang => std::future::pending().await,
        }
    }
}

/// A config map `demo/<name>` at `rv`.
pub(crate) fn cm(name: &str, rv: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "namespace": "demo", "resourceVersion": rv}}),
    )
    .expect("a config map")
}

/// A bookmark at `rv` (optionally the end of a streaming list's initial events).
pub(crate) fn bookmark(rv: &str, initial_end: bool) -> WatchEvent<ConfigMap> {
    let annotations = if initial_end {
        json!({"k8s.io/initial-events-end": "true"})
    } else {
        json!({})
    };
    let event = json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"resourceVersion": rv, "annotations": annotations}}});
    serde_json::from_value(event).expect("a bookmark")
}

/// An API error with `code`.
pub(crate) fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
    kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
}
