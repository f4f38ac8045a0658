//! Kubernetes Events (`events.k8s.io/v1`) from a controller, as `kubectl describe` shows
//! them, with client-go's aggregation and spam filter (see the `series` module docs).
//!
//! Recording never blocks a reconcile: [`Recorder::publish`] puts the event in a bounded
//! queue (1000, client-go's size) and returns; a background task aggregates and writes.
//! When the queue is full, the event is dropped and logged. A write that fails on the
//! transport is retried (12 times, 10 s apart with jitter, as client-go); one the server
//! rejects is logged and dropped.
//!
//! ```no_run
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kube_informer_runtime::events::{EventType, NewEvent, Recorder, Reporter};
//!
//! # fn demo(client: kube::Client, deploy: &Deployment) {
//! let recorder = Recorder::new(client, Reporter::new("ready-pods", "pod-7f9c"));
//! recorder.publish(
//!     deploy,
//!     NewEvent::new(EventType::Normal, "Counted", "Reconcile").note("3 of 3 pods ready"),
//! );
//! # }
//! ```

#[cfg(feature = "testing")]
mod memory;
mod series;
mod sink;

use std::{sync::Arc, time::Duration};

use k8s_openapi::{
    api::{
        core::v1::ObjectReference,
        events::v1::{Event, EventSeries},
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::Resource;
use parking_lot::Mutex;
use tokio::{sync::mpsc, task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

#[cfg(feature = "testing")]
pub use self::memory::{MemoryEvents, Written};
use self::series::{Aggregator, Observed, SeriesKey};
pub use self::sink::EventSink;

/// Events waiting to be written, at most (client-go's `maxQueuedEvents`).
const QUEUE: usize = 1000;
/// Tries per write on transport failures (client-go's `maxTriesPerEvent`).
const TRIES: u32 = 12;
/// The pause between tries (client-go's `defaultSleepDuration`), jittered by up to 25 %.
const RETRY_PAUSE: Duration = Duration::from_secs(10);

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something went wrong.
    Warning,
}

/// Who reports: the controller's name and this instance (e.g. the pod's name).
#[derive(Debug, Clone)]
pub struct Reporter {
    controller: String,
    instance: String,
}

impl Reporter {
    /// `controller` (e.g. `ready-pods`, or `example.com/ready-pods`) reporting from
    /// `instance`.
    pub fn new(controller: impl Into<String>, instance: impl Into<String>) -> Self {
        Self {
            controller: controller.into(),
            instance: instance.into(),
        }
    }
}

/// An event to publish about an object.
#[derive(Debug, Clone)]
pub struct NewEvent {
    type_: EventType,
    reason: String,
    action: String,
    note: Option<String>,
    related: Option<ObjectReference>,
}

impl NewEvent {
    /// An event of `type_` with a machine-readable `reason` (`UpperCamelCase`) for what the
    /// controller did (`action`).
    pub fn new(type_: EventType, reason: impl Into<String>, action: impl Into<String>) -> Self {
        Self {
            type_,
            reason: reason.into(),
            action: action.into(),
            note: None,
            related: None,
        }
    }

    /// A human-readable note (at most 1 kB is kept).
    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Self {
        let mut note: String = note.into();
        if note.len() > 1024 {
            let cut = (0..=1024)
                .rev()
                .find(|i| note.is_char_boundary(*i))
                .unwrap_or(0);
            note.truncate(cut);
        }
        self.note = Some(note);
        self
    }

    /// Another object the event is about.
    #[must_use]
    pub fn related(mut self, related: ObjectReference) -> Self {
        self.related = Some(related);
        self
    }
}

/// A reference to `obj`, for [`NewEvent::related`].
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    reference_of(obj, &())
}

/// A reference to `obj` of the kind `dyntype` names: a
/// [`DynamicObject`](kube::api::DynamicObject)'s [`ApiResource`](kube::api::ApiResource),
/// as a dynamic controller knows it.
///
/// ```
/// use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
/// use kube_informer_runtime::events::reference_of;
///
/// let widgets = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
/// let widget = DynamicObject::new("w1", &widgets).within("shop");
/// let reference = reference_of(&widget, &widgets);
/// assert_eq!(reference.api_version.as_deref(), Some("example.com/v1"));
/// assert_eq!(reference.kind.as_deref(), Some("Widget"));
/// ```
pub fn reference_of<K: Resource>(obj: &K, dyntype: &K::DynamicType) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(dyntype).into_owned()),
        kind: Some(K::kind(dyntype).into_owned()),
        name: obj.meta().name.clone(),
        namespace: obj.meta().namespace.clone(),
        uid: obj.meta().uid.clone(),
        resource_version: obj.meta().resource_version.clone(),
        field_path: None,
    }
}

