//! The sharder: labels each object with the shard that owns it, so that each replica's
//! informers can ask the API server for their own objects only.

use futures_util::StreamExt;
use kube::{
    Resource,
    api::{Api, ApiResource, DynamicObject, Patch, PatchParams},
};

#[cfg(doc)]
use super::{LiveShards, acknowledge_drain};
use super::{Placement, Ring, ShardKey, drain_label, holder_annotation, shard_label};

/// What to write on one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Label it with its shard (and clear a drain): it has no shard, its shard is dead,
    /// or it is a child (its owner is what a controller reconciles).
    Assign,
    /// Ask its live shard to let go of it first ([`drain_label`]); once that shard has
    /// acknowledged ([`acknowledge_drain`]: both labels removed) the next round assigns it.
    Drain,
    /// Label it for the live shard that holds it, and name that shard its holder
    /// ([`holder_annotation`]), leaving a drain as it is: someone else moved or removed
    /// the label (it is put back, the holder never changed), or it was labelled without a
    /// holder (at creation, or by an older sharder) and is adopted as labelled.
    Hold,
}

/// One object to relabel: it belongs to `to`, and is labelled `from` now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    /// The object's namespace (`None`: cluster-scoped).
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The version the plan was made from: the label is written only if it is still
    /// current (a conflict means the object changed, and the next round places it again).
    pub resource_version: Option<String>,
    /// The shard it is labelled with now.
    pub from: Option<String>,
    /// The shard that owns it (for [`Step::Hold`], the one that holds it).
    pub to: String,
    /// What is written now.
    pub step: Step,
}

/// What [`Sharder::apply`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// Labels written.
    pub labelled: usize,
    /// Objects that changed or went away since the plan (placed again next round).
    pub stale: usize,
}

/// Places the objects of one ring on its shards (see the [module docs](super)).
///
/// **Handover without two shards at once.** An object that must move away from a *live*
/// shard is not relabelled directly: the sharder first adds the [`drain_label`]; the old
/// shard, once no reconcile of the object runs there, removes both labels
/// ([`acknowledge_drain`]); only then does a later round label it for the new shard. An
/// object whose shard is *dead* (its Lease expired: that replica stopped reconciling a
/// margin before, see [`LiveShards`](super::LiveShards)) or that has no shard is labelled at
/// once; so are children ([`Placement::Controller`]), whose owner is what is reconciled.
///
/// ```no_run
/// # async fn run(client: kube::Client, leases: kube::Api<k8s_openapi::api::coordination::v1::Lease>) -> Result<(), kube::Error> {
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kube_informer_runtime::sharding::{LiveShards, Placement, Sharder};
///
/// let live = LiveShards::new(leases, "web");
/// let sharder = Sharder::new("web");
/// let ring = live.observe().await?;
/// let deployments: kube::Api<Deployment> = kube::Api::all(client.clone());
/// let listed = deployments.list(&Default::default()).await?;
/// let moves = sharder.plan(&ring, &listed.items, &(), Placement::Own);
/// sharder.apply::<Deployment>(&client, &(), &moves).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Sharder {
    ring: String,
    label: String,
    drain: String,
    holder: String,
}

impl Sharder {
    /// The sharder of `ring`.
    pub fn new(ring: impl Into<String>) -> Self {
        let ring = ring.into();
        Self {
            label: shard_label(&ring),
            drain: drain_label(&ring),
            holder: holder_annotation(&ring),
            ring,
        }
    }

    /// The ring's name.
    pub(crate) fn ring(&self) -> &str {
        &self.ring
    }

