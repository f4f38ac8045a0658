//! The reconcile contract: what a reconcile is given ([`Cached`]), what it asks for next
//! ([`Action`]), and the [`Reconciler`] trait every reconcile function has (the bounds a
//! controller, a manager and the sharding layer state once).
//!
//! A leaf: it depends on nothing else in the crate, so every layer that wraps a reconcile
//! (the controller, the sharding layer, the manager) can use it without importing another.

use std::{fmt::Display, future::Future, sync::Arc, time::Duration};

use kube_informer::ObjectKey;

/// The object a reconcile is for, as the cache has it now: present, or gone (deleted, or
/// never created). An enum, not an `Option`: the deleted case cannot be forgotten, and it
/// still carries the key (for cleaning up what the object owned outside Kubernetes).
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kube_informer_runtime::controller::Cached;
///
/// fn describe(cached: &Cached<Deployment>) -> String {
///     match cached {
///         Cached::Present(deploy) => format!("{:?} wants {:?}", deploy.metadata.name, deploy.spec.as_ref().and_then(|s| s.replicas)),
///         Cached::Gone(key) => format!("{key} is gone"),
///     }
/// }
/// # let _ = describe;
/// ```
#[derive(Debug)]
pub enum Cached<K> {
    /// The object, as cached (shared, never copied).
    Present(Arc<K>),
    /// No such object in the cache: it was deleted (or never existed).
    Gone(ObjectKey),
}

impl<K> Clone for Cached<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Present(obj) => Self::Present(obj.clone()),
            Self::Gone(key) => Self::Gone(key.clone()),
        }
    }
}

impl<K> Cached<K> {
    /// The object, if present.
    pub fn present(&self) -> Option<&Arc<K>> {
        match self {
            Self::Present(obj) => Some(obj),
            Self::Gone(_) => None,
        }
    }
}

/// What to do with a key after a reconcile (or, from an error policy, after an error).
///
/// | returned by | `Done` | `RequeueAfter(d)` | `Retry` |
/// |---|---|---|---|
/// | the reconcile | success: nothing more until the object changes | success: look again after `d` | retry with backoff, like an error |
/// | the error policy | a terminal error: not retried until the object changes (counted in `controller_runtime_terminal_reconcile_errors_total`) | retry after `d` | retry with the key's exponential backoff (capped at 1000 s) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing more until the object changes again.
    Done,
    /// Look again after this long (after a success, the key's failure count is forgotten).
    RequeueAfter(Duration),
    /// Look again after the rate limiter's delay for this key, as after an error: the
    /// failure count grows (for an error policy that decided to retry).
    Retry,
}

/// An error policy: given the object a reconcile failed on, its error and the controller's
/// context, it says what to do with the key ([`Action`]). Every
/// `Fn(&Cached<K>, &E, &Ctx) -> Action` that is `Send + Sync + 'static` is one (a closure
/// or a plain function); the trait only names that bound once.
///
/// ```
/// use kube_informer_runtime::controller::{Action, Cached, ErrorPolicy};
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// fn accepts<P: ErrorPolicy<ConfigMap, std::io::Error, ()>>(_: P) {}
/// accepts(|_: &Cached<ConfigMap>, error: &std::io::Error, _: &()| match error.kind() {
///     std::io::ErrorKind::InvalidInput => Action::Done, // terminal: retrying will not help
///     _ => Action::Retry,
/// });
/// ```
pub trait ErrorPolicy<K, E, Ctx>:
    Fn(&Cached<K>, &E, &Ctx) -> Action + Send + Sync + 'static
{
}

impl<K, E, Ctx, F> ErrorPolicy<K, E, Ctx> for F where
    F: Fn(&Cached<K>, &E, &Ctx) -> Action + Send + Sync + 'static
{
}

/// A reconcile function: given the object as cached (and the controller's context), it
/// brings the world to what the object asks and says what to do next. Every
/// `async fn(Cached<K>, Arc<Ctx>) -> Result<Action, E>` (and every closure of that shape)
/// is one, with `E` any displayable error; implement it by hand for a reconciler that is
/// a struct.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer_runtime::{Action, Cached, reconcile::Reconciler};
///
/// async fn reconcile(_cm: Cached<ConfigMap>, _ctx: Arc<()>) -> Result<Action, kube::Error> {
///     Ok(Action::Done)
/// }
///
/// fn takes<R: Reconciler<ConfigMap, ()>>(_reconciler: R) {}
/// takes(reconcile);
/// takes(|_cm: Cached<ConfigMap>, _ctx: Arc<()>| async { Ok::<_, std::io::Error>(Action::Done) });
/// ```
pub trait Reconciler<K, Ctx>: Send + Sync + 'static {
    /// What a failed reconcile returns (logged, counted and given to the error policy).
    type Error: Display + Send + 'static;
    /// The reconcile of one object.
    type Future: Future<Output = Result<Action, Self::Error>> + Send + 'static;

    /// Reconciles `object`.
    fn reconcile(&self, object: Cached<K>, ctx: Arc<Ctx>) -> Self::Future;
}

impl<K, Ctx, E, R, Fut> Reconciler<K, Ctx> for R
where
    R: Fn(Cached<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: Display + Send + 'static,
{
    type Error = E;
    type Future = Fut;

    fn reconcile(&self, object: Cached<K>, ctx: Arc<Ctx>) -> Fut {
        self(object, ctx)
    }
}
