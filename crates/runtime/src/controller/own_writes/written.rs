//! What a reconcile wrote, and where it is recorded: [`wrote`], the recording client and
//! [`carry_writes`] all add to the [`Record`] of the reconcile running on the task.

use std::{
    any::{Any, TypeId},
    collections::BTreeMap,
    sync::Arc,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, api::DynamicObject};
use kube_informer::{ObjectKey, ResourceVersion};
use parking_lot::Mutex;
use serde_json::Value;

tokio::task_local! {
    /// The record of the reconcile running on this task (or carried to it).
    static RECORD: Arc<Record>;
}

/// A kind as writes and caches are matched: its API group and kind, any version (one
/// object is the same object in every version of its kind).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GroupKind {
    pub(crate) group: String,
    pub(crate) kind: String,
}

impl GroupKind {
    /// `kind` of `api_version` (`apps/v1`, or `v1` for the core group).
    pub(crate) fn of(api_version: &str, kind: &str) -> Self {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        Self {
            group: group.to_owned(),
            kind: kind.to_owned(),
        }
    }
}

/// One write: which object, in which version.
#[derive(Clone)]
pub(crate) struct Written {
    /// Its kind, when the write tells it (the client's answer, a `DynamicObject`'s type);
    /// else the controller's caches tell it from `type_id`.
    pub(super) kind: Option<GroupKind>,
    /// Its group and resource (plural), when only they are known (a delete answered with
    /// a `Status`).
    pub(super) resource: Option<(String, String)>,
    pub(super) type_id: TypeId,
    pub(super) key: ObjectKey,
    pub(super) namespace: Option<String>,
    pub(super) labels: BTreeMap<String, String>,
    /// Its controller owner references (a write made off every reconcile's task is given
    /// to its controller owner's key).
    pub(super) controllers: Vec<OwnerReference>,
    pub(super) version: ResourceVersion,
    /// The write deleted the object (this UID): wait until the cache no longer has it.
    pub(super) deleted: Option<String>,
    /// The object as written, for [`OwnReader`](crate::controller::OwnReader) within the
    /// reconcile and for field selectors (dropped once the reconcile ended).
    pub(super) object: Option<AsWritten>,
    /// When it was recorded (tokio's clock: a paused test clock ages it too).
    pub(super) at: tokio::time::Instant,
}

/// An object as written.
#[derive(Clone)]
pub(super) enum AsWritten {
    /// Recorded with [`wrote`]: the object itself.
    Typed(Arc<dyn Any + Send + Sync>),
    /// Recorded by the recording client: the API server's answer.
    Json(Arc<Value>),
}

impl Written {
    /// A write of the object with `meta` (answered to a delete: `deleting`), or `None` if
    /// its version is not comparable (not kube-apiserver's, KEP-5504) or it has no name.
    pub(super) fn new(
        meta: &ObjectMeta,
        kind: Option<GroupKind>,
        type_id: TypeId,
        deleting: bool,
    ) -> Option<Self> {
        // A Namespace being deleted lingers (Terminating) until its contents are gone,
        // whatever its metadata.finalizers say: it is waited for as any write.
        let lingers = type_id == TypeId::of::<k8s_openapi::api::core::v1::Namespace>()
            || kind
                .as_ref()
                .is_some_and(|k| k.group.is_empty() && k.kind == "Namespace");
        let deleting = deleting && !lingers;
        let version = meta.resource_version.as_deref()?.parse().ok()?;
        let name = meta.name.as_deref().filter(|n| !n.is_empty())?;
        let namespace = meta.namespace.clone().filter(|n| !n.is_empty());
        let key = ObjectKey::new(namespace.as_deref(), name);
        // Being deleted with nothing left to wait for: this write (the last finalizer's
        // removal, or a delete answered with the object's last state) deleted it.
        // kube-apiserver answers it at the version the object had before, so only its
        // absence from the cache tells the deletion was seen. (A Pod in its grace period
        // has a deletionGracePeriodSeconds above 0: it still exists.)
        let deleted = ((deleting || meta.deletion_timestamp.is_some())
            && !lingers
            && meta.finalizers.as_ref().is_none_or(Vec::is_empty)
            && meta.deletion_grace_period_seconds.unwrap_or(0) == 0)
            .then(|| meta.uid.clone().unwrap_or_default());
        Some(Self {
            kind,
            resource: None,
            type_id,
            key,
            namespace,
            labels: meta.labels.clone().unwrap_or_default(),
            controllers: (meta.owner_references.iter().flatten())
                .filter(|r| r.controller == Some(true))
                .cloned()
                .collect(),
            version,
            deleted,
            object: None,
            at: tokio::time::Instant::now(),
        })
    }

