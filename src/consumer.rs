//! `Consumer<T>`: a Kafka-style consumer handle beside the flat `poll` / `commit` calls.
//!
//! The flat `poll` re-delivers from the committed offset until a commit. A `Consumer`
//! instead keeps an in-memory position per partition, like Kafka's `KafkaConsumer`:
//! `poll_batch` advances it, so nothing is re-delivered inside a generation. Reading resumes
//! from the committed offsets after a rebalance (a new generation), after the member was
//! evicted or its coordinator restarted (it rejoins by itself), and a `seek` moves one
//! partition's position. Commits are fenced: one made with an older generation, or for a
//! partition the member no longer owns, is refused (`IllegalGeneration`,
//! `PartitionNotAssigned`) and changes nothing, so a consumer that lost a partition in a
//! rebalance cannot overwrite its new owner's progress. Dropping the handle leaves the group.
//! A poll that returned a full batch sends the next one at once (fetch ahead, see [`Ahead`]),
//! so that the partition reads while the caller decodes.
//!
//! On the Kafka backend the consumer is a librdkafka group member (`kafka::member`), with the
//! same calls; its generations count the assignments it received.

use std::collections::BTreeMap;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::actors::coordinator::{FetchedBatch, NextPoll};
use crate::async_handle::{AsyncNanoKafka, Engine, ValueCodec};
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions, Positions};
use crate::handle::NanoKafka;
use crate::messages::{ConsumerPoll, FencedCommit, LeaveGroup};
use crate::partition::Fetched;
use crate::types::Record;

/// A group member with its own positions. See the module docs.
#[derive(Debug)]
pub struct Consumer<T> {
    member: Member,
    payload: PhantomData<fn() -> T>,
}

/// The member behind a [`Consumer`], by backend: each method is one `match` on it.
#[derive(Debug)]
enum Member {
    Embedded(EmbeddedMember),
    /// A librdkafka group member, which keeps its own positions.
    #[cfg(feature = "kafka")]
    Kafka(crate::kafka::consumer_member::KafkaConsumer),
}

/// A member of the embedded broker's group, with the positions it keeps itself.
#[derive(Debug)]
struct EmbeddedMember {
    broker: NanoKafka,
    /// Who the member is, its assignment and positions.
    membership: Membership,
    /// The next poll, sent while the caller decodes and handles the last batch.
    ahead: Option<Ahead>,
    /// The values' format (MessagePack, unless the topic is bound to a schema).
    codec: ValueCodec,
}

/// A poll a [`Consumer`] sent before its caller asked for it: right after a poll returned
/// as many records as it asked for (a backlog), from the positions after them, so that the
/// partition reads the next batch while the caller decodes and handles this one (a Kafka
/// consumer's fetch ahead).
///
/// Its answer serves the next [`Consumer::poll_batch`] only if nothing it assumed moved:
/// - the member's generation and positions are still those it was sent from (a `seek`, a
///   commit past the position, a heartbeat that saw a rebalance all change them);
/// - the call takes at least as many records, and either the answer has records or the call
///   would not wait (an empty answer does not stand in for a wait);
/// - the group has not rebalanced since the answer was made (the coordinator's generation,
///   read from the answer's [`FetchedBatch::generation_now`] without asking): records of a
///   partition the member has lost since are never handed out, however late the call comes.
///
/// Otherwise the answer is dropped (the poll moved no offset, so nothing is lost) and the
/// call polls as it would have without it.
struct Ahead {
    /// The answer on its way (a `Mutex` only so that a `Consumer` stays `Sync`).
    reply: Mutex<Pin<Box<dyn Future<Output = Result<Polled>> + Send>>>,
    basis: PollBasis,
    max_records: usize,
}

impl std::fmt::Debug for Ahead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ahead")
            .field("basis", &self.basis)
            .field("max_records", &self.max_records)
            .finish_non_exhaustive()
    }
}

