//! Predicates: which updates of the primary object are worth a reconcile.
//!
//! A predicate looks at an update (old and new object) and says whether something relevant
//! changed. Adds and deletes always reconcile (controller-runtime's predicates pass create
//! and delete events too), and so do resyncs when the controller asks for them
//! ([`Controller::resync`](super::Controller::resync)): a predicate only
//! filters real updates.

use std::{collections::BTreeMap, sync::Arc};

use kube::Resource;

type Check<K> = Arc<dyn Fn(&K, &K) -> bool + Send + Sync>;

/// Whether an update matters, composable with [`or`](Self::or), [`and`](Self::and) and
/// [`not`](Self::not).
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kube_informer_runtime::controller::predicate::{self, Predicate};
///
/// // Reconcile when the spec (generation) or the labels change; ignore status updates.
/// let relevant: Predicate<Deployment> = predicate::generation().or(predicate::labels());
/// let old = Deployment::default();
/// let mut new = Deployment::default();
/// new.metadata.labels = Some([("tier".to_owned(), "web".to_owned())].into());
/// assert!(relevant.changed(&old, &new));
/// assert!(!relevant.changed(&old, &old));
/// ```
pub struct Predicate<K> {
    check: Check<K>,
}

impl<K> Clone for Predicate<K> {
    fn clone(&self) -> Self {
        Self {
            check: self.check.clone(),
        }
    }
}

impl<K> std::fmt::Debug for Predicate<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Predicate").finish_non_exhaustive()
    }
}

impl<K: 'static> Predicate<K> {
    /// A predicate from a function of the old and the new object.
    pub fn new(changed: impl Fn(&K, &K) -> bool + Send + Sync + 'static) -> Self {
        Self {
            check: Arc::new(changed),
        }
    }

    /// Whether the update from `old` to `new` matters.
    pub fn changed(&self, old: &K, new: &K) -> bool {
        (self.check)(old, new)
    }

    /// Either predicate.
    #[must_use]
    pub fn or(self, other: Predicate<K>) -> Self {
        Self::new(move |old, new| self.changed(old, new) || other.changed(old, new))
    }

    /// Both predicates.
    #[must_use]
    pub fn and(self, other: Predicate<K>) -> Self {
        Self::new(move |old, new| self.changed(old, new) && other.changed(old, new))
    }

    /// The opposite.
    #[must_use]
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Self {
        Self::new(move |old, new| !self.changed(old, new))
    }
}

/// `metadata.generation` changed: the spec changed (status-only updates do not bump it).
/// Objects without a generation (ConfigMaps, Secrets) never pass, as in
/// controller-runtime's `GenerationChangedPredicate`: combine with
/// [`resource_version`] for those.
pub fn generation<K: Resource + 'static>() -> Predicate<K> {
    Predicate::new(|old: &K, new: &K| old.meta().generation != new.meta().generation)
}

/// `metadata.labels` changed.
pub fn labels<K: Resource + 'static>() -> Predicate<K> {
    Predicate::new(|old: &K, new: &K| map(&old.meta().labels) != map(&new.meta().labels))
}

/// `metadata.annotations` changed.
pub fn annotations<K: Resource + 'static>() -> Predicate<K> {
    Predicate::new(|old: &K, new: &K| map(&old.meta().annotations) != map(&new.meta().annotations))
}

/// `metadata.finalizers` changed (a finalizer added or removed).
pub fn finalizers<K: Resource + 'static>() -> Predicate<K> {
    Predicate::new(|old: &K, new: &K| {
        let list = |k: &K| k.meta().finalizers.clone().unwrap_or_default();
        list(old) != list(new)
    })
}

/// `metadata.deletionTimestamp` appeared or changed (the object is being deleted).
pub fn deletion<K: Resource + 'static>() -> Predicate<K> {
    Predicate::new(|old: &K, new: &K| {
        old.meta().deletion_timestamp != new.meta().deletion_timestamp
    })
}

/// `metadata.resourceVersion` changed: any write (everything but a resync).
pub fn resource_version<K: Resource + 'static>() -> Predicate<K> {
    Predicate::new(|old: &K, new: &K| old.meta().resource_version != new.meta().resource_version)
}

fn map(labels: &Option<BTreeMap<String, String>>) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    labels.as_ref().unwrap_or(&EMPTY)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn cm(generation: Option<i64>, label: &str, rv: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.generation = generation;
        cm.metadata.resource_version = Some(rv.into());
        if !label.is_empty() {
            cm.metadata.labels = Some([("l".to_owned(), label.to_owned())].into());
        }
        cm
    }

    #[test]
    fn each_predicate_sees_only_its_field() {
        let (a, b) = (cm(Some(1), "x", "1"), cm(Some(1), "x", "2"));
        assert!(!generation().changed(&a, &b) && !labels().changed(&a, &b));
        assert!(resource_version().changed(&a, &b));
        let c = cm(Some(2), "y", "3");
        assert!(generation().changed(&a, &c) && labels().changed(&a, &c));
        assert!(
            !labels().changed(&cm(None, "", "1"), &cm(None, "", "2")),
            "none is empty"
        );
        assert!(!annotations().changed(&a, &c) && !finalizers().changed(&a, &c));
    }

    #[test]
    fn predicates_compose() {
        let (a, b) = (cm(Some(1), "x", "1"), cm(Some(1), "y", "2"));
        let spec_or_labels = generation().or(labels());
        assert!(spec_or_labels.changed(&a, &b));
        assert!(!generation().and(labels()).changed(&a, &b));
        assert!(generation().not().changed(&a, &b));
    }
}
