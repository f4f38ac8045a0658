//! Model-based convergence under random steps, and threads.

use super::*;

// ---- model-based convergence -------------------------------------------------------------

/// One step of a simulated API server and a reflector that may miss events.
#[derive(Debug, Clone)]
enum Step {
    /// The server creates/modifies/deletes `name`; `seen` = the watch delivered it.
    Write { name: u8, delete: bool, seen: bool },
    /// A relist: `replace` with the server's full state.
    Relist,
    /// A resync tick.
    Resync,
    /// The informer pops (and applies) up to n entries.
    Pop(u8),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0u8..5, prop::bool::weighted(0.3), prop::bool::weighted(0.85))
            .prop_map(|(name, delete, seen)| Step::Write { name, delete, seen }),
        1 => Just(Step::Relist),
        1 => Just(Step::Resync),
        4 => (1u8..4).prop_map(Step::Pop),
    ]
}

/// Runs `steps` against a FIFO, checking that the store converges to the server's state.
/// Returns an error message instead of panicking, for proptest.
async fn converges<Q: DeltaQueue<ConfigMap>>(
    q: Q,
    store: &Store<ConfigMap>,
    steps: &[Step],
) -> Result<(), String> {
    let mut server: BTreeMap<String, Arc<ConfigMap>> = BTreeMap::new();
    let mut revision = 0u64;
    let mut missed_since_relist = false;
    for step in steps {
        match *step {
            Step::Write { name, delete, seen } => {
                let name = format!("o{name}");
                revision += 1;
                let obj = cm(&name, &revision.to_string());
                let existed = server.contains_key(&k(&name));
                if delete && !existed {
                    continue;
                }
                if !seen {
                    missed_since_relist = true;
                }
                if delete {
                    let last = server.remove(&k(&name)).unwrap();
                    if seen {
                        q.delete(last).unwrap();
                    }
                } else {
                    server.insert(k(&name), obj.clone());
                    if seen && existed {
                        q.update(obj).unwrap();
                    } else if seen {
                        q.add(obj).unwrap();
                    }
                }
            }
            Step::Relist => {
                q.replace(server.values().cloned().collect(), "1").unwrap();
                missed_since_relist = false;
            }
            Step::Resync => q.resync(),
            Step::Pop(n) => {
                for _ in 0..n {
                    if q.is_empty() {
                        break;
                    }
                    pop_one(&q, store).await;
                }
            }
        }
    }
    let state = |store: &Store<ConfigMap>| -> BTreeMap<String, String> {
        let e = store.entries();
        e.into_iter()
            .map(|(k, v)| (k.to_string(), version(&v)))
            .collect()
    };
    let truth: BTreeMap<String, String> = server
        .iter()
        .map(|(k, v)| (k.clone(), version(v)))
        .collect();
    drain(&q, store).await;
    if !missed_since_relist && state(store) != truth {
        return Err(format!(
            "with every event seen: store {:?} != server {truth:?}",
            state(store)
        ));
    }
    q.replace(server.values().cloned().collect(), "1").unwrap();
    drain(&q, store).await;
    if state(store) != truth {
        return Err(format!(
            "after a relist: store {:?} != server {truth:?}",
            state(store)
        ));
    }
    Ok(())
}

proptest! {
    #[test]
    fn both_fifos_converge_to_the_servers_state(steps in prop::collection::vec(arb_step(), 1..80)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let store = Store::default();
        rt.block_on(converges(delta_fifo(&store), &store, &steps)).map_err(TestCaseError::fail)?;
        let store = Store::default();
        rt.block_on(converges(real_fifo(&store), &store, &steps)).map_err(TestCaseError::fail)?;
    }

    /// Without relists, RealFifo pops exactly the events pushed, in the order pushed.
    #[test]
    fn real_fifo_preserves_arrival_order(writes in prop::collection::vec((0u8..4, 0u8..3), 1..50)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let store = Store::default();
        let q = real_fifo(&store);
        let mut pushed = Vec::new();
        for (i, (name, kind)) in writes.iter().enumerate() {
            let obj = cm(&format!("o{name}"), &i.to_string());
            let t = match kind { 0 => { q.add(obj).unwrap(); Added } 1 => { q.update(obj).unwrap(); Updated } _ => { q.delete(obj).unwrap(); Deleted } };
            pushed.push((k(&format!("o{name}")), vec![s(t, &i.to_string())]));
        }
        prop_assert_eq!(rt.block_on(drain(&q, &store)), pushed);
    }
}

// ---- threads ------------------------------------------------------------------------------