impl Ahead {
    /// Sends `request` now; its answer is awaited later.
    fn send(broker: &NanoKafka, request: PollRequest, codec: &ValueCodec) -> Self {
        let basis = request.basis();
        let max_records = request.poll.max_records;
        let handle = broker.async_handle();
        let codec = codec.clone();
        let mut reply: Pin<Box<dyn Future<Output = Result<Polled>> + Send>> =
            Box::pin(async move { poll_prepared(&handle, request, &codec).await });
        // The first poll of the future sends the request; a later `block_on` registers its
        // own waker and finds the answer there.
        if let Poll::Ready(answer) = reply.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            reply = Box::pin(std::future::ready(answer));
        }
        Ahead {
            reply: Mutex::new(reply),
            basis,
            max_records,
        }
    }

    /// Whether a call for `max_records` from `membership` may take this answer (the checks
    /// made before waiting for it; see [`Ahead`]).
    fn fits(&self, membership: &Membership, max_records: usize) -> bool {
        max_records >= self.max_records && membership.reads_from(&self.basis)
    }
}

/// A member of a group on the embedded broker that keeps its own positions: who it is, its
/// assignment, and where it reads next. The state [`Consumer`] and the async
/// `RecordStream` share; each drives it with its own kind of waiting (a blocked thread, a
/// polled future), through [`poll_rejoining`] and the requests built here.
#[derive(Debug)]
pub(crate) struct Membership {
    pub(crate) topic: String,
    pub(crate) group: String,
    pub(crate) member: String,
    options: GroupOptions,
    assignment: Assignment,
    /// The next offset to read per partition read in this generation.
    positions: Positions,
}

/// What one poll of a [`Membership`] sends: the poll, and how to join again if the member
/// was evicted. Owned, so that the poll can run in a `'static` future.
#[derive(Debug, Clone)]
pub(crate) struct PollRequest {
    poll: ConsumerPoll,
    options: GroupOptions,
    /// The member is caught up: the poll waits at its partitions before it fetches any
    /// (`PollPause::wait_first`).
    wait_first: bool,
    /// The answer may carry the member's next poll, sent already (`Chain`).
    chain: bool,
}

/// Where a poll reads from: the generation and positions of the member it was made for. A
/// poll sent ahead serves only a member that still reads from there (see [`Ahead`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PollBasis {
    generation: u64,
    positions: BTreeMap<u32, u64>,
}

impl PollRequest {
    /// This poll, waiting at the member's partitions before it fetches when `caught_up` (the
    /// member's last poll found no backlog; see `PollPause::wait_first`).
    pub(crate) fn waiting_first(mut self, caught_up: bool) -> Self {
        self.wait_first = caught_up;
        self
    }

    /// This poll, asking the coordinator to send the member's next poll with its answer
    /// when it finds no backlog (see `Chain`: a reader on another thread than its group's
    /// saves a wake-up of that thread per poll at low rates).
    pub(crate) fn chained(mut self) -> Self {
        self.chain = true;
        self
    }

    pub(crate) fn basis(&self) -> PollBasis {
        PollBasis {
            generation: self.poll.generation,
            positions: self.poll.positions.clone(),
        }
    }
}

/// The answer to a [`PollRequest`]: the batch, and the assignment of the join in between
/// when the member had to join again.
#[derive(Debug)]
pub(crate) struct Polled {
    rejoined: Option<Assignment>,
    batch: FetchedBatch,
}

impl Polled {
    /// The group rebalanced since this answer was made (read from the answer, without
    /// asking): an answer waited on later must not hand out its records. A rejoin's answer
    /// is never stale: it carries the new assignment.
    pub(crate) fn is_stale(&self) -> bool {
        let batch = &self.batch;
        self.rejoined.is_none()
            && batch.generation_now.load(Ordering::Acquire) != batch.assignment.generation
    }

    /// The member's next poll, when the coordinator sent it with this answer.
    pub(crate) fn take_next(&mut self) -> Option<Box<NextPoll>> {
        self.batch.next.take()
    }
}

impl Membership {
    /// A member that just joined with `assignment`.
    pub(crate) fn new(
        (topic, group, member): (&str, &str, &str),
        options: GroupOptions,
        assignment: Assignment,
    ) -> Self {
        Membership {
            topic: topic.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
            options,
            positions: Positions::new(assignment.generation),
            assignment,
        }
    }

    pub(crate) fn assignment(&self) -> &Assignment {
        &self.assignment
    }

    pub(crate) fn generation(&self) -> u64 {
        self.assignment.generation
    }

    /// Whether a poll made from `basis` reads from where this member is now.
    pub(crate) fn reads_from(&self, basis: &PollBasis) -> bool {
        self.positions.generation() == basis.generation && self.positions.all() == &basis.positions
    }

    pub(crate) fn position(&self, partition: u32) -> Option<u64> {
        self.positions.get(partition)
    }

