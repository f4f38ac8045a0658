//! Decoding a snapshot's objects on several threads while the file is read: the JSON of a
//! large cache takes longer to decode than to read, and records are independent.

use std::{num::NonZero, sync::mpsc};

use parking_lot::Mutex;

use super::{Codec, Refused};

/// Records are handed to the decoding threads in chunks of about this many bytes.
const CHUNK: usize = 1 << 20;

/// Records packed end to end.
#[derive(Default)]
struct Chunk {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Chunk {
    fn decode<K>(&self, codec: Codec<K>) -> Result<Vec<K>, String> {
        let mut start = 0;
        let mut objects = Vec::with_capacity(self.ends.len());
        for &end in &self.ends {
            objects.push((codec.decode)(&self.bytes[start..end]).map_err(|e| e.to_string())?);
            start = end;
        }
        Ok(objects)
    }
}

/// Every record `next_record` reads (into its buffer; `false` at the end), decoded with
/// `codec` on up to one thread per core while reading goes on. The objects' order is not
/// kept (they are keyed). The first decoding failure, or the reader's, refuses the file.
pub(super) fn in_parallel<K: Send>(
    codec: Codec<K>,
    mut next_record: impl FnMut(&mut Vec<u8>) -> Result<bool, Refused>,
) -> Result<Vec<K>, Refused> {
    let threads = std::thread::available_parallelism()
        .map_or(1, NonZero::get)
        .clamp(1, 8);
    let (chunks, receiver) = mpsc::sync_channel::<Chunk>(threads * 2);
    let receiver = Mutex::new(receiver);
    let (decoded_tx, decoded) = mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (receiver, decoded_tx) = (&receiver, decoded_tx.clone());
            scope.spawn(move || {
                loop {
                    let chunk = receiver.lock().recv();
                    let Ok(chunk) = chunk else { return };
                    // A type's Deserialize may panic: a refused file, never a dead decoder
                    // the reader would wait for.
                    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        chunk.decode(codec)
                    }))
                    .unwrap_or_else(|panic| Err(crate::panic_message(panic.as_ref())));
                    if decoded_tx.send(decoded).is_err() {
                        return;
                    }
                }
            });
        }
        drop(decoded_tx);
        let read = (|| {
            let (mut chunk, mut record) = (Chunk::default(), Vec::new());
            while next_record(&mut record)? {
                chunk.bytes.extend_from_slice(&record);
                chunk.ends.push(chunk.bytes.len());
                if chunk.bytes.len() >= CHUNK {
                    // The decoders run until the channel closes (they catch panics), so this
                    // waits at most for one of them to finish a chunk.
                    let _ = chunks.send(std::mem::take(&mut chunk));
                }
            }
            if !chunk.ends.is_empty() {
                let _ = chunks.send(chunk);
            }
            Ok(())
        })();
        drop(chunks);
        let mut objects = Vec::new();
        let mut failed = None;
        for result in decoded {
            match result {
                Ok(mut some) => objects.append(&mut some),
                Err(err) => {
                    failed.get_or_insert(err);
                }
            }
        }
        read?;
        match failed {
            Some(err) => Err(Refused::Corrupt(format!("an object: {err}"))),
            None => Ok(objects),
        }
    })
}
