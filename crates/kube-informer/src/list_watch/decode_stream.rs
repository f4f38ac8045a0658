//! [`DecodeStream`]: a watch body read ahead while its earlier batches decode, so that a
//! batch is whatever arrived in the meantime.
//!
//! hyper hands a body over one chunk at a time, and kube-apiserver writes one chunk per
//! watch event: a reader that stops reading while its decoders are busy finds one event
//! ready when it comes back, never more (hyper reads ahead by a chunk at most). Batches of
//! one meant a hand-off to a decoding thread and back per event, and a streaming list
//! decoded by one thread at a time while the other waited (issue #40: 3 context switches
//! per event, BENCHMARKS.md "The default typed informer").
//! This stream keeps reading while batches decode: lines are cut as they arrive into the
//! next batch (up to [`BATCH`] items, then the body waits: back-pressure), and that batch
//! goes to a decoding thread as soon as one is free. A lone line on a quiet watch still goes
//! at once; under load each hand-off carries up to [`BATCH`] events.

use std::{
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::{
    AsyncBufRead, FutureExt, Stream, StreamExt, future::BoxFuture, stream::FuturesOrdered,
};
use kube::api::WatchEvent;
use serde::de::DeserializeOwned;

use super::{
    batch::{Batch, Spares},
    decode::{Format, decode_all, decode_frames, read_error},
    decode_pool::DecodePool,
};
use crate::protobuf;

/// Lines or frames read ahead into one batch, at most: then the body waits.
const BATCH: usize = 64;

type Item<K> = Result<WatchEvent<K>, kube::Error>;

/// A watch body's events, decoded on the decoding threads in order (see the module docs).
pub(super) struct DecodeStream<K, R> {
    /// `None` once it ended (its end, or a read error kept in `failed`).
    body: Option<R>,
    format: Format,
    /// The start of a line (or frame) whose end has not arrived.
    partial: Vec<u8>,
    /// Complete lines not yet handed to a decoding thread.
    next: Batch,
    /// The read error that ended the body, reported after every event before it.
    failed: Option<io::Error>,
    decoding: FuturesOrdered<BoxFuture<'static, Vec<Item<K>>>>,
    /// The events of the last batch decoded, in order.
    decoded: std::vec::IntoIter<Item<K>>,
    pool: Arc<DecodePool>,
    spares: Arc<Spares>,
    /// Batches decoding at once, at most.
    limit: usize,
    /// Batches handed to the decoding threads so far.
    #[cfg(test)]
    handed_off: usize,
}

impl<K, R> DecodeStream<K, R>
where
    K: DeserializeOwned + Send + 'static,
    R: AsyncBufRead + Unpin,
{
    pub(super) fn new(body: R, format: Format) -> Self {
        let spares = Arc::new(Spares::default());
        DecodeStream {
            body: Some(body),
            format,
            partial: Vec::new(),
            next: spares.take(),
            failed: None,
            decoding: FuturesOrdered::new(),
            decoded: Vec::new().into_iter(),
            pool: DecodePool::shared(),
            spares,
            limit: super::decoders(),
            #[cfg(test)]
            handed_off: 0,
        }
    }

    /// Cuts what the body has ready into `next`, without waiting, until it holds
    /// [`BATCH`] items or the body has nothing more for now (its waker then registered).
    fn read_ahead(&mut self, cx: &mut Context<'_>) {
        while self.next.len() < BATCH {
            // Frames complete already (or a wrong header) go first, before reading more
            // (an ended body has none: `end` empties `partial`).
            if let Format::Protobuf(_) = self.format {
                if let Err(error) = self.take_frames() {
                    return self.end(Some(error));
                }
                if self.next.len() >= BATCH {
                    return;
                }
            }
            let Some(body) = &mut self.body else {
                return;
            };
            let buf = match Pin::new(&mut *body).poll_fill_buf(cx) {
                Poll::Pending => return,
                Poll::Ready(Err(error)) => return self.end(Some(error)),
                Poll::Ready(Ok(buf)) => buf,
            };
            if buf.is_empty() {
                // The end: a last line without its newline is decoded too (and skipped if
                // cut); a frame cut short is dropped (the watch resumes either way).
                let error = match self.format {
                    Format::Json(_) if !self.partial.is_empty() => {
                        self.next.push(&self.partial);
                        None
                    }
                    Format::Json(_) => None,
                    // What is left is a frame cut short, or a header already wrong.
                    Format::Protobuf(_) => self.take_frames().err(),
                };
                return self.end(error);
            }
            match self.format {
                Format::Json(_) => {
                    let mut start = 0;
                    for end in memchr::memchr_iter(b'\n', buf) {
                        let line = &buf[start..end];
                        start = end + 1;
                        if self.partial.is_empty() && line.iter().all(u8::is_ascii_whitespace) {
                            continue;
                        }
                        self.next.push_parts(&self.partial, line);
                        self.partial.clear();
                    }
                    self.partial.extend_from_slice(&buf[start..]);
                }
                Format::Protobuf(_) => self.partial.extend_from_slice(buf),
            }
            let read = buf.len();
            Pin::new(&mut *body).consume(read);
        }
    }

    /// Moves the complete protobuf frames at the start of `partial` into `next`; a frame
    /// header claiming too much is an error.
    fn take_frames(&mut self) -> io::Result<()> {
        let (complete, used) = protobuf::split_frames(&self.partial, protobuf::MAX_FRAME)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
        for frame in complete {
            self.next.push(frame);
        }
        self.partial.drain(..used);
        Ok(())
    }

    /// The body is done: at its end (`None`) or with a read error, reported in turn.
    fn end(&mut self, error: Option<io::Error>) {
        self.body = None;
        self.partial = Vec::new();
        self.failed = error;
    }

    /// Hands `next` to a decoding thread.
    fn hand_off(&mut self) {
        let lines = std::mem::replace(&mut self.next, self.spares.take());
        #[cfg(test)]
        {
            self.handed_off += 1;
        }
        let format = self.format;
        let job = self.pool.run(move || {
            let events = match format {
                Format::Json(skip) => decode_all::<K>(&lines, skip),
                Format::Protobuf(kind) => decode_frames::<K>(&lines, kind),
            };
            (events, lines)
        });
        let spares = Arc::clone(&self.spares);
        self.decoding.push_back(
            async move {
                match job.await {
                    Ok((events, lines)) => {
                        spares.give(lines);
                        events
                    }
                    Err(e) => vec![Err(kube::Error::Service(
                        format!("decoding watch events failed: {e}").into(),
                    ))],
                }
            }
            .boxed(),
        );
    }
}

// Nothing in it is pinned: the decoded events are plain values, the body is `Unpin`.
impl<K, R: Unpin> Unpin for DecodeStream<K, R> {}

impl<K, R> Stream for DecodeStream<K, R>
where
    K: DeserializeOwned + Send + 'static,
    R: AsyncBufRead + Unpin,
{
    type Item = Item<K>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item<K>>> {
        let this = self.get_mut();
        loop {
            // Read on whatever else happens: what arrives meanwhile is the next batch.
            this.read_ahead(cx);
            if !this.next.is_empty() && this.decoding.len() < this.limit {
                this.hand_off();
            }
            if let Some(event) = this.decoded.next() {
                return Poll::Ready(Some(event));
            }
            match this.decoding.poll_next_unpin(cx) {
                Poll::Ready(Some(events)) => this.decoded = events.into_iter(),
                Poll::Pending => return Poll::Pending,
                // Nothing decoding, nothing decoded: the body's waker is registered, or it
                // ended (nothing can be left in `next`: it would have been handed off).
                Poll::Ready(None) if this.body.is_some() => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(this.failed.take().and_then(read_error)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::{TryStreamExt as _, future::poll_fn};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use parking_lot::Mutex;

    use super::*;

    /// Held by the test: decoding the object named "held" waits for it.
    static HELD: Mutex<()> = Mutex::new(());

    #[derive(Debug)]
    struct Named(String);

    impl<'de> serde::Deserialize<'de> for Named {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            #[derive(serde::Deserialize)]
            struct Object {
                metadata: ObjectMeta,
            }
            let name = Object::deserialize(d)?.metadata.name.unwrap_or_default();
            if name == "held" {
                drop(HELD.lock());
            }
            Ok(Named(name))
        }
    }

    fn line(name: &str) -> io::Result<Vec<u8>> {
        Ok(
            format!(r#"{{"type":"ADDED","object":{{"metadata":{{"name":"{name}"}}}}}}"#)
                .into_bytes()
                .into_iter()
                .chain(*b"\n")
                .collect(),
        )
    }

    /// As hyper hands a body over: one chunk at a time, the next only once the reader took
    /// the last (a channel with room for one, filled by another task, as by hyper's
    /// connection task). While the first batch decodes, the rest must still be read: it becomes one
    /// batch, not ten.
    #[tokio::test]
    #[expect(
        clippy::await_holding_lock,
        reason = "the lock is the decoder's gate, held on purpose while the stream is polled"
    )]
    async fn what_arrives_while_a_batch_decodes_is_read_ahead_into_the_next() {
        let (chunks, mut arrived) = tokio::sync::mpsc::channel::<io::Result<Vec<u8>>>(1);
        let body = futures_util::stream::poll_fn(move |cx| arrived.poll_recv(cx));
        let mut stream = DecodeStream::<Named, _>::new(body.into_async_read(), Format::Json(false));
        stream.pool = Arc::new(DecodePool::start(1));
        stream.limit = 1;
        // Taken after the stream, so dropped before it if the test fails (the stream's pool
        // joins its thread, which may be waiting for it).
        let held = HELD.lock();
        let names: Vec<String> = std::iter::once("held".to_owned())
            .chain((0..10).map(|i| format!("cm-{i}")))
            .collect();
        let sent = names.clone();
        let sender = tokio::spawn(async move {
            for name in sent {
                chunks.send(line(&name)).await.unwrap();
            }
        });
        // Poll (each poll returns Pending: "held" is decoding) until the ten others are cut.
        let mut polls = 0;
        while stream.next.len() < 10 {
            polls += 1;
            assert!(
                polls < 10_000,
                "read {} of 10 lines ahead",
                stream.next.len()
            );
            let polled = poll_fn(|cx| Poll::Ready(Pin::new(&mut stream).poll_next(cx))).await;
            assert!(polled.is_pending(), "nothing decoded yet: {polled:?}");
            tokio::task::yield_now().await;
        }
        assert_eq!(stream.handed_off, 1, "only the held line went to a decoder");
        drop(held);
        sender.await.unwrap();
        let mut seen = Vec::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Added(Named(name))) => seen.push(name),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(seen, names, "in order");
        assert_eq!(stream.handed_off, 2, "ten lines in one hand-off");
    }
}