    /// The next poll: up to `max_records` from the positions, waiting up to `timeout`.
    pub(crate) fn poll_request(&self, max_records: usize, timeout: Duration) -> PollRequest {
        PollRequest {
            poll: ConsumerPoll {
                topic: self.topic.clone(),
                group: self.group.clone(),
                member: self.member.clone(),
                generation: self.positions.generation(),
                positions: self.positions.all().clone(),
                max_records,
                wait: (!timeout.is_zero()).then_some(timeout),
            },
            options: self.options,
            wait_first: false,
            chain: false,
        }
    }

    /// The poll this member would send now, when `next` (sent by the coordinator) reads
    /// from where the member is: the caller then awaits `next` in its place
    /// ([`poll_chained`]).
    pub(crate) fn chained_request(
        &self,
        next: &NextPoll,
        max_records: usize,
        timeout: Duration,
    ) -> Option<PollRequest> {
        let same = self.positions.generation() == next.generation
            && self.positions.all() == &next.positions;
        same.then(|| {
            self.poll_request(max_records, timeout)
                .waiting_first(true)
                .chained()
        })
    }

    /// The poll after `fetched` is delivered whole: from the positions after its last record,
    /// waiting up to `wait`.
    pub(crate) fn poll_after(
        &self,
        fetched: &Fetched,
        max_records: usize,
        wait: Duration,
    ) -> Option<PollRequest> {
        let last = fetched.records.last_offset()?;
        let mut request = self.poll_request(max_records, wait);
        request
            .poll
            .positions
            .insert(fetched.partition, last.saturating_add(1));
        Some(request)
    }

    /// Takes in a poll's answer: after a rejoin the positions start over; a new generation
    /// drops them (reading resumes at the committed offsets). Returns the records read; the
    /// caller reports with [`Membership::delivered`] how far it took them.
    pub(crate) fn polled(&mut self, polled: Polled) -> Option<Fetched> {
        if let Some(assignment) = polled.rejoined {
            self.positions = Positions::new(assignment.generation);
        }
        self.positions.enter(polled.batch.assignment.generation);
        self.assignment = polled.batch.assignment;
        polled.batch.fetched
    }

    /// Records up to `last_offset` of `partition` were taken: read on after it.
    pub(crate) fn delivered(&mut self, partition: u32, last_offset: u64) {
        self.positions.delivered(partition, last_offset);
    }

    /// The commit of `offset` of `partition`, fenced by `generation`.
    pub(crate) fn commit_request(
        &self,
        generation: u64,
        partition: u32,
        offset: u64,
    ) -> FencedCommit {
        FencedCommit {
            topic: self.topic.clone(),
            group: self.group.clone(),
            member: self.member.clone(),
            generation,
            partition,
            offset,
        }
    }

    /// `offset` of `partition` was committed: never read below it again.
    pub(crate) fn committed(&mut self, partition: u32, offset: u64) {
        self.positions.committed(partition, offset);
    }

    /// Moves the position of `partition` to `offset`.
    ///
    /// # Errors
    /// `PartitionNotAssigned` when the partition is not in the current assignment.
    pub(crate) fn seek(&mut self, partition: u32, offset: u64) -> Result<()> {
        if !self.assignment.partitions.contains(&partition) {
            return Err(Error::PartitionNotAssigned {
                topic: self.topic.clone(),
                group: self.group.clone(),
                member: self.member.clone(),
                partition,
                generation: self.assignment.generation,
            });
        }
        self.positions.seek(partition, offset);
        Ok(())
    }

    /// A heartbeat's answer (positions are dropped on a new generation).
    pub(crate) fn heartbeat_answered(&mut self, assignment: Assignment) {
        self.positions.enter(assignment.generation);
        self.assignment = assignment;
    }

    /// The leave this member sends when it is dropped (the names are taken: call it last).
    pub(crate) fn take_leave(&mut self) -> LeaveGroup {
        LeaveGroup {
            topic: std::mem::take(&mut self.topic),
            group: std::mem::take(&mut self.group),
            member: std::mem::take(&mut self.member),
        }
    }
}

