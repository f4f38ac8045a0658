//! A tour of the core cache: a simulated reflector feeds a FIFO, an informer loop pops the
//! deltas and applies them to an indexed store, and readers query it by index.
//!
//! No API server is involved: the events are scripted, including a relist after a missed
//! delete, so the tombstone path shows. Run it with either FIFO:
//!
//! ```text
//! cargo run --example tour              # RealFifo (client-go 1.36's default)
//! cargo run --example tour -- delta     # DeltaFifo (per-key coalescing)
//! ```

use std::{convert::Infallible, sync::Arc};

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube::core::ObjectMeta;
use kube_informer::{
    DeletedObject, Indexers, NAMESPACE_INDEX, Store,
    fifo::{Delta, DeltaFifo, DeltaQueue, DeltaSink, ProcessError, RealFifo},
};

fn pod(ns: &str, name: &str, node: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn node_of(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .into_iter()
        .collect()
}

/// What a reflector would push: a first list, watch events, and a relist that misses a pod
/// deleted while the watch was down.
fn reflect(queue: &impl DeltaSink<Pod>) -> Result<(), kube_informer::KeyError> {
    queue.replace(
        vec![
            pod("shop", "web-1", "node-a"),
            pod("shop", "web-2", "node-b"),
            pod("ops", "metrics", "node-a"),
        ],
        "10",
    )?;
    queue.add(pod("shop", "web-3", "node-b"))?;
    queue.update(pod("shop", "web-2", "node-a"))?; // rescheduled
    queue.delete(pod("shop", "web-1", "node-a"))?;
    // The watch dropped; "ops/metrics" was deleted meanwhile. The relist notices.
    queue.replace(
        vec![
            pod("shop", "web-2", "node-a"),
            pod("shop", "web-3", "node-b"),
        ],
        "10",
    )?;
    Ok(())
}

/// The informer's loop: pop, apply to the store, tell the "handler" (here: print).
async fn run(queue: &impl DeltaQueue<Pod>, store: &Store<Pod>) {
    while !queue.is_empty() {
        let popped = queue
            .pop(|deltas, in_initial_list| {
                for delta in deltas {
                    let key = deltas.key();
                    match delta {
                        Delta::Deleted(gone) => {
                            store.delete_by_key(key.as_str());
                            match gone {
                                DeletedObject::Known(_) => println!("  delete  {key}"),
                                DeletedObject::FinalStateUnknown { .. } => {
                                    println!(
                                        "  delete  {key}  (missed while disconnected: tombstone)"
                                    )
                                }
                            }
                        }
                        other => {
                            let old = store
                                .insert(key.clone(), other.object().clone())
                                .ok()
                                .flatten();
                            let what = match (other, old.is_some()) {
                                (Delta::Sync(_), _) => "resync",
                                (_, true) => "update",
                                (_, false) if in_initial_list => "add     (initial list)",
                                (_, false) => "add",
                            };
                            println!("  {what:<7} {key}");
                        }
                    }
                }
                Ok::<(), ProcessError<Infallible>>(())
            })
            .await;
        if let Err(err) = popped {
            eprintln!("pop failed: {err}");
            return;
        }
    }
}

fn report(store: &Store<Pod>) -> Result<(), kube_informer::IndexError> {
    println!("\ncache: {} pods", store.len());
    let mut nodes = store.list_index_func_values("by-node")?;
    nodes.sort();
    for node in nodes {
        let mut keys: Vec<String> = store
            .index_keys("by-node", &node)?
            .iter()
            .map(ToString::to_string)
            .collect();
        keys.sort();
        println!("  {node}: {}", keys.join(", "));
    }
    println!(
        "  namespace shop: {} pods",
        store.by_index(NAMESPACE_INDEX, "shop")?.len()
    );
    Ok(())
}

/// The whole tour on one queue.
async fn tour(
    queue: impl DeltaQueue<Pod>,
    store: &Store<Pod>,
) -> Result<(), Box<dyn std::error::Error>> {
    reflect(&queue)?;
    run(&queue, store).await;
    println!("resync tick: replay the cache (no API call)");
    queue.resync();
    run(&queue, store).await;
    report(store)?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The library logs through `tracing` (RUST_LOG=debug shows the FIFO and store at work).
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let store: Store<Pod> = Store::new(Indexers::new().namespace().index("by-node", node_of));
    let known = Arc::new(store.clone());
    if std::env::args().nth(1).as_deref() == Some("delta") {
        println!("DeltaFifo: one entry per key, all its pending deltas together\n");
        tour(DeltaFifo::new(Some(known)), &store).await
    } else {
        println!("RealFifo: every event, one at a time, in arrival order\n");
        tour(RealFifo::new(known), &store).await
    }
}
