//! [`RecordStream`]: a consumer group member as a `futures::Stream`, the async twin of
//! [`crate::Consumer`], built on the member state the consumer module shares (embedded) or a
//! librdkafka member (`kafka`, the Kafka backend). The rules
//! (polling, rebalances, commits, decode errors, leaving) are documented on
//! [`RecordStream`], where rustdoc shows them.

mod committer;

use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, Stream};
use serde::de::DeserializeOwned;

use crate::actors::coordinator::NextPoll;
use crate::async_handle::{AsyncNanoKafka, Engine, ValueCodec};
use crate::consumer::{poll_chained, poll_prepared, Membership, PollBasis, PollRequest, Polled};
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions};
use crate::types::Record;
pub use committer::StreamCommitter;
use committer::{CommitTarget, EmbeddedTarget, Shared, GENERATIONS_REMEMBERED};

/// How a [`RecordStream`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamOptions {
    /// The group's options, as for a join (the first member's are the group's).
    pub group: GroupOptions,
    /// Records per poll at most (default 100): how many the stream buffers.
    pub max_batch: usize,
    /// How long one poll waits for data (default 1 s). The poll is the member's sign of
    /// life too, so keep it well below the session timeout.
    pub poll_wait: Duration,
    /// How long a [`StreamCommitter`]'s commit may wait to be sent, coalesced with later
    /// ones (default 5 s, Kafka's `auto.commit.interval.ms`; zero sends at the stream's
    /// next turn; `Duration::MAX`, only on a flush, leave, drop or rebalance).
    /// [`RecordStream::commit`] is sent at once.
    pub commit_interval: Duration,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            group: GroupOptions::default(),
            max_batch: 100,
            poll_wait: Duration::from_secs(1),
            commit_interval: Duration::from_secs(5),
        }
    }
}

impl StreamOptions {
    /// Checks the options a stream cannot work with.
    ///
    /// # Errors
    /// `InvalidArgument` for a zero `max_batch` or `poll_wait` (a zero wait would poll in a
    /// busy loop).
    pub fn validate(&self) -> Result<()> {
        let zero = [
            ("max_batch", self.max_batch == 0),
            ("poll_wait", self.poll_wait.is_zero()),
        ];
        match zero.iter().find(|(_, zero)| *zero) {
            Some(&(name, _)) => Err(Error::InvalidArgument {
                name,
                reason: format!("a stream needs it above zero, got {self:?}"),
            }),
            None => Ok(()),
        }
    }
}