/// Sends `request`; when the member was evicted, or its coordinator restarted
/// (`UnknownMember`), joins again and polls once more from the committed offsets.
///
/// # Errors
/// As [`ConsumerPoll`] and [`JoinGroup`](crate::messages::JoinGroup).
pub(crate) async fn poll_rejoining(
    handle: &AsyncNanoKafka,
    request: PollRequest,
) -> Result<Polled> {
    let PollRequest {
        poll,
        options,
        wait_first,
        chain,
    } = request;
    // Boxed on its own: see `poll_prepared`.
    let polled = Box::pin(handle.consumer_poll_waiting(poll.clone(), (wait_first, chain)));
    match polled.await {
        Err(Error::UnknownMember { .. }) => {}
        other => {
            return other.map(|batch| Polled {
                rejoined: None,
                batch,
            })
        }
    }
    // Boxed: the polls that need no join do not carry its state in theirs.
    Box::pin(rejoin(handle, poll, options)).await
}

/// The rest of [`poll_rejoining`] for a member the group forgot: joins again and polls once
/// more, from the committed offsets.
async fn rejoin(
    handle: &AsyncNanoKafka,
    mut poll: ConsumerPoll,
    options: GroupOptions,
) -> Result<Polled> {
    let assignment = handle
        .join_group_with(&poll.topic, &poll.group, &poll.member, options)
        .await?;
    poll.generation = assignment.generation;
    poll.positions.clear();
    let batch = handle.consumer_poll_fetched(poll).await?;
    Ok(Polled {
        rejoined: Some(assignment),
        batch,
    })
}

/// [`poll_rejoining`], then `codec` made ready to decode what it read (the writer schemas
/// of a topic bound to a schema).
///
/// **Its future stays under 1 KiB**: the poll itself is boxed apart, and so are the paths
/// rarely taken (the join after an eviction, the first poll through the broker, a schema
/// lookup). A reader boxes it for every poll, and glibc's `malloc` merges every small chunk
/// freed so far (the values of the batch the caller just dropped) before it serves a
/// request of 1 KiB or more. The next batch's values were then carved one by one out of the
/// merged memory instead of taken back from the freed ones: a `RecordStream<String>` of
/// 100-byte values ran 1,100 instructions per record under callgrind (each of a batch's
/// 1,000 mallocs 270, the merge 70,000), and 916 once the future was 792 bytes, not 1,728.
///
/// # Errors
/// As [`poll_rejoining`].
pub(crate) async fn poll_prepared(
    handle: &AsyncNanoKafka,
    request: PollRequest,
    codec: &ValueCodec,
) -> Result<Polled> {
    let polled = poll_rejoining(handle, request).await?;
    codec.prepare(polled.batch.fetched.as_ref()).await;
    Ok(polled)
}

/// [`poll_prepared`] for a member whose next poll the coordinator sent already (`next`,
/// for `request`, which [`Membership::chained_request`] made): its answer is awaited
/// instead of sending one. Should the coordinator be gone, or the member have been
/// forgotten meanwhile, `request` is sent as usual (and joins again).
///
/// # Errors
/// As [`poll_rejoining`].
pub(crate) async fn poll_chained(
    handle: &AsyncNanoKafka,
    request: PollRequest,
    next: Box<NextPoll>,
    codec: &ValueCodec,
) -> Result<Polled> {
    // Boxed on its own, as the poll in `poll_prepared` is: this future stays under 1 KiB.
    let polled = Box::pin(chained_answer(handle, request, next)).await?;
    codec.prepare(polled.batch.fetched.as_ref()).await;
    Ok(polled)
}

/// The answer of `next`, or of `request` sent as usual (see [`poll_chained`]).
async fn chained_answer(
    handle: &AsyncNanoKafka,
    request: PollRequest,
    next: Box<NextPoll>,
) -> Result<Polled> {
    next.taken.store(true, Ordering::Release);
    match next.reply.await {
        Ok(Err(Error::UnknownMember { .. })) | Err(_) => {
            // Boxed: the answers that need no new poll do not carry its state.
            Box::pin(poll_rejoining(handle, request)).await
        }
        Ok(batch) => Ok(Polled {
            rejoined: None,
            batch: batch?,
        }),
    }
}

