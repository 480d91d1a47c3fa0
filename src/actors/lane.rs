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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use actix::{Message, Recipient};
use futures::channel::oneshot;

use futures::future::Either;
use futures::FutureExt;

use super::io_thread::Doorbell;
use crate::error::{Error, Result};
use crate::routing::Routes;
use crate::storage::{AppendInfo, RecordBatch};
use crate::types::Delivery;
use crate::wait::EarlyWake;

/// A queue this large (on disk) is sent as another `Append` in flight rather than grown: the
/// group commit writes at most about this much at once.
const MAX_QUEUED_BYTES: usize = 1 << 20;

/// A batch this large (on disk) fills a write by itself: while nothing waits in the queue it
/// goes at once as another `Append` in flight instead of being copied into the queue (the
/// partition's group commit does not merge batches past this size either).
const ALONE_BYTES: usize = 64 << 10;

/// The largest buffer a busy lane keeps for its next queue: the most a queue grows to
/// ([`MAX_QUEUED_BYTES`], with the room doubling leaves). A larger batch (one sent alone) is
/// freed once written.
const SPARE_MAX_BYTES: usize = 2 * MAX_QUEUED_BYTES;

/// The largest buffers a lane keeps once nothing of it is in flight: a partition that went
/// quiet holds no memory of a burst.
const IDLE_SPARE_BYTES: usize = 4 << 10;

/// Append records. Sent with `do_send` by a [`Lane`] (the topic's and the handles'
/// produces all go through one per partition); the answer goes to `reply`: where they went,
/// once in the OS. Errors: `PartitionFull`, `Timeout`, `RecordTooLarge`, `PartitionFailed`,
/// `Io` (the actor then restarts). A reply dropped unanswered (a restart, the broker stopping)
/// answers `PartitionRestarted` or `BrokerStopped` by itself.
///
/// The reply travels in the message rather than through actix's response channel: a produce
/// may wait (group commit, `Block` backpressure), and answering through our own reply spares
/// a spawned response future and a second channel per produce.
///
/// The partition offers it to its `ProduceQueue`: it joins the group commit and is answered
/// by the flush, or parks under `Backpressure::Block` and is answered by a later flush, by
/// its block-timeout timer (`Timeout`, nothing written) or by a restart. With the answer the
/// partition gives the written buffer back (`AppendAnswer::answer_giving_back`), and the lane
/// builds its next queue in it. A partition deleted meanwhile answers `UnknownTopic` (an
/// `Append` from a stale lane).
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

/// The early wake-ups of the blocking long polls parked at one partition
/// (`WaitForData::early_wake`). The partition lists them as polls park there and clears the
/// list once it has answered them; its lane fires them as it sends an `Append`, and the
/// partition again as the `Append` arrives (for appends that come another way, and for a
/// poll that parked in between). Each fires once. A poll whose wait ended unanswered (its
/// deadline) stays listed until the next poll parks or a write answers the waiters; firing
/// it then only wakes its thread spuriously, which its waits tolerate.
///
/// Why the lane: at a trickle, the partition's thread and a caught-up consumer's both sleep
/// between records, and waking a sleeping thread takes tens of microseconds on a virtual
/// machine. Fired by the partition, the consumer's wake-up began only once the partition's
/// had ended; fired by the producer, the two pass at once, and the consumer spins the rest
/// of the way to its answer (`wait::block_on_with`).
#[derive(Debug, Default)]
pub struct ParkedPolls {
    /// The list holds wake-ups not fired yet: a produce checks this, not the lock.
    armed: AtomicBool,
    listed: Mutex<Vec<EarlyWake>>,
}

impl ParkedPolls {
    fn listed(&self) -> MutexGuard<'_, Vec<EarlyWake>> {
        self.listed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lists `wakes`, those of the polls parked now, in place of the earlier list.
    pub fn list(&self, wakes: impl IntoIterator<Item = EarlyWake>) {
        let mut listed = self.listed();
        listed.clear();
        listed.extend(wakes);
        self.armed.store(!listed.is_empty(), Ordering::Release);
    }

