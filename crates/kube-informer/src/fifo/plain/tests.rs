//! The plain FIFO's rules. The client-go cases are in `tests/client_go/fifo.rs`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;

use super::*;

fn cm(name: &str, v: &str) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some([("v".to_owned(), v.to_owned())].into());
    Arc::new(cm)
}

fn v(obj: &ConfigMap) -> String {
    obj.data.as_ref().unwrap()["v"].clone()
}

async fn pop(fifo: &Fifo<ConfigMap>) -> (String, String, bool) {
    let mut initial = false;
    let obj = fifo
        .pop(|_, i| {
            initial = i;
            Ok::<(), ProcessError<()>>(())
        })
        .await
        .unwrap();
    (obj.metadata.name.clone().unwrap(), v(&obj), initial)
}

#[tokio::test]
async fn an_update_replaces_in_place_and_a_delete_unqueues() {
    let fifo = Fifo::new();
    fifo.add(cm("a", "1")).unwrap();
    fifo.add(cm("b", "1")).unwrap();
    fifo.add(cm("c", "1")).unwrap();
    fifo.update(cm("a", "2")).unwrap();
    fifo.delete(cm("b", "1")).unwrap();
    assert_eq!(fifo.list_keys(), ["a", "c"]);
    assert_eq!(pop(&fifo).await, ("a".into(), "2".into(), false));
    fifo.add(cm("b", "3")).unwrap(); // back after a delete: at the end
    assert_eq!(fifo.list_keys(), ["c", "b"]);
}

#[tokio::test]
async fn add_if_not_present_keeps_the_queued_object() {
    let fifo = Fifo::new();
    fifo.add(cm("a", "2")).unwrap();
    fifo.add_if_not_present(cm("a", "1")).unwrap();
    assert_eq!(v(&fifo.get_by_key("a").unwrap()), "2");
    fifo.add_if_not_present(cm("b", "1")).unwrap();
    assert_eq!(fifo.len(), 2);
}

#[tokio::test]
async fn a_requeue_goes_to_the_back_and_keeps_the_sync_waiting() {
    let fifo = Fifo::new();
    fifo.replace(vec![cm("a", "1"), cm("b", "1")], "5").unwrap();
    let failed = fifo
        .pop(|_, initial| {
            assert!(initial);
            Err(ProcessError::Requeue("not yet"))
        })
        .await;
    assert!(matches!(failed, Err(PopError::Process("not yet"))));
    assert_eq!(fifo.list_keys(), ["b", "a"]);
    assert_eq!(pop(&fifo).await.0, "b");
    assert!(
        !fifo.has_synced(),
        "a is back in the queue, still unprocessed"
    );
    assert_eq!(pop(&fifo).await, ("a".into(), "1".into(), true));
    assert!(fifo.has_synced());
}

#[tokio::test]
async fn a_failure_drops_the_object() {
    let fifo = Fifo::new();
    fifo.add(cm("a", "1")).unwrap();
    let failed = fifo.pop(|_, _| Err(ProcessError::Fail(7))).await;
    assert!(matches!(failed, Err(PopError::Process(7))));
    assert!(fifo.is_empty());
}

#[tokio::test]
async fn deleted_initial_objects_do_not_hold_the_sync_back() {
    let fifo = Fifo::new();
    fifo.replace(vec![cm("a", "1"), cm("b", "1")], "5").unwrap();
    assert!(!fifo.has_synced());
    fifo.delete(cm("b", "1")).unwrap();
    assert_eq!(pop(&fifo).await.0, "a");
    assert!(fifo.has_synced());
}

#[tokio::test]
async fn a_relist_replaces_everything_and_an_early_write_means_synced() {
    let fifo = Fifo::new();
    fifo.add(cm("x", "1")).unwrap();
    assert!(
        fifo.has_synced(),
        "a write before any relist: nothing to wait for"
    );
    fifo.replace(vec![cm("b", "1"), cm("a", "1")], "9").unwrap();
    assert_eq!(fifo.list_keys(), ["b", "a"], "the list's order; x is gone");
    assert!(fifo.has_synced());
    fifo.resync(); // a no-op
    assert_eq!(fifo.len(), 2);
}

#[tokio::test]
async fn a_bad_item_leaves_a_relist_undone() {
    let fifo = Fifo::new();
    fifo.add(cm("x", "1")).unwrap();
    let nameless = Arc::new(ConfigMap::default());
    assert!(fifo.replace(vec![cm("a", "1"), nameless], "2").is_err());
    assert_eq!(fifo.list_keys(), ["x"]);
}

#[tokio::test]
async fn close_ends_waiting_pops_once_empty() {
    let fifo = Arc::new(Fifo::<ConfigMap>::new());
    fifo.add(cm("a", "1")).unwrap();
    fifo.close();
    assert!(fifo.is_closed());
    assert_eq!(
        pop(&fifo).await.0,
        "a",
        "what was queued is still handed out"
    );
    let waiting = tokio::spawn({
        let fifo = fifo.clone();
        async move { fifo.pop(|_, _| Ok::<(), ProcessError<()>>(())).await.err() }
    });
    assert!(matches!(waiting.await.unwrap(), Some(PopError::Closed)));
}
