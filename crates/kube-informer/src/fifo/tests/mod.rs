//! The FIFO contract, rule by rule, for both implementations where the rule is shared.

use std::{collections::BTreeMap, convert::Infallible, sync::Arc};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::ObjectMeta;
use proptest::prelude::*;

use super::*;
use crate::Store;

/// `ns/<name>` with data `v=<version>`.
fn cm(name: &str, version: &str) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some([("v".to_owned(), version.to_owned())].into()),
        ..Default::default()
    })
}

fn version(obj: &ConfigMap) -> String {
    obj.data.as_ref().unwrap()["v"].clone()
}

/// A delta as (type, version, is_tombstone), for compact assertions.
type Shape = (DeltaType, String, bool);

fn shape(delta: &Delta<ConfigMap>) -> Shape {
    let tombstone = matches!(delta, Delta::Deleted(d) if d.is_final_state_unknown());
    (delta.delta_type(), version(delta.object()), tombstone)
}

fn s(t: DeltaType, v: &str) -> Shape {
    (t, v.to_owned(), false)
}

fn tomb(v: &str) -> Shape {
    (DeltaType::Deleted, v.to_owned(), true)
}

use DeltaType::{Added, Deleted, Replaced, Sync, Updated};

/// What the informer does with popped deltas: apply them to the store.
fn apply(store: &Store<ConfigMap>, deltas: &Deltas<ConfigMap>) {
    for delta in deltas {
        match delta {
            Delta::Deleted(_) => {
                store.delete_by_key(deltas.key().as_str());
            }
            other => {
                store
                    .insert(deltas.key().clone(), other.object().clone())
                    .unwrap();
            }
        }
    }
}

/// A popped entry: key, its deltas, and whether it was in the initial list.
type Popped = (String, Vec<Shape>, bool);

async fn pop_one<Q: DeltaQueue<ConfigMap>>(q: &Q, store: &Store<ConfigMap>) -> Popped {
    let mut out = None;
    q.pop(|deltas, initial| {
        apply(store, deltas);
        out = Some((
            deltas.key().to_string(),
            deltas.iter().map(shape).collect(),
            initial,
        ));
        Ok::<(), ProcessError<Infallible>>(())
    })
    .await
    .unwrap();
    out.unwrap()
}

/// Pops (and applies) until empty; returns (key, deltas) of each pop.
async fn drain<Q: DeltaQueue<ConfigMap>>(
    q: &Q,
    store: &Store<ConfigMap>,
) -> Vec<(String, Vec<Shape>)> {
    let mut out = Vec::new();
    while !q.is_empty() {
        let (key, deltas, _) = pop_one(q, store).await;
        out.push((key, deltas));
    }
    out
}

fn delta_fifo(store: &Store<ConfigMap>) -> DeltaFifo<ConfigMap> {
    DeltaFifo::new(Some(Arc::new(store.clone())))
}

fn real_fifo(store: &Store<ConfigMap>) -> RealFifo<ConfigMap> {
    RealFifo::new(Arc::new(store.clone()))
}

fn k(name: &str) -> String {
    format!("ns/{name}")
}

mod batches;
mod capacity;
mod model;
mod ordering;
mod pop;
mod replace;
