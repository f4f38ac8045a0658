//! [`Batch`]: the watch lines or frames decoded together, in one buffer, and [`Spares`]:
//! the buffers of one watch, reused from batch to batch.
//!
//! A batch used to be a vector per line: one allocation per watch event, of the event's
//! size (kilobytes: large enough that glibc's malloc consolidates its fast bins for it),
//! freed on the decoding thread that read it. A watch's batches now share a few buffers
//! that come back once decoded: in the steady state a watch event costs no allocation
//! before its object's own.

use std::ops::Range;

use parking_lot::Mutex;

/// Lines or frames, each a range of one buffer.
#[derive(Debug, Default)]
pub(super) struct Batch {
    buf: Vec<u8>,
    items: Vec<Range<usize>>,
}

impl Batch {
    /// Adds one item.
    pub(super) fn push(&mut self, item: &[u8]) {
        let start = self.buf.len();
        self.buf.extend_from_slice(item);
        self.items.push(start..self.buf.len());
    }

    /// Adds one item made of two parts (a line's start read earlier, and its end).
    pub(super) fn push_parts(&mut self, first: &[u8], second: &[u8]) {
        let start = self.buf.len();
        self.buf.extend_from_slice(first);
        self.buf.extend_from_slice(second);
        self.items.push(start..self.buf.len());
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.items.iter().map(|range| &self.buf[range.clone()])
    }
}

/// How many decoded batches a watch keeps for reuse, at most.
const KEPT: usize = 4;
/// A buffer grown past this (a burst, a huge object) is not kept.
const KEPT_BYTES: usize = 1 << 20;

/// The spare batches of one watch.
#[derive(Debug, Default)]
pub(super) struct Spares(Mutex<Vec<Batch>>);

impl Spares {
    /// An empty batch: a spare one if there is one.
    pub(super) fn take(&self) -> Batch {
        self.0.lock().pop().unwrap_or_default()
    }

    /// A decoded batch, to be reused.
    pub(super) fn give(&self, mut batch: Batch) {
        if batch.buf.capacity() > KEPT_BYTES {
            return;
        }
        batch.buf.clear();
        batch.items.clear();
        let mut spares = self.0.lock();
        if spares.len() < KEPT {
            spares.push(batch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Batch, KEPT, KEPT_BYTES, Spares};

    #[test]
    fn items_come_back_in_order_and_buffers_are_reused_within_bounds() {
        let spares = Spares::default();
        let mut batch = spares.take();
        batch.push(b"one");
        batch.push_parts(b"tw", b"o");
        batch.push(b"");
        let items: Vec<&[u8]> = batch.iter().collect();
        assert_eq!(items, [&b"one"[..], b"two", b""]);
        assert_eq!(batch.len(), 3);
        let capacity = batch.buf.capacity();
        spares.give(batch);
        let again = spares.take();
        assert!(again.is_empty() && again.buf.is_empty());
        assert_eq!(again.buf.capacity(), capacity, "the same buffer, reused");
        // Never more than KEPT spares, and no buffer grown past KEPT_BYTES.
        for _ in 0..KEPT + 3 {
            spares.give(Batch::default());
        }
        assert_eq!(spares.0.lock().len(), KEPT);
        let mut huge = Batch::default();
        huge.push(&vec![0; KEPT_BYTES + 1]);
        let before = spares.0.lock().len();
        spares.take();
        spares.give(huge);
        assert_eq!(
            spares.0.lock().len(),
            before - 1,
            "a huge buffer is dropped"
        );
    }
}
