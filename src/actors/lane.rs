//! Produce lanes: every produce to one partition goes through its [`Lane`], which sends it at
//! once when nothing of the lane is in flight and otherwise queues it behind the produce in
//! flight. When that one is answered, everything queued meanwhile goes as one `Append`. A
//! batch large enough to fill a write by itself ([`ALONE_BYTES`]) is never copied into the
//! queue: with nothing queued it goes at once, as another `Append` in flight.
//!
//! Why: a partition handles a message in about a microsecond, but many small produces in
//! flight (an actor pipelining, several threads) each paid for an actix message, a reply and a
//! wake-up of their caller. Coalescing them, as Kafka's producer batches records while a
//! request is in flight, makes that cost per batch instead of per record.
//!
//! Order: a lane is FIFO (queued records follow the ones in flight, `Append`s reach the
//! partition's mailbox in the order they are sent), so a caller's produces are appended in
//! the order of its calls. Each produce is answered with its own offsets. A coalesced `Append`
//! is accepted, parked or refused (`PartitionFull`, `Timeout`) as a whole.
//!
//! The lane is driven by the answers themselves: the partition answers an `Append` through
//! its [`AppendReply`], which hands out the offsets and sends what is queued. A reply dropped
//! unanswered (a restart, the broker stopping) answers with the error and drives the lane all
//! the same, so a lane never stalls.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use actix::{Message, Recipient};
use futures::channel::oneshot;

use futures::future::{join_all, Either};

use super::io_thread::Doorbell;
use crate::error::{Error, Result};
use crate::routing::Routes;
use crate::storage::{AppendInfo, RecordBatch};
use crate::types::Delivery;

/// A queue this large (on disk) is sent as another `Append` in flight rather than grown: the
/// group commit writes at most about this much at once.
const MAX_QUEUED_BYTES: usize = 1 << 20;

/// A batch this large (on disk) fills a write by itself: while nothing waits in the queue it
/// goes at once as another `Append` in flight instead of being copied into the queue (the
/// partition's group commit does not merge batches past this size either).
const ALONE_BYTES: usize = 64 << 10;

/// Append records. Sent with `do_send` by a [`Lane`] (the topic's and the handles'
/// produces all go through one per partition); the answer goes to `reply`: where they went,
/// once in the OS. Errors: `PartitionFull`, `Timeout`, `RecordTooLarge`, `PartitionFailed`,
/// `Io` (the actor then restarts). A reply dropped unanswered (a restart, the broker stopping)
/// answers `PartitionRestarted` or `BrokerStopped` by itself.
///
/// The reply travels in the message rather than through actix's response channel: a produce
/// may wait (group commit, `Block` backpressure), and answering through our own reply spares
/// a spawned response future and a second channel per produce.
#[derive(Debug)]
pub struct Append {
    pub batch: RecordBatch,
    pub reply: AppendReply,
    /// When the oldest produce in `batch` was called, if it waited in its lane first: a
    /// parked `Append` times out `block_timeout` after that, not after its arrival here.
    /// `None`: sent at once, so its arrival is the call.
    pub since: Option<Instant>,
}
impl Message for Append {
    type Result = ();
}

/// One partition's produce lane; see the module docs. Shared by the topic and the handles.
#[derive(Debug)]
pub struct Lane {
    topic: Arc<str>,
    partition: u32,
    /// The partition's actor, and its I/O thread's doorbell, rung after each `Append`.
    addr: Recipient<Append>,
    doorbell: Arc<Doorbell>,
    state: Mutex<LaneState>,
}

#[derive(Debug, Default)]
struct LaneState {
    /// `Append`s of this lane not answered yet.
    in_flight: usize,
    /// Records waiting for the next `Append`, and who waits for them, in order.
    queued: RecordBatch,
    waiters: Vec<Waiter>,
    /// When the first of `waiters` was queued: the block timeout of the `Append` that carries
    /// them counts from there.
    queued_since: Option<Instant>,
    /// Bytes of the last queue sent: the next one reserves as much (up to
    /// [`MAX_QUEUED_BYTES`]: a large batch that went as a queue must not make every later
    /// queue that large) as its first record arrives, rather than growing to it by doubling
    /// (each step a copy of all of it; with many produces in flight, most of what queueing a
    /// record cost).
    last_queue_bytes: usize,
}

/// One produce waiting for its offsets: the next `count` records of an `Append`.
#[derive(Debug)]
struct Waiter {
    count: u64,
    reply: oneshot::Sender<Result<AppendInfo>>,
}