impl NanoKafka {
    /// Joins `group` as `member` and returns a [`Consumer`] of `T` payloads.
    /// The payload type the topic records is not checked here (any `T` may read it):
    /// [`crate::BlockingTopic::consumer`] is the checked way.
    ///
    /// # Errors
    /// As [`NanoKafka::join_group`].
    pub fn consumer<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
    ) -> Result<Consumer<T>> {
        self.consumer_with(topic, group, member, GroupOptions::default())
    }

    /// As [`NanoKafka::consumer`], with the group's options (assignor, start position).
    ///
    /// # Errors
    /// As [`NanoKafka::join_group_with`].
    pub fn consumer_with<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        options: impl Into<GroupOptions>,
    ) -> Result<Consumer<T>> {
        let options = options.into();
        let names = (topic, group, member);
        let member = match self.async_handle().engine()? {
            Engine::Embedded(_) => Member::Embedded(EmbeddedMember {
                broker: self.clone(),
                membership: Membership::new(
                    names,
                    options,
                    self.join_group_with(topic, group, member, options)?,
                ),
                ahead: None,
                codec: ValueCodec::MessagePack,
            }),
            #[cfg(feature = "kafka")]
            Engine::Kafka(backend) => Member::Kafka(
                crate::kafka::consumer_member::KafkaConsumer::join(backend, names, options)?,
            ),
        };
        Ok(Consumer {
            member,
            payload: PhantomData,
        })
    }
}

impl<T> Consumer<T> {
    /// The same consumer, reading values in `codec`'s format (a topic bound to a schema,
    /// which only the embedded broker has).
    pub(crate) fn with_codec(mut self, codec: ValueCodec) -> Self {
        match &mut self.member {
            Member::Embedded(m) => m.codec = codec,
            #[cfg(feature = "kafka")]
            Member::Kafka(_) => {}
        }
        self
    }
}

impl<T: DeserializeOwned> Consumer<T> {
    /// The member's assignment as of its last poll, heartbeat or join.
    pub fn assignment(&self) -> &Assignment {
        match &self.member {
            Member::Embedded(m) => m.membership.assignment(),
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => k.assignment(),
        }
    }

    /// The next offset this consumer reads in `partition`, if it has read there in this
    /// generation (otherwise it reads from the committed offset).
    pub fn position(&self, partition: u32) -> Option<u64> {
        match &self.member {
            Member::Embedded(m) => m.membership.position(partition),
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => k.position(partition),
        }
    }

    /// Up to `max_records` consecutive records of one assigned partition from this
    /// consumer's position, waiting up to `timeout` for the first. Advances the position.
    ///
    /// # Errors
    /// As [`NanoKafka::poll_batch`]; on `Decode` the position stays before the bad record
    /// (commit it with [`Consumer::commit_offset`] to skip it).
    pub fn poll_batch(&mut self, max_records: usize, timeout: Duration) -> Result<Vec<Record<T>>> {
        match &mut self.member {
            Member::Embedded(m) => m.poll_batch(max_records, timeout),
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => k.poll_batch(max_records, timeout),
        }
    }

    /// Commits `record` and everything before it in its partition, fenced by this
    /// consumer's generation.
    ///
    /// # Errors
    /// `IllegalGeneration` (the group rebalanced: poll again and re-process from the
    /// committed offset), `PartitionNotAssigned`, `UnknownMember`, `OffsetOutOfRange`, `Io`.
    pub fn commit(&mut self, record: &Record<T>) -> Result<()> {
        self.commit_offset(record.partition, record.offset)
    }

    /// Commits `offset` of `partition`, fenced by this consumer's generation.
    ///
    /// # Errors
    /// As [`Consumer::commit`].
    pub fn commit_offset(&mut self, partition: u32, offset: u64) -> Result<()> {
        match &mut self.member {
            Member::Embedded(m) => m.commit_offset(partition, offset),
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => k.commit_offset(partition, offset),
        }
    }

    /// Moves this consumer's position in `partition` to `offset` (the next record read).
    /// Positions belong to a generation: if the group rebalanced since this consumer last
    /// polled or sent a heartbeat, its next poll drops them, this seek included, and reads
    /// from the committed offsets (Kafka's eager rebalance). A position past the log end makes
    /// polls fail with `OffsetOutOfRange` until the consumer seeks back.
    ///
    /// # Errors
    /// `PartitionNotAssigned` when the partition is not in the current assignment.
    pub fn seek(&mut self, partition: u32, offset: u64) -> Result<()> {
        match &mut self.member {
            Member::Embedded(m) => m.membership.seek(partition, offset),
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => k.seek(partition, offset),
        }
    }

    /// A sign of life; refreshes the assignment (positions are dropped on a new generation).
    ///
    /// # Errors
    /// `UnknownMember` when evicted (the next poll rejoins).
    pub fn heartbeat(&mut self) -> Result<&Assignment> {
        match &mut self.member {
            Member::Embedded(m) => m.heartbeat(),
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => k.heartbeat(),
        }
    }
}