    /// The written object's field at `path` (`metadata.name`, `spec.nodeName`) as a field
    /// selector compares it, if known.
    pub(super) fn field(&self, path: &str) -> Option<String> {
        match path {
            "metadata.name" => Some(self.key.name().to_owned()),
            "metadata.namespace" => Some(self.namespace.clone().unwrap_or_default()),
            _ => {
                let Some(AsWritten::Json(json)) = &self.object else {
                    return None;
                };
                // An unset field is as the API server formats its default (`false`, `0`,
                // `""`): not known here.
                match path.split('.').try_fold(&**json, |v, part| v.get(part)) {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Null) | None => None,
                    Some(other) => Some(other.to_string()),
                }
            }
        }
    }
}

/// The writes of one reconcile, kept for its next reconcile of the key.
#[derive(Default)]
pub(crate) struct Record {
    state: Mutex<State>,
    /// The controller whose reconcile this is (which kinds its caches read).
    owner: Option<Arc<super::OwnWrites>>,
}

enum State {
    /// The reconcile runs: its writes so far.
    Open(Vec<Written>),
    /// The reconcile ended: a write made now (by a task it carried its record to) goes
    /// straight to the controller's pending writes.
    Closed(Box<dyn Fn(Written) + Send + Sync>),
}

impl Default for State {
    fn default() -> Self {
        Self::Open(Vec::new())
    }
}

impl Record {
    pub(super) fn new(owner: Arc<super::OwnWrites>) -> Self {
        Self {
            state: Mutex::default(),
            owner: Some(owner),
        }
    }

    fn push(&self, written: Written) {
        match &mut *self.state.lock() {
            State::Open(writes) => writes.push(written),
            State::Closed(late) => late(written),
        }
    }

    /// The writes so far; later ones go to `late`.
    pub(super) fn close(&self, late: impl Fn(Written) + Send + Sync + 'static) -> Vec<Written> {
        match std::mem::replace(&mut *self.state.lock(), State::Closed(Box::new(late))) {
            State::Open(writes) => writes,
            State::Closed(_) => Vec::new(),
        }
    }

    /// `read` of the writes the running reconcile made so far (none once it ended).
    fn so_far<R>(&self, read: impl FnOnce(&[Written]) -> R) -> R {
        match &*self.state.lock() {
            State::Open(writes) => read(writes),
            State::Closed(_) => read(&[]),
        }
    }
}

/// Records `written` for the reconcile running on this task, if any.
pub(super) fn record(written: Written) {
    let _ = RECORD.try_with(|record| record.push(written));
}

/// Whether a reconcile (or a future carrying its record) runs on this task.
pub(super) fn recording_here() -> bool {
    RECORD.try_with(|_| ()).is_ok()
}

/// Records that the running reconcile wrote `obj` (the object the API server returned
/// from a create, update, patch, or a delete that left it terminating): the next reconcile
/// of the same key waits until the controller's caches of `obj`'s kind hold that version
/// or later. Outside a reconcile, or for an object without a numeric resourceVersion, it
/// does nothing.
///
/// Writes made through a [`recording_client`](super::recording_client) are recorded
/// without this call; it is for writes made another way.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use kube::{Api, api::PostParams};
/// use kube_informer_runtime::controller::{Action, Cached, wrote};
///
/// async fn reconcile(cm: Cached<ConfigMap>, secrets: Arc<Api<Secret>>) -> Result<Action, kube::Error> {
///     let Cached::Present(_cm) = cm else { return Ok(Action::Done) };
///     let child = Secret::default(); // named and owned by the ConfigMap
///     let created = secrets.create(&PostParams::default(), &child).await?;
///     wrote(&created); // the next reconcile sees this Secret in the cache
///     Ok(Action::Done)
/// }
/// ```
pub fn wrote<K: Resource + Clone + Send + Sync + 'static>(obj: &K) {
    if !recording_here() {
        return;
    }
    // A dynamic object says its kind; a typed one by its type's (so that a `Pod` written
    // is waited for in a `Compact<Pod>` cache too, and the reverse).
    let any: &dyn Any = obj;
    let static_type: &dyn Any = &();
    let kind = any
        .downcast_ref::<DynamicObject>()
        .and_then(|dynamic| dynamic.types.as_ref())
        .map(|types| GroupKind::of(&types.api_version, &types.kind))
        .or_else(|| {
            let dt = static_type.downcast_ref::<K::DynamicType>()?;
            Some(GroupKind::of(&K::api_version(dt), &K::kind(dt)))
        });
    let Some(mut written) = Written::new(obj.meta(), kind, TypeId::of::<K>(), false) else {
        return;
    };
    written.object = Some(AsWritten::Typed(Arc::new(obj.clone())));
    record(written);
}