impl Lane {
    pub fn new(
        topic: Arc<str>,
        partition: u32,
        addr: Recipient<Append>,
        doorbell: Arc<Doorbell>,
    ) -> Self {
        Lane {
            topic,
            partition,
            addr,
            doorbell,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Produces `batch`: sent now, or queued behind the lane's `Append` in flight. The
    /// receiver gets where its records went (or the error of the `Append` that carried them).
    pub fn produce(self: &Arc<Self>, batch: RecordBatch) -> oneshot::Receiver<Result<AppendInfo>> {
        let (reply, answer) = oneshot::channel();
        let waiter = Waiter {
            count: batch.len() as u64,
            reply,
        };
        let mut state = self.state();
        if state.in_flight == 0 {
            state.in_flight = 1;
            drop(state);
            self.send(batch, vec![waiter], None);
            return answer;
        }
        if state.waiters.is_empty() && batch.size_bytes() >= ALONE_BYTES {
            state.in_flight += 1;
            drop(state);
            self.send(batch, vec![waiter], None);
            return answer;
        }
        let full = state.queued.size_bytes() + batch.size_bytes() > MAX_QUEUED_BYTES;
        if full && !state.waiters.is_empty() {
            // A full queue goes now, as another Append in flight behind the others.
            state.in_flight += 1;
            let (full, waiters, since) = (
                std::mem::take(&mut state.queued),
                std::mem::take(&mut state.waiters),
                state.queued_since.replace(Instant::now()),
            );
            state.last_queue_bytes = full.size_bytes();
            state.queued = batch;
            state.waiters.push(waiter);
            drop(state);
            self.send(full, waiters, since);
            return answer;
        }
        if state.waiters.is_empty() {
            let room = state.last_queue_bytes.min(MAX_QUEUED_BYTES);
            state.queued.reserve_to(room);
        }
        state.queued.append(&batch);
        state.waiters.push(waiter);
        state.queued_since.get_or_insert_with(Instant::now);
        answer
    }

    /// Sends one `Append` for `waiters` (queued since `since`, if they waited), ringing the
    /// partition's thread. Never called with the state locked: a failed send answers (and so
    /// locks) at once.
    fn send(self: &Arc<Self>, batch: RecordBatch, waiters: Vec<Waiter>, since: Option<Instant>) {
        let reply = AppendReply {
            lane: self.clone(),
            waiters: Some(waiters),
        };
        self.addr.do_send(Append {
            batch,
            reply,
            since,
        });
        self.doorbell.ring();
    }

    /// An `Append` of this lane was answered: each of its produces gets its offsets (or the
    /// error), then what queued meanwhile goes.
    fn answered(self: &Arc<Self>, waiters: Vec<Waiter>, result: Result<AppendInfo>) {
        let mut next = result.as_ref().map_or(0, |info| info.base_offset);
        for waiter in waiters {
            let own = result.clone().map(|info| AppendInfo {
                base_offset: next,
                count: waiter.count,
                timestamp_ms: info.timestamp_ms,
            });
            next += waiter.count;
            let _ = waiter.reply.send(own);
        }
        let mut state = self.state();
        if state.waiters.is_empty() {
            state.in_flight -= 1;
            return;
        }
        let (batch, waiters, since) = (
            std::mem::take(&mut state.queued),
            std::mem::take(&mut state.waiters),
            state.queued_since.take(),
        );
        state.last_queue_bytes = batch.size_bytes();
        drop(state);
        self.send(batch, waiters, since);
    }

    /// The error for an `Append` dropped unanswered.
    fn dropped(&self) -> Error {
        match self.addr.connected() {
            true => Error::PartitionRestarted {
                topic: self.topic.to_string(),
                partition: self.partition,
            },
            false => Error::BrokerStopped,
        }
    }
}

/// The answer to a lane's `Append`: answering hands each produce its offsets and drives the
/// lane; dropping it unanswered answers with the error and drives the lane all the same.
#[derive(Debug)]
pub struct AppendReply {
    lane: Arc<Lane>,
    /// `None` once answered.
    waiters: Option<Vec<Waiter>>,
}

impl AppendReply {
    /// Answers (consumes the reply).
    pub fn send(mut self, result: Result<AppendInfo>) {
        if let Some(waiters) = self.waiters.take() {
            self.lane.answered(waiters, result);
        }
    }
}

impl crate::produce_queue::AppendAnswer for AppendReply {
    fn answer(self, result: Result<AppendInfo>) {
        self.send(result);
    }
}

impl Drop for AppendReply {
    fn drop(&mut self) {
        if let Some(waiters) = self.waiters.take() {
            let error = self.lane.dropped();
            self.lane.answered(waiters, Err(error));
        }
    }
}

/// Hands each partition's lane its records (in their original order) and answers with one
/// delivery per record, in the order given. Shared by the `TopicActor` and the handles'
/// direct route.
///
/// The records enter the lanes when this is called, not when the future is first polled: a
/// caller's produces reach a partition in the order of its calls even when many are in
/// flight and the runtime polls their futures in another order.
pub fn append_routed(
    lanes: &[Arc<Lane>],
    batch: RecordBatch,
    routes: Routes,
) -> impl std::future::Future<Output = Result<Vec<Delivery>>> + 'static {
    let total = batch.len();
    let send = |p: u32, batch: RecordBatch| {
        let answer = lanes[p as usize].produce(batch);
        // A lane answers every produce; a dropped answer means the lane went with the broker.
        async move { answer.await.unwrap_or(Err(Error::BrokerStopped)) }
    };
    match routes.simplified() {
        // The common case (a pinned batch, a single record, a one-partition topic): the batch
        // goes as it is.
        Routes::All(p) => {
            let answer = send(p, batch);
            Either::Left(async move {
                let base = answer.await?.base_offset;
                Ok((0..total as u64)
                    .map(|k| Delivery {
                        partition: p,
                        offset: base + k,
                    })
                    .collect())
            })
        }
        Routes::Each(each) => {
            let answers: Vec<_> = batch
                .split(&each)
                .into_iter()
                .map(|(p, part, indexes)| {
                    let answer = send(p, part);
                    async move { (p, indexes, answer.await) }
                })
                .collect();
            Either::Right(async move {
                let placeholder = Delivery {
                    partition: 0,
                    offset: 0,
                };
                let mut deliveries = vec![placeholder; total];
                for (partition, indexes, result) in join_all(answers).await {
                    let base = result?.base_offset;
                    for (k, i) in indexes.into_iter().enumerate() {
                        deliveries[i] = Delivery {
                            partition,
                            offset: base + k as u64,
                        };
                    }
                }
                Ok(deliveries)
            })
        }
    }
}