impl EmbeddedMember {
    fn poll_batch<T: DeserializeOwned>(
        &mut self,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<T>>> {
        let polled = match self.take_ahead(max_records, timeout) {
            Some(polled) => polled,
            None => {
                let request = self.membership.poll_request(max_records, timeout);
                let codec = &self.codec;
                self.broker
                    .call_async(|h| poll_prepared(h, request, codec), timeout)?
            }
        };
        let Some(fetched) = self.membership.polled(polled) else {
            return Ok(Vec::new());
        };
        // A full batch says there is more to read; after a short one (the consumer caught
        // up) the poll sent ahead would most likely find nothing.
        if fetched.records.len() >= max_records {
            if let Some(next) = self
                .membership
                .poll_after(&fetched, max_records, Duration::ZERO)
            {
                self.ahead = Some(Ahead::send(&self.broker, next, &self.codec));
            }
        }
        // Decoded straight from the read buffer, on this thread, while the next batch is read.
        let mut records = Vec::with_capacity(fetched.records.len());
        (self.codec)
            .decode_each(&fetched, &self.membership.topic, |r| records.push(r))
            .inspect_err(|_| self.ahead = None)?;
        if let Some(last) = records.last() {
            self.membership.delivered(last.partition, last.offset);
        }
        Ok(records)
    }

    /// The answer of the poll sent ahead, when it may serve this call (see [`Ahead`]);
    /// `None` when there was none or it may not (then it is dropped).
    fn take_ahead(&mut self, max_records: usize, timeout: Duration) -> Option<Polled> {
        let ahead = self.ahead.take()?;
        if !ahead.fits(&self.membership, max_records) {
            return None;
        }
        let reply = ahead.reply.into_inner().unwrap_or_else(|e| e.into_inner());
        // Its own errors are not this call's: the call then polls afresh and reports its own.
        let polled = self.broker.call_async(|_| reply, Duration::ZERO).ok()?;
        let batch = &polled.batch;
        let current = batch.generation_now.load(Ordering::Acquire) == batch.assignment.generation;
        let has_records = batch.fetched.as_ref().is_some_and(|f| !f.is_empty());
        (current && (has_records || timeout.is_zero())).then_some(polled)
    }

    fn commit_offset(&mut self, partition: u32, offset: u64) -> Result<()> {
        let generation = self.membership.generation();
        let commit = self
            .membership
            .commit_request(generation, partition, offset);
        self.broker
            .call_async(|h| h.fenced_commit(commit), Duration::ZERO)?;
        self.membership.committed(partition, offset);
        Ok(())
    }

    fn heartbeat(&mut self) -> Result<&Assignment> {
        let m = &self.membership;
        let assignment = self.broker.heartbeat(&m.topic, &m.group, &m.member)?;
        self.membership.heartbeat_answered(assignment);
        Ok(self.membership.assignment())
    }
}

impl Drop for EmbeddedMember {
    /// Leaves the group, so its partitions go to the other members at once instead of after
    /// the session timeout.
    /// Dropped on an actix/tokio thread, where it must not block, it sends the leave without
    /// waiting for the answer (it is still handled before any later request of this thread).
    fn drop(&mut self) {
        let m = &self.membership;
        let left = self.broker.leave_group(&m.topic, &m.group, &m.member);
        if let Err(Error::BlockingInActorContext) = left {
            if let Ok(addr) = self.broker.addr() {
                addr.do_send(self.membership.take_leave());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of what `make` returns, without calling it.
    fn size_of_return<T>(_: impl FnOnce() -> T) -> usize {
        std::mem::size_of::<T>()
    }

    /// See `poll_prepared`: a reader boxes one of these per poll, and from 1 KiB on glibc's
    /// `malloc` merges the chunks the caller just freed first (the last batch's values).
    #[test]
    #[allow(unreachable_code, clippy::diverging_sub_expression)]
    fn a_polls_future_stays_under_1_kib() {
        let prepared =
            size_of_return(|| poll_prepared(unreachable!(), unreachable!(), unreachable!()));
        let chained = size_of_return(|| {
            poll_chained(
                unreachable!(),
                unreachable!(),
                unreachable!(),
                unreachable!(),
            )
        });
        assert!(prepared < 1024, "poll_prepared's future: {prepared} bytes");
        assert!(chained < 1024, "poll_chained's future: {chained} bytes");
    }
}