    /// Fires the listed wake-ups (those fired before stay spent). With none armed, a load
    /// and nothing else: every `Append` calls this, and a read-modify-write would take the
    /// cache line from the partition's thread each time.
    pub fn fire(&self) {
        if self.armed.load(Ordering::Acquire) && self.armed.swap(false, Ordering::AcqRel) {
            self.listed().iter().for_each(EarlyWake::fire);
        }
    }
}

/// One partition's produce lane; see the module docs. Shared by the topic and the handles.
#[derive(Debug)]
pub struct Lane {
    topic: Arc<str>,
    partition: u32,
    /// The partition's actor, and its I/O thread's doorbell, rung after each `Append`.
    addr: Recipient<Append>,
    doorbell: Arc<Doorbell>,
    /// The long polls parked at the partition, woken as an `Append` goes.
    parked: Arc<ParkedPolls>,
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
    /// An answered `Append`'s batch and waiters' list, emptied and given back: the next queue
    /// is built in them. So a lane's buffers go round between the caller's thread and the
    /// partition's instead of being allocated on one and freed on the other, which with
    /// glibc's per-thread arenas makes each free lock the other thread's arena (and wait
    /// for it while that thread allocates).
    spare: Option<RecordBatch>,
    spare_waiters: Vec<Waiter>,
}

impl LaneState {
    /// Takes what is queued (to send it). The next queue is `next` when given, else empty, in
    /// the spare buffers.
    fn take_queue(
        &mut self,
        next: Option<RecordBatch>,
    ) -> (RecordBatch, Vec<Waiter>, Option<Instant>) {
        let next = next.or_else(|| self.spare.take()).unwrap_or_default();
        let batch = std::mem::replace(&mut self.queued, next);
        let waiters = std::mem::replace(&mut self.waiters, std::mem::take(&mut self.spare_waiters));
        self.last_queue_bytes = batch.size_bytes();
        (batch, waiters, self.queued_since.take())
    }

    /// Keeps an answered `Append`'s buffers for the next queue (one of each is enough, up to
    /// [`SPARE_MAX_BYTES`]).
    fn keep_spares(&mut self, spent: Option<RecordBatch>, mut waiters: Vec<Waiter>) {
        if let Some(mut spent) = spent.filter(|b| b.capacity() <= SPARE_MAX_BYTES) {
            spent.clear();
            self.spare.get_or_insert(spent);
        }
        if self.spare_waiters.capacity() == 0 {
            waiters.clear();
            self.spare_waiters = waiters;
        }
    }

    /// Nothing of the lane is in flight: only small buffers are kept ([`IDLE_SPARE_BYTES`]).
    fn trim_idle(&mut self) {
        let large = |bytes: usize| bytes > IDLE_SPARE_BYTES;
        if self.spare.as_ref().is_some_and(|b| large(b.capacity())) {
            self.spare = None;
        }
        if large(self.queued.capacity()) {
            self.queued = RecordBatch::default();
        }
        if large(self.spare_waiters.capacity() * std::mem::size_of::<Waiter>()) {
            self.spare_waiters = Vec::new();
        }
    }
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
        parked: Arc<ParkedPolls>,
    ) -> Self {
        Lane {
            topic,
            partition,
            addr,
            doorbell,
            parked,
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
            let (full, waiters, since) = state.take_queue(Some(batch));
            state.queued_since = Some(Instant::now());
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
    /// partition's thread, then wakes the long polls parked there (see [`ParkedPolls`]).
    /// Never called with the state locked: a failed send answers (and so locks) at once.
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
        self.parked.fire();
    }

    /// An `Append` of this lane was answered: each of its produces gets its offsets (or the
    /// error), then what queued meanwhile goes. `spent`: the `Append`'s batch, written and
    /// given back.
    fn answered(
        self: &Arc<Self>,
        mut waiters: Vec<Waiter>,
        result: Result<AppendInfo>,
        spent: Option<RecordBatch>,
    ) {
        let mut next = result.as_ref().map_or(0, |info| info.base_offset);
        for waiter in waiters.drain(..) {
            let own = result.clone().map(|info| AppendInfo {
                base_offset: next,
                count: waiter.count,
                timestamp_ms: info.timestamp_ms,
            });
            next += waiter.count;
            let _ = waiter.reply.send(own);
        }
        let mut state = self.state();
        state.keep_spares(spent, waiters);
        if state.waiters.is_empty() {
            state.in_flight -= 1;
            if state.in_flight == 0 {
                state.trim_idle();
            }
            return;
        }
        let (batch, waiters, since) = state.take_queue(None);
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
        self.finish(result, None);
    }

    fn finish(&mut self, result: Result<AppendInfo>, spent: Option<RecordBatch>) {
        if let Some(waiters) = self.waiters.take() {
            self.lane.answered(waiters, result, spent);
        }
    }
}

