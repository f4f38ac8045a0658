//! A model property: whatever the adds, gets and dones, the queue behaves as a naive
//! model of client-go's.

use proptest::prelude::*;

use super::*;

proptest! {
    /// Whatever the sequence of adds, gets and dones, the queue never hands out an item that
    /// is being processed, never holds one twice, and ends holding exactly the items that
    /// were added and not yet handed out since (a naive model of client-go's queue).
    #[test]
    fn queue_matches_a_naive_model(ops in prop::collection::vec((0u8..3, 0u8..5), 1..200)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let q: Queue<u8> = Queue::default();
            let mut held: Vec<WorkItem<u8>> = Vec::new();
            let mut model_queue: Vec<u8> = Vec::new();
            let mut model_dirty: std::collections::HashSet<u8> = Default::default();
            for (op, item) in ops {
                match op {
                    0 => {
                        q.add(item);
                        if model_dirty.insert(item) && !held.iter().any(|h| **h == item) {
                            model_queue.push(item);
                        }
                    }
                    1 if !model_queue.is_empty() => {
                        let got = take(&q).await;
                        let expected = model_queue.remove(0);
                        prop_assert_eq!(*got, expected);
                        model_dirty.remove(&expected);
                        prop_assert!(!held.iter().any(|h| **h == expected), "handed out twice");
                        held.push(got);
                    }
                    _ if !held.is_empty() => {
                        let i = usize::from(item) % held.len();
                        let done = held.remove(i);
                        let value = *done;
                        drop(done);
                        if model_dirty.contains(&value) {
                            model_queue.push(value);
                        }
                    }
                    _ => {}
                }
                prop_assert_eq!(q.len(), model_queue.len());
            }
            Ok(())
        })?;
    }
}