/// A consumer group member as a [`futures::Stream`] of typed records, for async code that
/// wants `while let Some(record) = stream.next().await` rather than an actor subscription
/// or a poll loop. Obtain one from [`crate::Topic::stream`] or [`AsyncNanoKafka::stream`].
/// `Unpin`, and `Send` when `T` is.
///
/// It is the async twin of [`crate::Consumer`]: it keeps its own position per partition,
/// so nothing is yielded twice inside a generation, and it commits only when told to.
///
/// * **Polling.** When its buffer is empty the stream sends one long poll (up to
///   [`StreamOptions::max_batch`] records of one partition, waiting up to
///   [`StreamOptions::poll_wait`]); an empty answer is followed by the next poll. Polls are
///   the member's sign of life: a stream that is not polled for the broker's session
///   timeout is evicted, and its next poll joins the group again and reads from the
///   committed offsets. After a batch that was not full (caught up: at a trickle, every
///   batch) the next poll waits at the partitions before it fetches any, instead of
///   fetching each in turn and finding nothing (a wait answers at once where data is, so
///   nothing is missed). After a full batch the next poll is sent at once, so that the
///   partition reads it while the caller takes this one (fetch ahead, as `Consumer` does);
///   its answer is taken once the buffer is empty (the task kept awake for it briefly, as
///   an awaited produce is), and dropped without loss (positions live
///   in the stream, not in the broker) when a seek or commit moved the positions since, or
///   when a rebalance made it stale.
/// * **Rebalances.** Records are read in a generation of the group. When a poll, or a
///   commit refused with `IllegalGeneration` or `UnknownMember`, shows that the group moved
///   on, the records still buffered are dropped, and reading resumes at the committed
///   offsets of the partitions assigned in the new generation (after sending the pending
///   commits: a partition the member keeps into the very next generation keeps them, see
///   [`StreamCommitter`]): a record not committed before a rebalance is yielded again after
///   it (by this member or the partition's new owner), never twice inside one generation.
/// * **Commits** are fenced like [`crate::Consumer::commit`]: [`RecordStream::commit`] sends
///   the generation the record was yielded in, so a record of an older generation is
///   refused (`IllegalGeneration`) and cannot overwrite the progress of the partition's new
///   owner. [`RecordStream::committer`] commits apart from the stream (a stream handed to an
///   actor's `ctx.add_stream`), coalesced: see [`StreamCommitter`].
/// * **Records that do not decode** as `T` are yielded as `Err(Error::Decode { partition,
///   offset, .. })`, and the stream moves past them, as a user iterating a stream expects
///   (a stream that stalls on its first bad record would yield the same error forever).
///   The bad record is not committed by that: a later commit of its partition covers it,
///   and if the group rebalances first it is read, and reported, again.
/// * **Other errors** are yielded as `Err` too; the next `poll_next` polls again (a
///   restarted partition, an I/O error: they repeat until their cause is gone, so a
///   caller that only logs errors should not spin on them without a pause). After an
///   error the stream cannot recover from (`BrokerStopped`, `UnknownTopic`: the topic was
///   deleted, `GroupOptionsMismatch`) it ends: `None` follows.
/// * **Leaving.** [`RecordStream::leave`] leaves the group and waits for the answer;
///   dropping the stream leaves too, without blocking (the leave is sent, not awaited), so
///   the partitions go to the other members at once instead of after the session timeout.
///
/// On the Kafka backend the member is a librdkafka group member (as a `Consumer`'s is
/// there), whose blocking calls run on tokio's blocking pool: the same rules, with its
/// generations counting the assignments it received; a commit is refused with
/// `IllegalGeneration` when the member was assigned again since the record was yielded.
/// A commit made while a poll is in flight (the stream's `next` was dropped before it
/// answered) waits for that poll there, at most `poll_wait`. [`RecordStream::seek`] is
/// `Unsupported` there.
///
/// ```no_run
/// # async fn run(bus: nanokafka::AsyncNanoKafka) -> nanokafka::Result<()> {
/// use futures::StreamExt;
///
/// let mut orders = bus.stream::<u64>("orders", "billing", "billing-1").await?;
/// while let Some(record) = orders.next().await {
///     let record = record?;
///     println!("{}/{}: {}", record.partition, record.offset, record.value);
///     orders.commit(&record).await?;
/// }
/// # Ok(())
/// # }
/// ```
#[must_use = "a stream does nothing unless polled; dropping it leaves the group"]
pub struct RecordStream<T> {
    handle: AsyncNanoKafka,
    member: Member,
    options: StreamOptions,
    /// Records read in the membership's current generation, not yet yielded, with the
    /// partition each is of (a decode error's too).
    buffer: VecDeque<(u32, Result<Record<T>>)>,
    /// The poll in flight.
    polling: Option<BoxFuture<'static, Result<Answer>>>,
    /// Where the poll in flight reads from (the embedded member's generation and positions).
    polling_from: Option<PollBasis>,
    /// The poll in flight was sent ahead and not yet awaited (see `await_ahead`).
    ahead: bool,
    /// The last poll found no backlog (it returned less than a full batch): the next one
    /// waits at the partitions before it fetches any (`PollPause::wait_first`), which at a
    /// trickle saves a fetch of every partition per record.
    caught_up: bool,
    /// What this stream yielded in which generation, and its committers' pending commits.
    shared: Arc<Shared>,
    /// The committers' flush in flight, sent by the stream (interval, rebalance).
    flushing: Option<BoxFuture<'static, Result<()>>>,
    /// Wakes the stream when the pending commits' interval ends.
    flush_timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A rebalance was seen with commits pending: the next poll waits for their flush, so
    /// that it reads from the offsets they commit.
    flush_first: bool,
    /// A terminal error was yielded: only `None` follows.
    ended: bool,
    /// `leave` was called: the drop sends nothing.
    left: bool,
    /// The values' format (MessagePack, unless the topic is bound to a schema).
    codec: ValueCodec,
    payload: PhantomData<fn() -> T>,
}

// No field is ever pinned: the poll in flight is boxed, the rest is plain data.
impl<T> Unpin for RecordStream<T> {}