impl crate::produce_queue::AppendAnswer for AppendReply {
    fn answer(self, result: Result<AppendInfo>) {
        self.send(result);
    }

    fn answer_giving_back(mut self, result: Result<AppendInfo>, spent: RecordBatch) {
        self.finish(result, Some(spent));
    }
}

impl Drop for AppendReply {
    fn drop(&mut self) {
        if self.waiters.is_some() {
            let error = self.lane.dropped();
            self.finish(Err(error), None);
        }
    }
}

/// Where a produce's records went: one run of offsets in one partition (a pinned batch, a
/// single record, a one-partition topic: nothing allocated for it), or one delivery per
/// record, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    Run {
        partition: u32,
        base_offset: u64,
        count: u64,
    },
    Each(Vec<Delivery>),
}

impl Placed {
    /// One delivery per record, in the order given.
    pub fn into_deliveries(self) -> Vec<Delivery> {
        match self {
            Placed::Run {
                partition,
                base_offset,
                count,
            } => (base_offset..base_offset + count)
                .map(|offset| Delivery { partition, offset })
                .collect(),
            Placed::Each(each) => each,
        }
    }

    /// The first record's delivery (`None` for a produce of no records).
    pub fn first(&self) -> Option<Delivery> {
        match self {
            Placed::Run {
                partition,
                base_offset,
                count,
            } => (*count > 0).then_some(Delivery {
                partition: *partition,
                offset: *base_offset,
            }),
            Placed::Each(each) => each.first().copied(),
        }
    }
}