    /// What to write so that every object ends up labelled with its shard on `ring`
    /// (see the type docs for when an object is drained first). Nothing moves when the ring
    /// is empty (no shard is alive: the objects keep their labels until one is).
    pub fn plan<'a, K, I>(
        &self,
        ring: &Ring,
        objects: I,
        dynamic_type: &K::DynamicType,
        placement: Placement,
    ) -> Vec<Move>
    where
        K: Resource + 'a,
        I: IntoIterator<Item = &'a K>,
    {
        self.plan_in(ring, objects, dynamic_type, placement, None)
    }

    /// [`plan`](Self::plan) for objects of fleet member `member` (its name, and whether it is
    /// pinned to one shard): keys by [`ShardKey::in_member`].
    pub(crate) fn plan_in<'a, K, I>(
        &self,
        ring: &Ring,
        objects: I,
        dynamic_type: &K::DynamicType,
        placement: Placement,
        member: Option<(&str, bool)>,
    ) -> Vec<Move>
    where
        K: Resource + 'a,
        I: IntoIterator<Item = &'a K>,
    {
        if ring.is_empty() {
            return Vec::new();
        }
        objects
            .into_iter()
            .filter_map(|object| {
                let meta = object.meta();
                let key = match placement {
                    Placement::Own => ShardKey::of(object, dynamic_type),
                    Placement::Controller => ShardKey::of_controller(meta),
                }?;
                let key = match member {
                    Some((cluster, pinned)) => key.in_member(cluster, pinned),
                    None => key,
                };
                let to = ring.shard_for(key.as_str())?;
                let labels = meta.labels.as_ref();
                let from = labels.and_then(|l| l.get(&self.label)).map(String::as_str);
                let draining = labels.is_some_and(|l| l.contains_key(&self.drain));
                let (step, to) = match placement {
                    // A child is not reconciled (its owner is): it follows its owner at once.
                    Placement::Controller if from == Some(to) => return None,
                    Placement::Controller => (Step::Assign, to),
                    Placement::Own => {
                        let held = meta.annotations.as_ref().and_then(|a| a.get(&self.holder));
                        own_step(ring, held.map(String::as_str), from, draining, to)?
                    }
                };
                Some(Move {
                    namespace: meta.namespace.clone(),
                    name: meta.name.clone().unwrap_or_default(),
                    resource_version: meta.resource_version.clone(),
                    from: from.map(str::to_owned),
                    to: to.to_owned(),
                    step,
                })
            })
            .collect()
    }

    /// Writes the labels of `moves` (objects of type `K`) through the API server, each a
    /// merge patch guarded by the version the plan saw, 16 at a time. The first error
    /// other than a conflict or a 404 ends it (the next round plans again).
    pub async fn apply<K>(
        &self,
        client: &kube::Client,
        dynamic_type: &K::DynamicType,
        moves: &[Move],
    ) -> Result<Applied, kube::Error>
    where
        K: Resource,
    {
        let resource = ApiResource::erase::<K>(dynamic_type);
        // The futures first, then the stream: a stream mapping `&Move` to a future would be
        // a higher-ranked closure, and the caller's future would not be `Send`.
        let writes: Vec<_> = moves
            .iter()
            .map(|step| self.write(client, &resource, step))
            .collect();
        let mut writes =
            futures_util::stream::iter(writes).buffer_unordered(super::placing::PARALLEL_WRITES);
        let mut applied = Applied::default();
        while let Some(written) = writes.next().await {
            match written? {
                true => applied.labelled += 1,
                false => applied.stale += 1,
            }
        }
        Ok(applied)
    }

    /// Writes one move's labels: `Ok(false)` if the object changed or went away since the
    /// plan.
    async fn write(
        &self,
        client: &kube::Client,
        resource: &ApiResource,
        step: &Move,
    ) -> Result<bool, kube::Error> {
        let api: Api<DynamicObject> = match &step.namespace {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
            None => Api::all_with(client.clone(), resource),
        };
        let mut patch = serde_json::json!({
            "metadata": { "resourceVersion": step.resource_version }
        });
        let metadata = &mut patch["metadata"];
        match step.step {
            Step::Assign => {
                metadata["labels"] = serde_json::json!({ &self.label: step.to, &self.drain: null });
                metadata["annotations"] = serde_json::json!({ &self.holder: step.to });
            }
            Step::Drain => metadata["labels"] = serde_json::json!({ &self.drain: "true" }),
            Step::Hold => {
                metadata["labels"] = serde_json::json!({ &self.label: step.to });
                metadata["annotations"] = serde_json::json!({ &self.holder: step.to });
            }
        }
        // A member that accepts the PATCH and never answers holds this write only so long:
        // the round goes on, the object is placed again at the next one.
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let patching = api.patch(&step.name, &params, &patch);
        let patched = tokio::time::timeout(super::placing::WRITE_TIMEOUT, patching)
            .await
            .unwrap_or_else(|_| Err(timed_out()));
        match patched {
            Ok(_) => {
                tracing::debug!(ring = %self.ring, name = %step.name, from = ?step.from, to = %step.to, step = ?step.step, "labelled");
                Ok(true)
            }
            Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => {
                tracing::debug!(ring = %self.ring, name = %step.name, "changed since the plan");
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }
}

/// A label write that got no answer in time, as the error the round logs.
fn timed_out() -> kube::Error {
    let message = format!(
        "no answer to a label PATCH within {:?}",
        super::placing::WRITE_TIMEOUT
    );
    kube::Error::Service(Box::new(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        message,
    )))
}

