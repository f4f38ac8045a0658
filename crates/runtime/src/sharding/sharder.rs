//! The sharder: labels each object with the shard that owns it, so that each replica's
//! informers can ask the API server for their own objects only.

use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    Resource,
    api::{Api, ApiResource, DynamicObject, Patch, PatchParams},
};
use kube_informer::list_watch::Selectors;

use super::{Ring, ShardKey};

/// The label that names an object's shard in `ring`: `shard.kube-informer.dev/<ring>`.
pub fn shard_label(ring: &str) -> String {
    format!("shard.kube-informer.dev/{ring}")
}

/// The label that asks an object's shard in `ring` to let go of it before it moves:
/// `drain.kube-informer.dev/<ring>`.
pub fn drain_label(ring: &str) -> String {
    format!("drain.kube-informer.dev/{ring}")
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

/// How an object's [`ShardKey`] is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// By its own key: the objects a controller reconciles.
    Own,
    /// By its controller owner's key, so it lands with its owner: the children a
    /// controller owns. An object without a controller is not placed.
    Controller,
}

/// What to write on one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Label it with its shard (and clear a drain): it has no shard, its shard is dead,
    /// or it is a child (its owner is what a controller reconciles).
    Assign,
    /// Ask its live shard to let go of it first ([`drain_label`]); once that shard has
    /// acknowledged ([`acknowledge_drain`]: both labels removed) the next round assigns it.
    Drain,
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
    /// The shard that owns it.
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
/// margin before, see [`Members`](super::Members)) or that has no shard is labelled at
/// once; so are children ([`Placement::Controller`]), whose owner is what is reconciled.
///
/// ```no_run
/// # async fn run(client: kube::Client, leases: kube::Api<k8s_openapi::api::coordination::v1::Lease>) -> Result<(), kube::Error> {
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kube_informer_runtime::sharding::{Members, Placement, Sharder};
///
/// let members = Members::new(leases, "web");
/// let sharder = Sharder::new("web");
/// let ring = members.observe().await?;
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
}

impl Sharder {
    /// The sharder of `ring`.
    pub fn new(ring: impl Into<String>) -> Self {
        let ring = ring.into();
        Self {
            label: shard_label(&ring),
            drain: drain_label(&ring),
            ring,
        }
    }

    /// The ring's name.
    pub fn ring(&self) -> &str {
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
                let to = ring.shard_for(key.as_str())?;
                let labels = meta.labels.as_ref();
                let from = labels.and_then(|l| l.get(&self.label));
                let draining = labels.is_some_and(|l| l.contains_key(&self.drain));
                let step = match from {
                    Some(from) if from == to => return None,
                    Some(from) if ring.contains(from) && placement == Placement::Own => {
                        if draining {
                            // Its live shard is letting go of it: wait for that.
                            return None;
                        }
                        Step::Drain
                    }
                    // No shard, a dead one (also one that died while draining), or a child.
                    _ => Step::Assign,
                };
                Some(Move {
                    namespace: meta.namespace.clone(),
                    name: meta.name.clone().unwrap_or_default(),
                    resource_version: meta.resource_version.clone(),
                    from: from.cloned(),
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
        let labels = match step.step {
            Step::Assign => serde_json::json!({ &self.label: step.to, &self.drain: null }),
            Step::Drain => serde_json::json!({ &self.drain: "true" }),
        };
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": step.resource_version, "labels": labels }
        });
        match api
            .patch(&step.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
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

/// Where an object stands for one shard of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Labelled for this shard: reconcile it.
    Mine,
    /// Labelled for this shard, which is asked to let go of it: reconcile it no more and
    /// [`acknowledge_drain`] once no reconcile of it runs.
    Draining,
    /// Not this shard's (another's, or none yet): leave it alone. An object that an
    /// informer reports deleted with this standing has *moved* away, it was not deleted.
    Elsewhere,
}

/// Where `meta`'s object stands for `shard` of `ring`.
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use kube_informer_runtime::sharding::{Standing, shard_label, standing};
///
/// let mut meta = ObjectMeta::default();
/// assert_eq!(standing(&meta, "web", "a"), Standing::Elsewhere);
/// meta.labels = Some([(shard_label("web"), "a".to_owned())].into());
/// assert_eq!(standing(&meta, "web", "a"), Standing::Mine);
/// assert_eq!(standing(&meta, "web", "b"), Standing::Elsewhere);
/// ```
pub fn standing(meta: &ObjectMeta, ring: &str, shard: &str) -> Standing {
    let labels = meta.labels.as_ref();
    match labels.and_then(|l| l.get(&shard_label(ring))) {
        Some(owner) if owner == shard => {
            if labels.is_some_and(|l| l.contains_key(&drain_label(ring))) {
                Standing::Draining
            } else {
                Standing::Mine
            }
        }
        _ => Standing::Elsewhere,
    }
}

/// The old shard's half of a handover: removes the shard and drain labels of `object`
/// (guarded by its resourceVersion), which lets the sharder assign it elsewhere. Call it
/// only once no reconcile of the object runs on this shard. `Ok(false)`: the object
/// changed or went away meanwhile (look again when it comes back).
pub async fn acknowledge_drain<K: Resource>(
    client: &kube::Client,
    dynamic_type: &K::DynamicType,
    ring: &str,
    object: &K,
) -> Result<bool, kube::Error> {
    let meta = object.meta();
    let resource = ApiResource::erase::<K>(dynamic_type);
    let api: Api<DynamicObject> = match &meta.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": meta.resource_version,
            "labels": { shard_label(ring): null, drain_label(ring): null },
        }
    });
    let name = meta.name.as_deref().unwrap_or_default();
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::debug!(%ring, %name, "let go of a drained object");
            Ok(true)
        }
        Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    /// A config map labelled `shard` (and draining), whose key the ring places on `owner`.
    fn cm(name: &str, shard: Option<&str>, draining: bool) -> ConfigMap {
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
    fn standing_reads_the_two_labels() {
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