/// Runs `future` with the record of the reconcile running on this task: writes made in it
/// (through the recording client, or recorded with [`wrote`]) are the reconcile's, also
/// when `future` runs on a task of its own and after the reconcile returned (then the next
/// reconcile of the key waits for them, if it has not started yet). Outside a reconcile,
/// `future` runs as it is.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use kube::{Api, api::PostParams};
/// use kube_informer_runtime::controller::{Action, Cached, carry_writes};
///
/// async fn reconcile(cm: Cached<ConfigMap>, secrets: Arc<Api<Secret>>) -> Result<Action, kube::Error> {
///     let Cached::Present(_cm) = cm else { return Ok(Action::Done) };
///     let mut tasks = tokio::task::JoinSet::new();
///     for _ in 0..3 {
///         let secrets = secrets.clone();
///         // Each child is recorded as this reconcile's write, though made on another task.
///         tasks.spawn(carry_writes(async move {
///             secrets.create(&PostParams::default(), &Secret::default()).await
///         }));
///     }
///     while let Some(created) = tasks.join_next().await {
///         created.expect("no panic")?;
///     }
///     Ok(Action::Done)
/// }
/// ```
pub fn carry_writes<F: Future>(future: F) -> impl Future<Output = F::Output> {
    let record = RECORD.try_with(Arc::clone).ok();
    async move {
        match record {
            Some(record) => RECORD.scope(record, future).await,
            None => future.await,
        }
    }
}

/// Runs `future` (one reconcile) with its writes recorded in `record`.
pub(crate) async fn recording<F: Future>(record: Arc<Record>, future: F) -> F::Output {
    RECORD.scope(record, future).await
}

/// The writes the running reconcile made so far of `K` objects of `kind` (recorded as
/// `K`, or by the recording client), oldest first: (key, the object as written, or `None`
/// if the write deleted it, its version). `kind` `None`: the kind the controller reads `K`
/// as. Empty outside a reconcile.
pub(crate) fn written<K>(
    kind: Option<&GroupKind>,
) -> Vec<(ObjectKey, Option<Arc<K>>, ResourceVersion)>
where
    K: serde::de::DeserializeOwned + Send + Sync + 'static,
{
    // Under the record's lock only the matching writes' keys and objects (shared) are
    // taken; a JSON answer is decoded after.
    let Ok(found) = RECORD.try_with(|record| {
        let known = record.owner.as_ref().and_then(|o| o.kind_of::<K>());
        let kind = kind.or(known.as_ref());
        record.so_far(|writes| {
            writes
                .iter()
                .filter_map(|w| {
                    // A write that says its kind must be this one (dynamic objects of other
                    // kinds share the Rust type).
                    let same_kind = match (&w.kind, kind) {
                        (Some(have), Some(want)) => have == want,
                        (None, _) => true,
                        (Some(_), None) => false,
                    };
                    let matches = match w.object.as_ref()? {
                        AsWritten::Typed(_) => {
                            w.type_id == TypeId::of::<K>() && (same_kind || kind.is_none())
                        }
                        AsWritten::Json(_) => same_kind && kind.is_some(),
                    };
                    let object = w.object.clone()?;
                    matches.then(|| (w.key.clone(), object, w.deleted.is_none(), w.version))
                })
                .collect::<Vec<_>>()
        })
    }) else {
        return Vec::new();
    };
    found
        .into_iter()
        .filter_map(|(key, object, kept, version)| {
            let object: Arc<K> = match object {
                AsWritten::Typed(typed) => typed.downcast::<K>().ok()?,
                AsWritten::Json(json) => Arc::new(K::deserialize(&*json).ok()?),
            };
            Some((key, kept.then_some(object), version))
        })
        .collect()
}