/// The queues, their handles and `pop`'s future must cross threads (the informer spawns it).
#[test]
fn queues_and_pop_futures_are_send_and_sync() {
    fn send_sync<T: Send + std::marker::Sync>(_: &T) {}
    fn send<T: Send>(_: T) {}
    let store = Store::<ConfigMap>::default();
    let (dq, rq) = (delta_fifo(&store), real_fifo(&store));
    send_sync(&dq);
    send_sync(&rq);
    send_sync(&store);
    send(dq.pop(|_, _| Ok::<(), ProcessError<Infallible>>(())));
    send(rq.pop(|_, _| Ok::<(), ProcessError<Infallible>>(())));
}

/// A producer thread pushes while a consumer task pops: nothing is lost (a lost wake-up
/// would hang the consumer; the timeout only turns a hang into a failure), RealFifo pops
/// exactly the pushed sequence, and DeltaFifo keeps each key's deltas in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_thread_and_a_consumer_task_lose_nothing() {
    const EVENTS: usize = 20_000;
    async fn consume<Q: DeltaQueue<ConfigMap>>(q: &Q) -> Vec<(String, Vec<Shape>)> {
        let mut popped = Vec::new();
        loop {
            let result = q
                .pop(|d, _| {
                    popped.push((d.key().to_string(), d.iter().map(shape).collect()));
                    Ok::<(), ProcessError<Infallible>>(())
                })
                .await;
            if let Err(PopError::Closed) = result {
                return popped;
            }
        }
    }
    fn produce(
        q: Arc<impl DeltaQueue<ConfigMap> + 'static>,
    ) -> std::thread::JoinHandle<Vec<(String, Shape)>> {
        std::thread::spawn(move || {
            let mut pushed = Vec::new();
            for i in 0..EVENTS {
                let name = format!("o{}", i % 37);
                q.update(cm(&name, &i.to_string())).unwrap();
                pushed.push((k(&name), s(Updated, &i.to_string())));
                if i % 1000 == 0 {
                    std::thread::yield_now();
                }
            }
            q.close();
            pushed
        })
    }
    let guard = std::time::Duration::from_secs(120);

    let q = Arc::new(real_fifo(&Store::default()));
    let producer = produce(q.clone());
    let popped = tokio::time::timeout(guard, consume(q.as_ref()))
        .await
        .expect("consumer hung");
    let pushed = producer.join().unwrap();
    let popped: Vec<(String, Shape)> = popped
        .into_iter()
        .map(|(key, mut d)| (key, d.remove(0)))
        .collect();
    assert_eq!(popped, pushed);

    let q = Arc::new(delta_fifo(&Store::default()));
    let producer = produce(q.clone());
    let popped = tokio::time::timeout(guard, consume(q.as_ref()))
        .await
        .expect("consumer hung");
    let pushed = producer.join().unwrap();
    let mut per_key_pushed: BTreeMap<String, Vec<Shape>> = BTreeMap::new();
    for (key, shape) in pushed {
        per_key_pushed.entry(key).or_default().push(shape);
    }
    let mut per_key_popped: BTreeMap<String, Vec<Shape>> = BTreeMap::new();
    for (key, shapes) in popped {
        per_key_popped.entry(key).or_default().extend(shapes);
    }
    assert_eq!(per_key_popped, per_key_pushed);
}

/// The producer waits for each pop before pushing again, so every push lands while the
/// consumer is (about to be) asleep: a lost wake-up stalls the exchange for good and the
/// producer's wait fails. The wait bound only turns that stall into a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_pong_never_loses_a_wake_up() {
    async fn ping_pong<Q: DeltaQueue<ConfigMap> + 'static>(q: Arc<Q>) {
        const ROUNDS: usize = 2_000;
        let (ack, acks) = std::sync::mpsc::channel();
        let consumer = {
            let q = q.clone();
            tokio::spawn(async move {
                while q
                    .pop(|_, _| Ok::<(), ProcessError<Infallible>>(()))
                    .await
                    .is_ok()
                {
                    ack.send(()).unwrap();
                }
            })
        };
        let producer = std::thread::spawn(move || {
            for i in 0..ROUNDS {
                q.add(cm("o", &i.to_string())).unwrap();
                acks.recv_timeout(std::time::Duration::from_secs(30))
                    .unwrap_or_else(|_| panic!("round {i}: the consumer never woke up"));
            }
            q.close();
        });
        tokio::task::spawn_blocking(move || producer.join().unwrap())
            .await
            .unwrap();
        consumer.await.unwrap();
    }
    let store = Store::default();
    ping_pong(Arc::new(real_fifo(&store))).await;
    ping_pong(Arc::new(delta_fifo(&store))).await;
}