/// The group member behind a stream, on either backend.
#[derive(Debug)]
enum Member {
    /// On the embedded broker: the member state `Consumer` uses too.
    Embedded(Membership),
    /// On the Kafka backend: a librdkafka member.
    #[cfg(feature = "kafka")]
    Kafka(crate::kafka::stream_member::KafkaSide),
}

/// A poll's answer, per backend.
enum Answer {
    Embedded(Box<Polled>),
    #[cfg(feature = "kafka")]
    Kafka(Vec<Record<Vec<u8>>>, Assignment),
}

impl Member {
    fn assignment(&self) -> &Assignment {
        match self {
            Member::Embedded(m) => m.assignment(),
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => k.assignment(),
        }
    }

    fn topic(&self) -> &str {
        match self {
            Member::Embedded(m) => &m.topic,
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => &k.topic,
        }
    }
}

impl<T> std::fmt::Debug for RecordStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordStream")
            .field("member", &self.member)
            .field("options", &self.options)
            .field("buffered", &self.buffer.len())
            .field("polling", &self.polling.is_some())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl AsyncNanoKafka {
    /// Joins `group` on `topic` as `member` and returns its records as a [`RecordStream`]
    /// of `T` payloads, with the default [`StreamOptions`]. Not checked against the
    /// topic's recorded payload type: [`crate::Topic::stream`] is the checked way.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::join_group_with`] (`UnknownTopic`, `InvalidId`,
    /// `GroupOptionsMismatch`, ...); nothing joined then. On the Kafka backend, as a
    /// librdkafka member's join (`Kafka` when no assignment came within the request timeout).
    pub async fn stream<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
    ) -> Result<RecordStream<T>> {
        self.stream_with(topic, group, member, StreamOptions::default())
            .await
    }

    /// As [`AsyncNanoKafka::stream`], with [`StreamOptions`] (the group's options, the batch
    /// size, the long poll's wait).
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::stream`], plus `InvalidArgument` for options that cannot work
    /// ([`StreamOptions::validate`]; nothing joined).
    pub async fn stream_with<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        options: StreamOptions,
    ) -> Result<RecordStream<T>> {
        options.validate()?;
        let joined = self
            .join_stream_member((topic, group, member), options)
            .await?;
        let target = match &joined {
            Member::Embedded(_) => CommitTarget::Embedded(EmbeddedTarget {
                handle: self.clone(),
                topic: topic.to_owned(),
                group: group.to_owned(),
                member: member.to_owned(),
            }),
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => CommitTarget::Kafka(k.commits()),
        };
        let shared = Shared::new(topic, joined.assignment().generation, target);
        Ok(RecordStream {
            handle: self.clone(),
            member: joined,
            options,
            buffer: VecDeque::new(),
            polling: None,
            polling_from: None,
            ahead: false,
            caught_up: false,
            shared,
            flushing: None,
            flush_timer: None,
            flush_first: false,
            ended: false,
            left: false,
            codec: ValueCodec::MessagePack,
            payload: PhantomData,
        })
    }
}

impl<T> RecordStream<T> {
    /// The same stream, reading values in `codec`'s format (a topic bound to a schema,
    /// which only the embedded broker has). Before its first poll.
    pub(crate) fn with_codec(mut self, codec: ValueCodec) -> Self {
        self.codec = codec;
        self
    }
}

impl AsyncNanoKafka {
    async fn join_stream_member(
        &self,
        (topic, group, member): (&str, &str, &str),
        options: StreamOptions,
    ) -> Result<Member> {
        let names = (topic, group, member);
        match self.engine()? {
            Engine::Embedded(_) => {
                let assignment = self
                    .join_group_with(topic, group, member, options.group)
                    .await?;
                let membership = Membership::new(names, options.group, assignment);
                Ok(Member::Embedded(membership))
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(backend) => {
                let joined =
                    crate::kafka::stream_member::KafkaSide::join(backend, names, options.group);
                Ok(Member::Kafka(joined.await?))
            }
        }
    }
}

impl<T: DeserializeOwned> RecordStream<T> {
    /// The member's assignment as of its last poll or join.
    pub fn assignment(&self) -> &Assignment {
        self.member.assignment()
    }

    /// The topic this stream reads.
    pub fn topic(&self) -> &str {
        self.member.topic()
    }

    /// A handle that commits for this stream apart from it, coalesced and flushed on
    /// [`StreamOptions::commit_interval`], and that can leave the group: the way to commit a
    /// stream handed to an actor's `ctx.add_stream` (see [`StreamCommitter`]).
    pub fn committer(&self) -> StreamCommitter {
        StreamCommitter {
            shared: self.shared.clone(),
        }
    }

    /// Commits `record` and everything before it in its partition, fenced by the generation
    /// the record was yielded in (as [`crate::Consumer::commit`]).
    ///
    /// # Errors
    /// `IllegalGeneration` when the record was read before a rebalance (nothing changed: it
    /// is yielded again from the committed offset, by this member or the partition's new
    /// owner); `PartitionNotAssigned`, `UnknownMember`, `OffsetOutOfRange`, `Io`;
    /// `InvalidArgument` for a record this stream did not yield in its last 8 generations
    /// (use [`RecordStream::commit_offset`] to commit it anyway).
    pub async fn commit(&mut self, record: &Record<T>) -> Result<()> {
        let read_in = self
            .shared
            .ledger()
            .read_in(record.partition, record.offset);
        let generation = read_in.ok_or_else(|| Error::InvalidArgument {
            name: "record",
            reason: format!(
                "{}/{}@{} was not yielded by this stream in its last {GENERATIONS_REMEMBERED} \
                     generations; commit_offset commits it in the current one",
                self.member.topic(),
                record.partition,
                record.offset
            ),
        })?;
        self.commit_in(generation, record.partition, record.offset)
            .await
    }

    /// Commits `offset` of `partition` (and everything before it), fenced by the member's
    /// current generation. Commits past a record that did not decode, too.
    ///
    /// # Errors
    /// As [`RecordStream::commit`], but for `InvalidArgument`.
    pub async fn commit_offset(&mut self, partition: u32, offset: u64) -> Result<()> {
        let generation = self.generation();
        self.commit_in(generation, partition, offset).await
    }

    /// Moves the stream's position in `partition` to `offset` (the next record yielded from
    /// there). Buffered records of the partition are dropped, and a poll in flight is
    /// abandoned (nothing is lost: positions live in the stream). As for
    /// [`crate::Consumer::seek`], a rebalance drops the position again.
    ///
    /// # Errors
    /// `PartitionNotAssigned` when the partition is not in the current assignment;
    /// `Unsupported` on the Kafka backend (its member's seek blocks on the poll in flight).
    pub fn seek(&mut self, partition: u32, offset: u64) -> Result<()> {
        match &mut self.member {
            Member::Embedded(m) => m.seek(partition, offset)?,
            #[cfg(feature = "kafka")]
            Member::Kafka(_) => return Err(crate::kafka::unsupported("RecordStream::seek")),
        }
        self.buffer.retain(|(p, _)| *p != partition);
        self.polling = None;
        Ok(())
    }

    /// Sends its committers' pending commits, then leaves the group and waits for the
    /// broker's answer (dropping the stream sends both without waiting).
    ///
    /// # Errors
    /// The flush's refusal (as [`StreamCommitter::flush`]; the stream leaves anyway);
    /// `UnknownMember` (already evicted: nothing to leave), `UnknownTopic`, `BrokerStopped`.
    pub async fn leave(mut self) -> Result<()> {
        self.left = true;
        self.polling = None;
        let flushed = self.shared.flush().await;
        let left = match &mut self.member {
            Member::Embedded(m) => self.handle.leave_group(&m.topic, &m.group, &m.member).await,
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => k.leave().await,
        };
        flushed.and(left)
    }

    fn generation(&self) -> u64 {
        self.member.assignment().generation
    }

    /// The partitions whose pending commits and yielded offsets a rebalance into the next
    /// generation keeps (`Ledger::entered`): on the embedded broker, those still assigned,
    /// whose generations are the group's own. On the Kafka backend none: its generations
    /// are the member's count of assignments, which can miss one of the group's.
    fn kept_partitions(&self) -> &[u32] {
        match &self.member {
            Member::Embedded(m) => &m.assignment().partitions,
            #[cfg(feature = "kafka")]
            Member::Kafka(_) => &[],
        }
    }

    /// Notes in the ledger the records buffered from index `from` on as yielded in the
    /// current generation (they are the caller's once popped; noted a batch at a time).
    fn note_buffered(&self, from: usize) {
        let mut ledger = self.shared.ledger();
        ledger.entered(self.generation(), self.kept_partitions());
        let mut range: Option<(u32, u64, u64)> = None;
        for (partition, item) in self.buffer.range(from..) {
            let Ok(record) = item else { continue };
            range = match range {
                Some((p, lo, hi)) if p == *partition => Some((p, lo, hi.max(record.offset))),
                other => {
                    if let Some((p, lo, hi)) = other {
                        ledger.note_yielded(p, lo, hi);
                    }
                    Some((*partition, record.offset, record.offset))
                }
            };
        }
        if let Some((p, lo, hi)) = range {
            ledger.note_yielded(p, lo, hi);
        }
    }

    async fn commit_in(&mut self, generation: u64, partition: u32, offset: u64) -> Result<()> {
        let committed = match &self.member {
            Member::Embedded(m) => {
                let commit = m.commit_request(generation, partition, offset);
                self.handle.fenced_commit(commit).await
            }
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => k.commit(generation, partition, offset).await,
        };
        let current = generation == self.generation();
        match (&committed, &mut self.member) {
            (Ok(()), Member::Embedded(m)) if current => m.committed(partition, offset),
            // The group moved on: what is buffered belongs to the old generation.
            (Err(Error::IllegalGeneration { .. } | Error::UnknownMember { .. }), _) if current => {
                self.buffer.clear();
                // A poll sent ahead in that generation must not hand out its records either.
                self.polling = None;
            }
            _ => {}
        }
        committed
    }

    /// The next poll, as a future that owns what it needs, now in flight.
    fn start_poll(&mut self) -> &mut BoxFuture<'static, Result<Answer>> {
        let (max, wait) = (self.options.max_batch, self.options.poll_wait);
        let (poll, from) = match &self.member {
            Member::Embedded(m) => {
                let request = m
                    .poll_request(max, wait)
                    .waiting_first(self.caught_up)
                    .chained();
                let from = request.basis();
                (
                    embedded_poll(&self.handle, request, &self.codec),
                    Some(from),
                )
            }
            #[cfg(feature = "kafka")]
            Member::Kafka(k) => {
                let poll = k.poll(max, wait);
                let poll = async move { poll.await.map(|(r, a)| Answer::Kafka(r, a)) };
                (poll.boxed(), None)
            }
        };
        self.polling_from = from;
        self.polling.insert(poll)
    }

    /// The caller took the whole batch and now waits for the poll sent ahead meanwhile: its
    /// answer is likely microseconds away (records are flowing), so the task keeps awake for
    /// it ([`crate::spin::Hurry`]) rather than letting the runtime park its thread, whose
    /// wake-up costs tens of microseconds. A poll not sent ahead (a trickle, a long poll)
    /// parks at once.
    fn await_ahead(&mut self) {
        if !std::mem::take(&mut self.ahead) {
            return;
        }
        if let Some(polling) = self.polling.take() {
            self.polling = Some(Box::pin(crate::spin::Hurry::new(polling)));
        }
    }

    /// Whether the answer of the poll just taken reads from where the member is now: not
    /// after a seek or a commit moved its positions while the poll was sent ahead.
    fn answers_from_here(&mut self) -> bool {
        let from = self.polling_from.take();
        match &self.member {
            Member::Embedded(m) => from.is_none_or(|from| m.reads_from(&from)),
            #[cfg(feature = "kafka")]
            Member::Kafka(_) => true,
        }
    }

    /// Takes a poll's answer in: its records go to the buffer (a bad one as its error, and
    /// the position moves past it). A new generation drops what is buffered. An answer sent
    /// ahead that the group's rebalance made stale since is dropped (it moved nothing).
    fn take_in(&mut self, answer: Result<Answer>) -> Result<()> {
        // The poll after a full batch (more is likely to read), sent before decoding it.
        let mut ahead = None;
        match (answer?, &mut self.member) {
            (Answer::Embedded(polled), _) if polled.is_stale() => {}
            (Answer::Embedded(mut polled), Member::Embedded(m)) => {
                let next = polled.take_next();
                let before = m.generation();
                let fetched = m.polled(*polled);
                self.caught_up = fetched
                    .as_ref()
                    .is_none_or(|f| f.records.len() < self.options.max_batch);
                if m.generation() != before {
                    self.buffer.clear();
                    // Read again after the flush (nothing moved: the records are dropped).
                    self.flush_first = self.shared.ledger().has_pending();
                }
                if let Some(fetched) = fetched.filter(|_| !self.flush_first) {
                    let full = fetched.records.len() >= self.options.max_batch;
                    let same = self.shared.ledger().generation() == m.generation();
                    if full && same && self.flushing.is_none() {
                        ahead =
                            m.poll_after(&fetched, self.options.max_batch, self.options.poll_wait);
                    }
                    if let Some(next) = ahead.take() {
                        // Sent before decoding (as `Consumer` does): the partition reads the
                        // next batch while this thread decodes this one. A record that does
                        // not decode moves the position back, which drops the answer.
                        self.ahead = true;
                        self.polling_from = Some(next.basis());
                        self.polling =
                            Some(send_now(embedded_poll(&self.handle, next, &self.codec)));
                    }
                    buffer_fetched(m, &mut self.buffer, &fetched, &self.codec);
                }
                // The next poll, sent by the coordinator with this answer: awaited in place of
                // one sent from here, if it reads from where the member is now.
                let (max, wait) = (self.options.max_batch, self.options.poll_wait);
                let chained = next
                    .filter(|_| self.polling.is_none() && !self.flush_first)
                    .and_then(|next| Some((m.chained_request(&next, max, wait)?, next)));
                if let Some((request, next)) = chained {
                    self.polling_from = Some(request.basis());
                    self.polling = Some(chained_poll(&self.handle, request, next, &self.codec));
                }
            }
            #[cfg(feature = "kafka")]
            (Answer::Kafka(records, assignment), Member::Kafka(k)) => {
                if k.assigned(assignment) {
                    self.buffer.clear();
                }
                let topic = k.topic.clone();
                // The member's positions are past these records already.
                let decoded = records.into_iter().map(|r| (r.partition, r.decode(&topic)));
                self.buffer.extend(decoded);
            }
            #[cfg(feature = "kafka")]
            _ => {
                return Err(Error::Internal {
                    actor: "record stream".into(),
                    reason: "a poll was answered by the other backend".into(),
                })
            }
        }
        let moved_on = self.shared.ledger().generation() != self.generation();
        self.note_buffered(0);
        if moved_on {
            // The commits asked for in the generation that ended go first (Kafka commits
            // on revocation): the coordinator takes them, or refuses them and the flush's
            // error is yielded.
            self.start_flush();
        }
        Ok(())
    }

    /// Sends the pending commits, unless a flush is in flight already.
    fn start_flush(&mut self) {
        if self.flushing.is_none() {
            let shared = self.shared.clone();
            self.flushing = Some(async move { shared.flush().await }.boxed());
            self.flush_timer = None;
        }
    }

    /// Drives the stream's flush: polls the one in flight (its refusal is returned, to be
    /// yielded), starts one when the oldest pending commit waited `commit_interval`, and
    /// otherwise arms a timer for then.
    fn drive_flush(&mut self, cx: &mut Context<'_>) -> Option<Error> {
        if self.flushing.is_none() {
            let since = self.shared.ledger().pending_since;
            let Some(since) = since else {
                self.flush_timer = None;
                return None;
            };
            // An interval past any instant (`Duration::MAX`) never falls due: only a flush,
            // a leave, a drop or a rebalance sends.
            let due = since.checked_add(self.options.commit_interval)?;
            if tokio::time::Instant::now().into_std() < due {
                let timer = self
                    .flush_timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due.into())));
                if timer.as_mut().poll(cx).is_pending() {
                    return None;
                }
            }
            self.start_flush();
        }
        let flushing = self.flushing.as_mut()?;
        let Poll::Ready(flushed) = flushing.as_mut().poll(cx) else {
            return None;
        };
        self.flushing = None;
        flushed.err()
    }
}

/// An embedded poll's records, decoded from their read buffer into `buffer`; `m`'s position
/// moves past them (and past a record that does not decode, which goes in as its error).
/// Returns how many decoded.
fn buffer_fetched<T: DeserializeOwned>(
    m: &mut Membership,
    buffer: &mut VecDeque<(u32, Result<Record<T>>)>,
    fetched: &crate::partition::Fetched,
    codec: &ValueCodec,
) -> usize {
    let partition = fetched.partition;
    buffer.reserve(fetched.records.len());
    let (mut last, mut taken) = (None, 0);
    let decoded = codec.decode_each::<T>(fetched, &m.topic, |record| {
        last = Some(record.offset);
        taken += 1;
        buffer.push_back((partition, Ok(record)));
    });
    match decoded {
        Ok(()) => {
            if let Some(last) = last {
                m.delivered(partition, last);
            }
            taken
        }
        Err(e) => {
            if let Error::Decode { offset, .. } = &e {
                m.delivered(partition, *offset);
            }
            buffer.push_back((partition, Err(e)));
            0
        }
    }
}

/// An embedded poll of `request` (rejoining when the member was forgotten, `codec` made
/// ready for what it read), as a future that owns what it needs.
fn embedded_poll(
    handle: &AsyncNanoKafka,
    request: PollRequest,
    codec: &ValueCodec,
) -> BoxFuture<'static, Result<Answer>> {
    let handle = handle.clone();
    let codec = codec.clone();
    async move {
        poll_prepared(&handle, request, &codec)
            .await
            .map(|polled| Answer::Embedded(Box::new(polled)))
    }
    .boxed()
}

/// [`embedded_poll`] for a poll the coordinator sent already (`next`, for `request`).
fn chained_poll(
    handle: &AsyncNanoKafka,
    request: PollRequest,
    next: Box<NextPoll>,
    codec: &ValueCodec,
) -> BoxFuture<'static, Result<Answer>> {
    let handle = handle.clone();
    let codec = codec.clone();
    async move {
        poll_chained(&handle, request, next, &codec)
            .await
            .map(|polled| Answer::Embedded(Box::new(polled)))
    }
    .boxed()
}

/// Polls `poll` once, which sends its request, and returns it to be polled again with a
/// real waker later (an answer already there is kept).
fn send_now(mut poll: BoxFuture<'static, Result<Answer>>) -> BoxFuture<'static, Result<Answer>> {
    match poll.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(answer) => futures::future::ready(answer).boxed(),
        Poll::Pending => poll,
    }
}

/// Errors after which polling again cannot help: the stream ends.
fn ends_the_stream(error: &Error) -> bool {
    matches!(
        error,
        Error::BrokerStopped
            | Error::UnknownTopic { .. }
            | Error::GroupOptionsMismatch { .. }
            | Error::Unsupported { .. }
    )
}

impl<T: DeserializeOwned> Stream for RecordStream<T> {
    type Item = Result<Record<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.shared.leaving.load(Ordering::Acquire) {
            // A committer left the group for the stream.
            this.left = true;
            this.polling = None;
            return Poll::Ready(None);
        }
        if this.flushing.is_some() {
            if let Some(refused) = this.drive_flush(cx) {
                return Poll::Ready(Some(Err(refused)));
            }
        }
        loop {
            if let Some((_, item)) = this.buffer.pop_front() {
                return Poll::Ready(Some(item));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            if let Some(refused) = this.drive_flush(cx) {
                return Poll::Ready(Some(Err(refused)));
            }
            if this.flush_first {
                if this.flushing.is_some() {
                    return Poll::Pending;
                }
                this.flush_first = false;
            }
            this.await_ahead();
            let polling = match this.polling {
                Some(ref mut polling) => polling,
                None => this.start_poll(),
            };
            let answer = match polling.as_mut().poll(cx) {
                Poll::Pending => {
                    this.shared.ledger().wake_on_commit(cx.waker());
                    return Poll::Pending;
                }
                Poll::Ready(answer) => answer,
            };
            this.polling = None;
            if !this.answers_from_here() {
                // Sent ahead from positions that moved since: nothing moved, poll again.
                continue;
            }
            if let Err(e) = this.take_in(answer) {
                this.ended = ends_the_stream(&e);
                return Poll::Ready(Some(Err(e)));
            }
            if this.flushing.is_some() {
                if let Some(refused) = this.drive_flush(cx) {
                    return Poll::Ready(Some(Err(refused)));
                }
            }
            // An empty answer (the wait passed): poll again, which registers the waker.
        }
    }
}

impl<T> Drop for RecordStream<T> {
    /// Leaves the group without waiting: the leave is sent, its answer ignored.
    fn drop(&mut self) {
        if self.left {
            return;
        }
        self.polling = None;
        self.shared.send_pending_now();
        match &mut self.member {
            Member::Embedded(m) => {
                if let Ok(addr) = self.handle.addr() {
                    addr.do_send(m.take_leave());
                }
            }
            // Its own drop leaves.
            #[cfg(feature = "kafka")]
            Member::Kafka(_) => {}
        }
    }
}
