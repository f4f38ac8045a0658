//! Waiting for an object in an informer's cache to reach a condition: kube-runtime's
//! `wait::await_condition`, read from a shared cache instead of a watch of its own, for
//! tests and for code that waits for something to become ready.
//!
//! ```no_run
//! # async fn example(factory: kube_informer::factory::SharedInformerFactory) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Pod;
//! use kube_informer::ObjectKey;
//! use kube_informer_runtime::wait::{Condition, await_condition, conditions};
//!
//! let pods = factory.informer::<Pod>();
//! factory.start();
//! let key = ObjectKey::new(Some("shop"), "web-0");
//! // Running, or gone: whichever comes first, within a minute.
//! let done = conditions::is_pod_running().or(conditions::is_deleted(None));
//! let pod = tokio::time::timeout(Duration::from_secs(60), await_condition(&pods, &key, done)).await??;
//! # let _ = pod;
//! # Ok(()) }
//! ```

pub mod conditions;

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt;
use kube::Resource;
use kube_informer::{
    ObjectKey,
    informer::{HandlerOptions, Notification, SharedIndexInformer},
    meta_namespace_key,
};

/// What an object must be for [`await_condition`] to return: a test of its cached state,
/// `None` while there is none (not created yet, or deleted). Any `Fn(Option<&K>) -> bool`
/// is one; the combinators build others.
pub trait Condition<K> {
    /// Whether `object` (its cached state; `None`: absent) satisfies the condition.
    fn matches(&self, object: Option<&K>) -> bool;

    /// Both this and `other`.
    fn and<C: Condition<K>>(self, other: C) -> And<Self, C>
    where
        Self: Sized,
    {
        And(self, other)
    }

    /// This or `other`.
    fn or<C: Condition<K>>(self, other: C) -> Or<Self, C>
    where
        Self: Sized,
    {
        Or(self, other)
    }

    /// The opposite of this.
    fn not(self) -> Not<Self>
    where
        Self: Sized,
    {
        Not(self)
    }
}

impl<K, F: Fn(Option<&K>) -> bool> Condition<K> for F {
    fn matches(&self, object: Option<&K>) -> bool {
        self(object)
    }
}

/// Both conditions ([`Condition::and`]).
#[derive(Debug, Clone, Copy)]
pub struct And<A, B>(A, B);

/// Either condition ([`Condition::or`]).
#[derive(Debug, Clone, Copy)]
pub struct Or<A, B>(A, B);

/// The opposite ([`Condition::not`]).
#[derive(Debug, Clone, Copy)]
pub struct Not<A>(A);

impl<K, A: Condition<K>, B: Condition<K>> Condition<K> for And<A, B> {
    fn matches(&self, object: Option<&K>) -> bool {
        self.0.matches(object) && self.1.matches(object)
    }
}

impl<K, A: Condition<K>, B: Condition<K>> Condition<K> for Or<A, B> {
    fn matches(&self, object: Option<&K>) -> bool {
        self.0.matches(object) || self.1.matches(object)
    }
}

impl<K, A: Condition<K>> Condition<K> for Not<A> {
    fn matches(&self, object: Option<&K>) -> bool {
        !self.0.matches(object)
    }
}

/// Why [`await_condition`] returned without the condition met.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// The informer is not running: start it (or its factory) before waiting on it.
    #[error("informer {0} is not running: start it (or its factory) before waiting on its cache")]
    NotRunning(String),
    /// The informer stopped while the condition was not met.
    #[error("informer {0} stopped before the condition was met")]
    Stopped(String),
}

/// Waits until the object `key` in `informer`'s cache satisfies `condition`, and returns
/// its state then (`None` if the condition was met by its absence, as
/// [`conditions::is_deleted`] is). The cache is read once it has synced (so an object not
/// listed yet is not taken for an absent one), then every change of `key` is tested as it
/// arrives. There is no deadline of its own: wrap it in `tokio::time::timeout`.
pub async fn await_condition<K>(
    informer: &SharedIndexInformer<K>,
    key: &ObjectKey,
    condition: impl Condition<K>,
) -> Result<Option<Arc<K>>, WaitError>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    let name = || informer.name().to_owned();
    // Subscribed first, read second: no change falls between the two.
    let mut changes = informer.stream(HandlerOptions::default().name("await_condition"));
    while informer
        .wait_for_sync(Duration::from_secs(10))
        .await
        .is_err()
    {
        if !informer.health().running {
            return Err(WaitError::NotRunning(name()));
        }
    }
    let current = informer.store().get_by_key(key.as_str());
    if condition.matches(current.as_deref()) {
        return Ok(current);
    }
    while let Some(change) = changes.next().await {
        let state = match &change {
            Notification::Delete(gone) if is(&**gone.object(), key) => None,
            Notification::Add { object, .. } if is(&**object, key) => Some(object.clone()),
            Notification::Update { new, .. } if is(&**new, key) => Some(new.clone()),
            _ => continue,
        };
        if condition.matches(state.as_deref()) {
            return Ok(state);
        }
    }
    Err(WaitError::Stopped(name()))
}

fn is<K: Resource>(object: &K, key: &ObjectKey) -> bool {
    meta_namespace_key(object).is_ok_and(|k| k == *key)
}