/// Publishes events; cheap to clone (clones share the queue and the aggregation).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer_runtime::events::{EventType, MemoryEvents, NewEvent, Recorder, Reporter};
///
/// let sink = Arc::new(MemoryEvents::default()); // a `kube::Client` in production
/// let recorder = Recorder::new(sink.clone(), Reporter::new("example.com/configs", "pod-a"));
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("settings".into());
/// cm.metadata.namespace = Some("shop".into());
/// recorder.publish(&cm, NewEvent::new(EventType::Normal, "Synced", "Reconcile").note("up to date"));
/// for _ in 0..10 { tokio::task::yield_now().await; } // the writer task runs
/// assert_eq!(sink.writes().len(), 1);
/// # }
/// ```
#[derive(Clone)]
pub struct Recorder {
    reporter: Reporter,
    queue: mpsc::Sender<Event>,
    dropped: Arc<Mutex<u64>>,
    aggregator: Arc<Mutex<Aggregator>>,
    writer: Arc<Writer>,
}

/// The writer task, owned by the recorders: [closed](Recorder::close) and awaited, or —
/// once the last recorder is dropped — ended by itself after writing what is due.
struct Writer {
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// The writer's task while [`Recorder::close`] waits for it: given back to the [`Writer`]
/// if the wait is dropped.
struct Waiting<'a> {
    writer: &'a Writer,
    task: Option<JoinHandle<()>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            *self.writer.task.lock() = Some(task);
        }
    }
}

/// How long [`Recorder::close`] lets the writer write what is queued and due.
const CLOSE_WITHIN: Duration = Duration::from_secs(5);

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing to `sink`: a `kube::Client` (events.k8s.io/v1), or
    /// `MemoryEvents` (feature `testing`) in tests. Needs a tokio runtime: it starts the writer task, which
    /// [`close`](Self::close) stops and awaits (a [`Manager`](crate::Manager) closes its
    /// recorder before [`run`](crate::Manager::run) returns), and which otherwise ends when
    /// every clone of the recorder is dropped.
    pub fn new(sink: impl EventSink, reporter: Reporter) -> Self {
        let sink: Arc<dyn EventSink> = Arc::new(sink);
        let (queue, events) = mpsc::channel(QUEUE);
        let aggregator = Arc::new(Mutex::new(Aggregator::default()));
        let stop = CancellationToken::new();
        let task = tokio::spawn(write_events(events, sink, aggregator.clone(), stop.clone()));
        Self {
            reporter,
            queue,
            dropped: Arc::default(),
            aggregator,
            writer: Arc::new(Writer {
                stop,
                task: Mutex::new(Some(task)),
            }),
        }
    }

    /// Writes what is queued and every series still open, then stops the writer task and
    /// waits for it — 5 s at most, then it is cancelled. Events published afterwards, by
    /// any clone, are dropped. Idempotent.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::sync::Arc;
    /// use kube_informer_runtime::events::{MemoryEvents, Recorder, Reporter};
    ///
    /// let sink = Arc::new(MemoryEvents::default());
    /// let recorder = Recorder::new(sink.clone(), Reporter::new("my-operator", "pod-0"));
    /// // ... publish ...
    /// recorder.close().await; // nothing of the recorder runs any more
    /// # }
    /// ```
    pub async fn close(&self) {
        self.writer.stop.cancel();
        // Put back if this future is dropped while waiting, so the writer keeps an owner
        // (a second signal's `abort`, or the last recorder).
        let mut waiting = Waiting {
            writer: &self.writer,
            task: self.writer.task.lock().take(),
        };
        let Some(task) = waiting.task.as_mut() else {
            return;
        };
        if tokio::time::timeout(CLOSE_WITHIN, &mut *task)
            .await
            .is_err()
        {
            tracing::warn!("the event writer did not finish within {CLOSE_WITHIN:?}; cancelled");
            task.abort();
            let _ = task.await;
        }
        waiting.task = None;
    }

    /// Stops the writer at once, dropping what is queued, and waits for it to end: what a
    /// second signal leaves time for.
    pub(crate) async fn abort(&self) {
        self.writer.stop.cancel();
        let task = self.writer.task.lock().take();
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
    }

    /// Publishes `event` about `regarding`; never waits. Dropped (and logged) when the
    /// queue is full or the object has used up its share (the spam filter).
    pub fn publish<K: Resource<DynamicType = ()>>(&self, regarding: &K, event: NewEvent) {
        self.publish_about(reference(regarding), event);
    }

    /// [`publish`](Self::publish) for an object whose kind is known at run time: a dynamic
    /// controller's [`DynamicObject`](kube::api::DynamicObject) with its
    /// [`ApiResource`](kube::api::ApiResource) (see [`reference_of`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::sync::Arc;
    /// use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    /// use kube_informer_runtime::events::{EventType, MemoryEvents, NewEvent, Recorder, Reporter};
    ///
    /// let sink = Arc::new(MemoryEvents::default());
    /// let recorder = Recorder::new(sink.clone(), Reporter::new("example.com/widgets", "pod-a"));
    /// let widgets = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    /// let widget = DynamicObject::new("w1", &widgets).within("shop");
    /// recorder.publish_dynamic(&widget, &widgets, NewEvent::new(EventType::Normal, "Synced", "Reconcile"));
    /// # for _ in 0..10 { tokio::task::yield_now().await; }
    /// # assert_eq!(sink.writes().len(), 1);
    /// # }
    /// ```
    pub fn publish_dynamic<K: Resource>(
        &self,
        regarding: &K,
        dyntype: &K::DynamicType,
        event: NewEvent,
    ) {
        self.publish_about(reference_of(regarding, dyntype), event);
    }

    /// [`publish`](Self::publish) about the object `regarding` refers to.
    pub fn publish_about(&self, regarding: ObjectReference, event: NewEvent) {
        let now = Timestamp::now();
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or_default(),
            now.as_nanosecond()
        );
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(
                match event.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            reason: Some(event.reason),
            action: Some(event.action),
            note: event.note,
            regarding: Some(regarding),
            related: event.related,
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone()),
            ..Event::default()
        };
        if let Err(full) = self.queue.try_send(event) {
            *self.dropped.lock() += 1;
            tracing::error!("dropped an event, the queue is full: {full}");
        }
    }

    /// A recorder reporting as `reporter` through this one's writer (one queue, one
    /// aggregator, one task, however many controllers report).
    pub fn with_reporter(&self, reporter: Reporter) -> Self {
        Self {
            reporter,
            ..self.clone()
        }
    }

    /// How many events were dropped: queue full, or over an object's rate.
    pub fn dropped(&self) -> u64 {
        *self.dropped.lock() + self.aggregator.lock().dropped
    }
}