/// Hands each partition's lane its records (in their original order) and answers where they
/// went. Shared by the `TopicActor` and the handles' direct route.
///
/// The records enter the lanes when this is called, not when the future is first polled: a
/// caller's produces reach a partition in the order of its calls even when many are in
/// flight and the runtime polls their futures in another order.
///
/// The common case (every record to one partition) is an `Unpin` future that allocates
/// nothing: an awaited produce need not box it.
pub fn append_routed(
    lanes: &[Arc<Lane>],
    batch: RecordBatch,
    routes: Routes,
) -> impl std::future::Future<Output = Result<Placed>> + Unpin + 'static {
    let total = batch.len() as u64;
    // A lane answers every produce; a dropped answer means the lane went with the broker.
    let answered = |answer: Result<Result<AppendInfo>, oneshot::Canceled>| {
        answer.unwrap_or(Err(Error::BrokerStopped))
    };
    match routes {
        // The batch goes as it is.
        Routes::All(p) => {
            let answer = lanes[p as usize].produce(batch);
            Either::Left(answer.map(move |answer| {
                answered(answer).map(|info| Placed::Run {
                    partition: p,
                    base_offset: info.base_offset,
                    count: total,
                })
            }))
        }
        Routes::Each(each) => {
            let answers: Vec<_> = batch
                .split(&each)
                .into_iter()
                .map(|(p, part, indexes)| (p, indexes, lanes[p as usize].produce(part)))
                .collect();
            Either::Right(Box::pin(async move {
                let placeholder = Delivery {
                    partition: 0,
                    offset: 0,
                };
                let mut deliveries = vec![placeholder; total as usize];
                // Every part is answered before the produce is: a caller that retries after
                // an error does not race parts still in flight.
                let mut failed = None;
                for (partition, indexes, answer) in answers {
                    match answered(answer.await) {
                        Ok(info) => {
                            for (k, i) in indexes.into_iter().enumerate() {
                                deliveries[i] = Delivery {
                                    partition,
                                    offset: info.base_offset + k as u64,
                                };
                            }
                        }
                        Err(e) => {
                            failed.get_or_insert(e);
                        }
                    }
                }
                match failed {
                    Some(e) => Err(e),
                    None => Ok(Placed::Each(deliveries)),
                }
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter() -> Waiter {
        Waiter {
            count: 1,
            reply: oneshot::channel().0,
        }
    }

    #[test]
    fn an_answered_appends_buffers_become_the_next_queue_emptied() {
        let mut state = LaneState::default();
        let mut spent = RecordBatch::new();
        spent.push_raw(None, &[7; 1000]);
        let (spent_buffer, spent_len) = (spent.bytes().as_ptr(), spent.size_bytes());
        let mut waiters = Vec::with_capacity(16);
        waiters.push(waiter());
        let waiters_buffer = waiters.as_ptr();
        state.keep_spares(Some(spent), waiters);

        // Records queue behind an Append in flight, and go when it is answered.
        state.queued.push_raw(None, b"queued");
        state.waiters.push(waiter());
        let (sent, sent_waiters, _) = state.take_queue(None);
        assert_eq!((sent.len(), sent_waiters.len()), (1, 1));
        assert_eq!(state.last_queue_bytes, sent.size_bytes());

        // The next queue is the spent batch's buffer and the spent waiters' list, empty.
        assert_eq!(state.queued.bytes().as_ptr(), spent_buffer);
        assert!(state.queued.is_empty() && state.queued.size_bytes() < spent_len);
        assert_eq!(state.waiters.as_ptr(), waiters_buffer);
        assert!(state.waiters.is_empty());
        assert!(state.spare.is_none() && state.spare_waiters.capacity() == 0);
    }

    #[test]
    fn a_full_queue_is_followed_by_the_batch_that_did_not_fit_and_keeps_the_spares() {
        let mut state = LaneState::default();
        let mut spent = RecordBatch::new();
        spent.push_raw(None, b"spent");
        state.keep_spares(Some(spent), Vec::with_capacity(4));
        state.queued.push_raw(None, b"full");
        state.waiters.push(waiter());
        let mut next = RecordBatch::new();
        next.push_raw(None, b"next");
        let (sent, _, _) = state.take_queue(Some(next.clone()));
        assert_eq!(sent.records().next().unwrap().value, b"full");
        assert_eq!(state.queued, next);
        assert!(state.spare.is_some(), "kept for the queue after");
    }

    #[test]
    fn a_lane_keeps_no_large_buffer_once_nothing_is_in_flight() {
        let mut state = LaneState::default();
        let batch_of = |bytes: usize| {
            let mut batch = RecordBatch::new();
            batch.push_raw(None, &vec![1; bytes]);
            batch
        };
        // A batch past the busy cap is never kept.
        state.keep_spares(Some(batch_of(SPARE_MAX_BYTES + 1)), Vec::new());
        assert!(state.spare.is_none());
        // A large one is kept while the lane is busy, and let go when it goes quiet.
        state.keep_spares(Some(batch_of(IDLE_SPARE_BYTES * 4)), Vec::new());
        assert!(state.spare.is_some());
        state.queued = batch_of(IDLE_SPARE_BYTES * 4);
        state.queued.clear();
        state.trim_idle();
        assert!(state.spare.is_none());
        assert!(state.queued.capacity() <= IDLE_SPARE_BYTES && state.queued.is_empty());
        // A small one stays for the next burst.
        state.keep_spares(Some(batch_of(100)), Vec::with_capacity(4));
        state.trim_idle();
        assert!(state.spare.is_some() && state.spare_waiters.capacity() == 4);
    }

    #[test]
    fn a_run_of_offsets_reads_as_one_delivery_per_record() {
        let run = Placed::Run {
            partition: 3,
            base_offset: 10,
            count: 3,
        };
        let at = |offset| Delivery {
            partition: 3,
            offset,
        };
        assert_eq!(run.first(), Some(at(10)));
        assert_eq!(run.into_deliveries(), vec![at(10), at(11), at(12)]);
        let none = Placed::Run {
            partition: 0,
            base_offset: 5,
            count: 0,
        };
        assert_eq!(none.first(), None);
        assert!(none.into_deliveries().is_empty());
        let each = Placed::Each(vec![at(4), at(2)]);
        assert_eq!(each.first(), Some(at(4)));
        assert_eq!(each.into_deliveries(), vec![at(4), at(2)]);
    }

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Counted(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counted() -> (Arc<Counted>, EarlyWake) {
        let count = Arc::new(Counted::default());
        (count.clone(), EarlyWake::new(count.into()))
    }

    fn wakes(count: &Counted) -> usize {
        count.0.load(Ordering::SeqCst)
    }

    #[test]
    fn parked_polls_are_each_woken_once_and_a_cleared_list_wakes_none() {
        let parked = ParkedPolls::default();
        parked.fire();
        let ((a, wake_a), (b, wake_b)) = (counted(), counted());
        parked.list([wake_a.clone(), wake_b]);
        parked.fire();
        parked.fire();
        assert_eq!((wakes(&a), wakes(&b)), (1, 1));

        // A poll that parks later is listed with the earlier ones: only it is woken.
        let (c, wake_c) = counted();
        parked.list([wake_a.clone(), wake_c]);
        parked.fire();
        assert_eq!(
            (wakes(&a), wakes(&c)),
            (1, 1),
            "a spent wake-up stays spent"
        );
        // One round's wake-up fired by another partition of the poll is spent here too.
        wake_a.fire();
        assert_eq!(wakes(&a), 1);

        // Answered: none is left to wake.
        let (d, wake_d) = counted();
        parked.list([wake_d]);
        parked.list([]);
        parked.fire();
        assert_eq!(wakes(&d), 0);
    }

    /// A partition that keeps its `Append`s unhandled, as one whose thread is still asleep.
    struct Asleep(Vec<Append>);
    impl actix::Actor for Asleep {
        type Context = actix::Context<Self>;
    }
    impl actix::Handler<Append> for Asleep {
        type Result = ();
        fn handle(&mut self, msg: Append, _: &mut Self::Context) {
            self.0.push(msg);
        }
    }

    #[test]
    fn a_produce_wakes_the_polls_parked_at_its_partition_before_the_partition_sees_it() {
        actix_rt::System::new().block_on(async {
            use actix::Actor;
            let addr = Asleep(Vec::new()).start();
            let parked = Arc::new(ParkedPolls::default());
            let doorbell = Arc::new(Doorbell::new(std::time::Duration::ZERO));
            let lane = Arc::new(Lane::new(
                "t".into(),
                0,
                addr.recipient(),
                doorbell,
                parked.clone(),
            ));
            let batch = || {
                let mut batch = RecordBatch::new();
                batch.push_raw(None, b"x");
                batch
            };
            let (poll, wake) = counted();
            parked.list([wake]);
            let _sent = lane.produce(batch());
            assert_eq!(wakes(&poll), 1, "woken as the Append went");
            // Queued behind the Append in flight: nothing goes, nobody is woken again.
            let (later, wake) = counted();
            parked.list([wake]);
            let _queued = lane.produce(batch());
            assert_eq!(wakes(&later), 0);
        });
    }
}
