//! The ring's vocabulary on objects: the shard label, the drain label, the holder
//! annotation, and the selectors of one shard's objects.

use kube_informer::list_watch::Selectors;

#[cfg(doc)]
use super::Step;

/// The label that names an object's shard in `ring`: `shard.kube-informer.dev/<ring>`.
pub fn shard_label(ring: &str) -> String {
    format!("shard.kube-informer.dev/{ring}")
}

/// The label that asks an object's shard in `ring` to let go of it before it moves:
/// `drain.kube-informer.dev/<ring>`.
pub fn drain_label(ring: &str) -> String {
    format!("drain.kube-informer.dev/{ring}")
}

/// The annotation naming the shard that holds an object in `ring`:
/// `holder.kube-informer.dev/<ring>`. Only the sharder writes it (with the label, when it
/// assigns an object), and a shard reconciles an object only when the shard label *and*
/// this annotation name it: a label someone else changed (`kubectl label --overwrite`, a
/// GitOps tool, a re-applied manifest) does not hand the object to another shard while its
/// holder may still reconcile it; the sharder puts the label back (see [`Step::Hold`]).
pub fn holder_annotation(ring: &str) -> String {
    format!("holder.kube-informer.dev/{ring}")
}

/// The selectors of `shard`'s objects in `ring`, for its informers: the API server then
/// sends each replica its own objects only (its cache, its watch traffic and its
/// reconciles are ~1/N).
///
/// ```
/// use kube_informer_runtime::sharding::shard_selectors;
///
/// let selectors = shard_selectors("web", "replica-0");
/// assert_eq!(selectors.label_selector(), Some("shard.kube-informer.dev/web=replica-0"));
/// ```
pub fn shard_selectors(ring: &str, shard: &str) -> Selectors {
    Selectors::default().labels(format!("{}={shard}", shard_label(ring)))
}