/// The writer task: aggregates, writes, and writes due series counts every minute.
async fn write_events(
    mut events: mpsc::Receiver<Event>,
    sink: Arc<dyn EventSink>,
    aggregator: Arc<Mutex<Aggregator>>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tokio::select! {
            received = events.recv() => {
                let Some(event) = received else { break };
                record(&*sink, &aggregator, event).await;
            }
            () = stop.cancelled() => {
                // Closed: what was queued before is written, nothing after.
                events.close();
                while let Ok(event) = events.try_recv() {
                    record(&*sink, &aggregator, event).await;
                }
                break;
            }
            _ = tick.tick() => {
                let due = aggregator.lock().due(Instant::now());
                for (key, series) in due {
                    write_series(&*sink, &aggregator, &key, &series).await;
                }
            }
        }
    }
    // The recorder is gone: write what is still unwritten.
    let due = aggregator.lock().due(Instant::now() + series::FINISH);
    for (key, series) in due {
        write_series(&*sink, &aggregator, &key, &series).await;
    }
}

/// Writes `event` as the aggregator says: a new event, a series started, or nothing yet.
async fn record(sink: &dyn EventSink, aggregator: &Mutex<Aggregator>, event: Event) {
    let (key, observed) = aggregator.lock().observe(event.clone(), Instant::now());
    match observed {
        Observed::Create => write(sink, &event, None).await,
        Observed::StartSeries => flush(sink, aggregator, &key).await,
        Observed::Counted | Observed::Spam => {}
    }
}

async fn flush(sink: &dyn EventSink, aggregator: &Mutex<Aggregator>, key: &SeriesKey) {
    let series = aggregator.lock().series.get(key).cloned();
    if let Some(series) = series {
        write_series(sink, aggregator, key, &series).await;
    }
}

async fn write_series(
    sink: &dyn EventSink,
    aggregator: &Mutex<Aggregator>,
    key: &SeriesKey,
    series: &series::Series,
) {
    let observed = EventSeries {
        count: series.count,
        last_observed_time: MicroTime(Timestamp::now()),
    };
    write(sink, &series.event, Some(&observed)).await;
    aggregator.lock().written(key, series.count, Instant::now());
}

/// One write, retried on transport failures; a 404 on a series patch re-creates the
/// event with its series.
async fn write(sink: &dyn EventSink, event: &Event, series: Option<&EventSeries>) {
    for attempt in 1..=TRIES {
        let result = match series {
            Some(series) => match sink.patch_series(event, series).await {
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    let mut whole = event.clone();
                    whole.series = Some(series.clone());
                    whole.metadata.resource_version = None;
                    sink.create(&whole).await
                }
                other => other,
            },
            None => sink.create(event).await,
        };
        match result {
            Ok(()) => return,
            Err(kube::Error::Api(status)) => {
                tracing::error!(reason = ?event.reason, "the server rejected an event: {}", status.message);
                return;
            }
            Err(err) if attempt < TRIES => {
                tracing::warn!("writing an event failed, will retry: {err}");
                let jitter = RETRY_PAUSE.mul_f64(0.25 * f64::from(attempt % 4) / 4.0);
                tokio::time::sleep(RETRY_PAUSE + jitter).await;
            }
            Err(err) => tracing::error!("writing an event failed {TRIES} times, dropped: {err}"),
        }
    }
}