/// What to write on an object a shard reconciles ([`Placement::Own`]), held by `held`,
/// labelled `from`, that the ring puts on `to`; `None`: nothing.
fn own_step<'a>(
    ring: &Ring,
    held: Option<&'a str>,
    from: Option<&'a str>,
    draining: bool,
    to: &'a str,
) -> Option<(Step, &'a str)> {
    match held {
        // Its live holder may be reconciling it: only a drain hands it over. A label that
        // does not name the holder was changed by someone else: put back.
        Some(holder) if ring.contains(holder) => {
            if from != Some(holder) {
                Some((Step::Hold, holder))
            } else if holder == to || draining {
                None // where it belongs, or its holder is letting go of it
            } else {
                Some((Step::Drain, to))
            }
        }
        // Its holder is dead (its Lease expired: it stopped reconciling a margin before).
        Some(_) => Some((Step::Assign, to)),
        None => match from {
            // Labelled, never held: nobody reconciles it, so it is adopted as labelled (a
            // later round drains it if the ring puts it elsewhere).
            Some(from) if ring.contains(from) => Some((Step::Hold, from)),
            // No shard, or a dead one.
            _ => Some((Step::Assign, to)),
        },
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::sharding::{Standing, standing};

    /// A config map labelled and held by `shard` (and draining).
    fn cm(name: &str, shard: Option<&str>, draining: bool) -> ConfigMap {
        let mut cm = labelled(name, shard, draining);
        if let Some(shard) = shard {
            cm.metadata.annotations = Some([(holder_annotation("web"), shard.to_owned())].into());
        }
        cm
    }

    /// A config map labelled `shard` (and draining), without a holder.
    fn labelled(name: &str, shard: Option<&str>, draining: bool) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.name = Some(name.into());
        let mut labels = std::collections::BTreeMap::new();
        if let Some(shard) = shard {
            labels.insert(shard_label("web"), shard.to_owned());
        }
        if draining {
            labels.insert(drain_label("web"), "true".to_owned());
        }
        cm.metadata.labels = Some(labels);
        cm
    }

    /// A name the ring places on `shard`.
    fn name_on(ring: &Ring, shard: &str) -> String {
        (0..)
            .map(|i| format!("cm-{i}"))
            .find(|n| ring.shard_for(&format!("/ConfigMap/ns/{n}")) == Some(shard))
            .unwrap()
    }

    fn steps(ring: &Ring, objects: &[ConfigMap], placement: Placement) -> Vec<(String, Step)> {
        Sharder::new("web")
            .plan(ring, objects, &(), placement)
            .into_iter()
            .map(|m| (m.to, m.step))
            .collect()
    }

    #[test]
    fn an_object_leaves_a_live_shard_through_a_drain_and_a_dead_one_at_once() {
        let ring = Ring::new(["a", "b"]);
        let on_b = name_on(&ring, "b");
        let b = || "b".to_owned();
        // Unlabelled: assigned.
        assert_eq!(
            steps(&ring, &[cm(&on_b, None, false)], Placement::Own),
            [(b(), Step::Assign)]
        );
        // Where it belongs: nothing to do.
        assert!(steps(&ring, &[cm(&on_b, Some("b"), false)], Placement::Own).is_empty());
        // On live `a`: drained first…
        assert_eq!(
            steps(&ring, &[cm(&on_b, Some("a"), false)], Placement::Own),
            [(b(), Step::Drain)]
        );
        // …and left alone while `a` lets go.
        assert!(steps(&ring, &[cm(&on_b, Some("a"), true)], Placement::Own).is_empty());
        // On `gone`, which is not on the ring (its Lease expired): assigned at once.
        assert_eq!(
            steps(&ring, &[cm(&on_b, Some("gone"), false)], Placement::Own),
            [(b(), Step::Assign)]
        );
        assert_eq!(
            steps(&ring, &[cm(&on_b, Some("gone"), true)], Placement::Own),
            [(b(), Step::Assign)]
        );
        // No live shard: nothing moves.
        assert!(
            steps(
                &Ring::default(),
                &[cm(&on_b, Some("a"), false)],
                Placement::Own
            )
            .is_empty()
        );
    }

    #[test]
    fn a_label_someone_else_changed_is_put_back_while_its_holder_lives() {
        let ring = Ring::new(["a", "b"]);
        let on_a = name_on(&ring, "a");
        let holder = |shard: &str| Some([(holder_annotation("web"), shard.to_owned())].into());
        let hold = |to: &str| vec![(to.to_owned(), Step::Hold)];
        // Held by a, relabelled b (kubectl label --overwrite): the label goes back to a.
        let mut moved = labelled(&on_a, Some("b"), false);
        moved.metadata.annotations = holder("a");
        assert_eq!(steps(&ring, &[moved.clone()], Placement::Own), hold("a"));
        // The same with the label removed, emptied, or naming a dead shard.
        for label in [None, Some(""), Some("gone")] {
            let mut edited = labelled(&on_a, label, false);
            edited.metadata.annotations = holder("a");
            assert_eq!(
                steps(&ring, &[edited], Placement::Own),
                hold("a"),
                "{label:?}"
            );
        }
        // Relabelled while a drains it: put back, the drain kept (a still acknowledges).
        let mut draining = labelled(&on_a, Some("b"), true);
        draining.metadata.annotations = holder("a");
        assert_eq!(steps(&ring, &[draining], Placement::Own), hold("a"));
        // Held by a dead shard: assigned where the ring puts it, label and holder.
        let mut dead = labelled(&on_a, Some("b"), false);
        dead.metadata.annotations = holder("gone");
        assert_eq!(
            steps(&ring, &[dead], Placement::Own),
            [("a".to_owned(), Step::Assign)]
        );
        // Labelled b and never held (at creation, by an older sharder): adopted by b,
        // then drained to a like any other.
        assert_eq!(
            steps(&ring, &[labelled(&on_a, Some("b"), false)], Placement::Own),
            hold("b")
        );
        // Neither b nor a reconciles an object b's label names but a holds.
        assert_eq!(standing(&moved.metadata, "web", "b"), Standing::Elsewhere);
        assert_eq!(standing(&moved.metadata, "web", "a"), Standing::Elsewhere);
    }

    #[test]
    fn a_child_follows_its_controller_at_once() {
        let ring = Ring::new(["a", "b"]);
        let owner = name_on(&ring, "b");
        let mut child = cm("child", Some("a"), false);
        child.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: owner,
                uid: "u".into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        assert_eq!(
            steps(&ring, std::slice::from_ref(&child), Placement::Controller),
            [("b".to_owned(), Step::Assign)]
        );
        // Without a controller it is not placed.
        child.metadata.owner_references = None;
        assert!(steps(&ring, &[child], Placement::Controller).is_empty());
    }

    #[test]
    fn standing_reads_the_two_labels_and_the_holder() {
        let mine = cm("x", Some("a"), false);
        assert_eq!(standing(&mine.metadata, "web", "a"), Standing::Mine);
        assert_eq!(
            standing(&mine.metadata, "api", "a"),
            Standing::Elsewhere,
            "another ring"
        );
        let draining = cm("x", Some("a"), true);
        assert_eq!(standing(&draining.metadata, "web", "a"), Standing::Draining);
        assert_eq!(
            standing(&draining.metadata, "web", "b"),
            Standing::Elsewhere
        );
    }
}
