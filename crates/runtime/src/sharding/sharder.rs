//! The sharder: labels each object with the shard that owns it, so that each replica's
//! informers can ask the API server for their own objects only.

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

/// One label to write: `object` belongs to `to`, and is labelled `from` now.
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
/// This first part labels every object with the shard that owns it *directly*: an object
/// moving from a live shard to another can be reconciled by both while the old shard's
/// informer has not yet seen the move. The drain handover that prevents it (the old shard
/// acknowledges before the new one is named) comes next; until then use it where a
/// reconcile is idempotent and a rare overlap during a rebalance is harmless.
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
}

impl Sharder {
    /// The sharder of `ring`.
    pub fn new(ring: impl Into<String>) -> Self {
        let ring = ring.into();
        Self {
            label: shard_label(&ring),
            ring,
        }
    }

    /// The ring's name.
    pub fn ring(&self) -> &str {
        &self.ring
    }

    /// The labels to write so that every object is labelled with its shard on `ring`.
    /// Nothing moves when the ring is empty (no shard is alive: the objects keep their
    /// labels until one is).
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
                let from = meta.labels.as_ref().and_then(|l| l.get(&self.label));
                (from.map(String::as_str) != Some(to)).then(|| Move {
                    namespace: meta.namespace.clone(),
                    name: meta.name.clone().unwrap_or_default(),
                    resource_version: meta.resource_version.clone(),
                    from: from.cloned(),
                    to: to.to_owned(),
                })
            })
            .collect()
    }

    /// Writes the labels of `moves` (objects of type `K`) through the API server, each a
    /// merge patch guarded by the version the plan saw.
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
        let mut applied = Applied::default();
        for step in moves {
            let api: Api<DynamicObject> = match &step.namespace {
                Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let patch = serde_json::json!({
                "metadata": {
                    "resourceVersion": step.resource_version,
                    "labels": { &self.label: step.to },
                }
            });
            match api
                .patch(&step.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => applied.labelled += 1,
                Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => {
                    applied.stale += 1;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(applied)
    }
}
