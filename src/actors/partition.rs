//! `PartitionActor`: the single owner (and single writer) of one partition's files.
//!
//! State: a [`Partition`] (log + committed offsets) once opened, the produces parked by
//! `Backpressure::Block`, and the long polls waiting for data. Runs under a `Supervisor` on
//! one of the broker's I/O arbiters. A handler panic or an I/O error it cannot continue past
//! stops it; `restarting` answers every parked request with `PartitionRestarted`, and
//! `started` reopens the partition from disk (with backoff, and a restart budget after which
//! it reports `PartitionFailed`).
//!
//! Every reply travels through a oneshot channel answered by this actor, so a parked request
//! is answered exactly once: by the append, by its deadline timer, or by a restart.
//!
//! Under `FsyncPolicy::Interval` a timer starts the partition's sync each interval, but the
//! `fdatasync`s run on the broker's sync worker (`storage::sync_worker`), never on this I/O
//! thread: appends, fetches and commits here and on every other actor of the thread go on
//! while it is in flight. The worker tells the actor with a `SyncFinished` message (the
//! next tick also looks), and the actor applies the result (`Partition::poll_sync`): its
//! durations go to the fsync metrics; a failure stops the actor, so that it reopens from disk.
//! A roll's sealing and the unlinking of the segments retention drops run on that worker too
//! (`PartitionLog::set_worker`).

mod offsets;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::channel::oneshot;

use super::io_thread::{Doorbell, Rung};
use super::lane::{Append, AppendReply, ParkedPolls};
use super::supervise::{guarded, guarded_future, guarded_reply, RestartBudget, RestartDecision};
use super::BrokerSettings;
use crate::config::{FsyncPolicy, TopicConfig};
use crate::error::{Error, Result};
use crate::group::StartFrom;
use crate::metrics::{CleanerMetrics, LagGauges, PartitionMetrics};
use crate::partition::{CleaningPlan, Fetched, Partition};
use crate::produce_queue::{AppendAnswer, Offered, ProduceQueue, Produced};
use crate::storage::data_dir::partition_dir;
use crate::storage::{AppendInfo, KafkaAppend, LogConfig, RecordBatch};
use crate::types::PartitionStats;
use crate::wait::EarlyWake;
pub use offsets::{GetCommitted, SetCommitted};

mod wire;
pub use wire::{FindKafkaOffset, GetProducers, ReadBatches, WaitForAppend};

mod delete;
pub use delete::DeletePartition;

mod alter;
pub use alter::ReconfigurePartition;

mod cleaning;

mod records;
pub use records::{DeleteRecordsBefore, ForgetPartitionGroup};

/// A partition actor's address and its I/O thread (see [`Rung`]).
pub type PartitionRef = Rung<PartitionActor>;

impl PartitionRef {
    /// Where a produce lane sends its `Append`s, and the doorbell it rings after each.
    pub fn lane_target(&self) -> (Recipient<Append>, Arc<Doorbell>) {
        (self.addr().clone().recipient(), self.io().doorbell.clone())
    }
}

/// Read up to `max_records` from `group`'s committed offset. Sent by the group coordinator
/// for a poll. Reply: the records in their read buffer (the poll's caller copies or decodes
/// them; nothing is copied per record on this thread). Never moves the committed offset.
/// Errors: `Corrupt`, `Io`, `PartitionRestarted`, `PartitionFailed`.
///
/// A fetch that returned records and left something to read ahead
/// (`Partition::can_read_ahead`) spawns the read of the next fetch after a `yield_now`, so
/// the coordinator forwards this answer first and the read uses the partition's idle time.
/// A fetch at the log end is answered by the next append from a copy of the batch it wrote
/// (`PartitionLog::hold_for_reader_at_end`), not by reading it back.
#[derive(Debug)]
pub struct Fetch {
    pub group: Arc<str>,
    /// Read from here (a `Consumer` keeps its own position); `None`: the committed offset.
    pub from: Option<u64>,
    pub max_records: usize,
}
impl Message for Fetch {
    type Result = Result<Fetched>;
}

/// Answer `wake` once `group` has records to read. Sent by the coordinator for a long poll,
/// with `do_send`: the coordinator owns the poll's deadline and drops the receiver when it no
/// longer waits (a dropped receiver's waiter is discarded at the next registration or write).
///
/// The answer: `Ok(None)` at once when there is data already (the coordinator fetches it);
/// `Ok(Some(fetched))` when a write ended the wait, with what `Fetch { group, from,
/// max_records }` would return then (read by the partition as it wakes the poll, which saves
/// the poll a round trip per batch at low rates), or `Ok(None)` when another partition of the
/// same poll already took that turn (`claimed`: one poll's waits share it, so writes to several
/// of its partitions at once read one fetch, not one each); `PartitionRestarted` when the actor
/// restarted while the wait was parked (the coordinator reports it instead of waiting again
/// on the reopened partition), `BrokerStopped` when it was closed, or the fetch's error.
/// `wake` is dropped unanswered when the mailbox was already closed or the handler panicked;
/// the coordinator then fetches and meets the error.
///
/// A message without a reply, so that a wait costs no reply channel, no task and no timer of
/// its own: a subscription's poll sends one to each of its partitions.
#[derive(Debug)]
pub struct WaitForData {
    pub group: Arc<str>,
    /// As in [`Fetch`].
    pub from: Option<u64>,
    pub max_records: usize,
    /// Set by the first partition that fetches for the poll.
    pub claimed: Arc<AtomicBool>,
    pub wake: oneshot::Sender<Result<Option<Fetched>>>,
    /// Fired when an append is sent to the partition (or reaches it) while the poll waits
    /// here: see `PollPause::early_wake` and [`ParkedPolls`]. One for all the waits of a
    /// poll's round.
    pub early_wake: Option<EarlyWake>,
}
impl Message for WaitForData {
    type Result = ();
}

/// A long poll parked at a partition until its next write (or restart, or close).
#[derive(Debug)]
enum Waiter {
    /// A Kafka fetch's wait (`WaitForAppend`): told that something was written.
    Append(oneshot::Sender<Result<()>>),
    /// A group poll's wait (`WaitForData`): answered with its fetch.
    Group(WaitForData),
}

impl Waiter {
    /// Its poll stopped waiting.
    fn is_canceled(&self) -> bool {
        match self {
            Waiter::Append(tx) => tx.is_canceled(),
            Waiter::Group(wait) => wait.wake.is_canceled(),
        }
    }

    /// Ends the wait with `error`.
    fn fail(self, error: Error) {
        match self {
            Waiter::Append(tx) => drop(tx.send(Err(error))),
            Waiter::Group(wait) => drop(wait.wake.send(Err(error))),
        }
    }
}

/// Append a Kafka client's record batch as it was sent (see `PartitionLog::append_kafka_batch`),
/// through the same group commit and backpressure as native produces. Sent by `TopicActor`
/// for a `ProduceKafkaBatch`. Reply: an actix response future over a oneshot the produce
/// queue answers (`PartitionRestarted` if the actor restarts first).
///
/// It is checked whole on arrival (every record, decompressed once within a cap: the
/// append does not read them again) and written on its own, after the native batches
/// queued before it. It parks under `Backpressure::Block` like an `Append`. An idempotent producer's retry of a stored
/// batch is answered with the stored offsets (`duplicate`) and writes nothing.
/// Errors: `InvalidBatch`, `RecordTooLarge`, `ProducerFenced`, `OutOfOrderSequence`, `PartitionFull`, `Timeout`,
/// `Io`, `PartitionRestarted`, `PartitionFailed`.
#[derive(Debug)]
pub struct AppendKafka {
    pub batch: bytes::Bytes,
}
impl Message for AppendKafka {
    type Result = Result<KafkaAppend>;
}

/// Who waits for a produce: a lane's `Append`, or the sender of an [`AppendKafka`].
#[derive(Debug)]
pub enum ProduceReply {
    Lane(AppendReply),
    Kafka(oneshot::Sender<Result<KafkaAppend>>),
}

impl AppendAnswer for ProduceReply {
    fn answer(self, result: Result<AppendInfo>) {
        match self {
            ProduceReply::Lane(reply) => reply.send(result),
            // Only errors take this path for a Kafka batch (see `answer_kafka`).
            ProduceReply::Kafka(tx) => {
                let _ = tx.send(result.map(|info| KafkaAppend {
                    base_offset: info.base_offset,
                    last_offset: info.base_offset + info.count.saturating_sub(1),
                    log_append_time_ms: None,
                    log_start_offset: 0,
                    duplicate: false,
                }));
            }
        }
    }

    fn answer_giving_back(self, result: Result<AppendInfo>, spent: RecordBatch) {
        match self {
            ProduceReply::Lane(reply) => reply.answer_giving_back(result, spent),
            kafka => kafka.answer(result),
        }
    }

    fn answer_kafka(self, result: Result<KafkaAppend>) {
        match self {
            ProduceReply::Kafka(tx) => {
                let _ = tx.send(result);
            }
            ProduceReply::Lane(reply) => reply.send(result.map(AppendInfo::from)),
        }
    }
}

/// Commit for `group`: committed offset = `offset + 1`. Sent by `TopicActor` (a `Commit`),
/// by a group coordinator (`CommitAsMember`, after fencing), or straight by a handle that
/// has seen the group exist (through its route's `PartitionRef`). Reply once the commit is
/// in the OS; it then admits parked produces while there is room.
/// Errors: `OffsetOutOfRange`, `Io` (the actor then restarts), `PartitionRestarted`,
/// `PartitionFailed`.
#[derive(Debug)]
pub struct CommitOffset {
    pub group: Arc<str>,
    pub offset: u64,
}
impl Message for CommitOffset {
    type Result = Result<()>;
}

/// `group`'s lag here; `None` when the group neither committed here nor exists on the
/// topic (`group_exists`: it has a coordinator, so it reads from the log start). Sent by
/// `TopicActor` to every partition for a `Lag`. Errors: `PartitionRestarted`,
/// `PartitionFailed`.
#[derive(Debug)]
pub struct GroupLag {
    pub group: String,
    pub group_exists: bool,
}
impl Message for GroupLag {
    type Result = Result<Option<u64>>;
}

/// `group` has members on this topic: count it for backpressure from the log start before
/// its first commit, or, with `StartFrom::Latest`, give it a committed offset at the log
/// end. Fire-and-forget (`do_send` from `TopicActor` when it starts the group's coordinator,
/// and to the partitions an alter adds).
#[derive(Debug)]
pub struct RegisterGroup {
    pub group: String,
    pub start: StartFrom,
}
impl Message for RegisterGroup {
    type Result = ();
}

/// The partition's numbers, for `stats()`. Sent by `TopicActor` (`DescribeTopic`). Never
/// fails.
#[derive(Debug)]
pub struct DescribePartition;
impl Message for DescribePartition {
    type Result = PartitionStats;
}

/// Clean shutdown: sync, write the clean-shutdown checkpoint, close the files. Sent by
/// `TopicActor` (`CloseTopic`, for `Shutdown`). Produces accepted before it are written
/// and acknowledged first; parked produces and long polls are answered `BrokerStopped`, as
/// are later requests. Errors: the close's (sync, checkpoint).
#[derive(Debug)]
pub struct ClosePartition;
impl Message for ClosePartition {
    type Result = Result<()>;
}

/// Fault injection: panic inside the handler (see `messages::CrashPartition`). Sent by
/// `TopicActor`; the supervisor restarts the actor, which reloads from disk.
#[derive(Debug)]
pub struct Crash;
impl Message for Crash {
    type Result = Result<()>;
}

#[derive(Debug)]
enum Slot {
    /// Not open yet (first start, or waiting out a restart backoff).
    Opening,
    Open(Box<Partition>),
    Failed(String),
    Closed,
    /// The topic was deleted: the files are gone, and so are the timers; the actor lives on
    /// only while a stale address (a handle's cached produce route) may still reach it.
    Deleted,
}

impl Slot {
    /// Why a request cannot be served in this state.
    fn unavailable(&self, topic: &str, partition: u32) -> Error {
        match self {
            Slot::Failed(reason) => Error::PartitionFailed {
                topic: topic.to_owned(),
                partition,
                reason: reason.clone(),
            },
            Slot::Closed => Error::BrokerStopped,
            Slot::Deleted => Error::UnknownTopic {
                topic: topic.to_owned(),
            },
            Slot::Opening | Slot::Open(_) => Error::PartitionRestarted {
                topic: topic.to_owned(),
                partition,
            },
        }
    }
}

/// The interval sync in flight may be done: apply it (`Partition::poll_sync`): its
/// durations go to the fsync metrics, a failure stops the actor (it reopens from disk).
/// Sent with `do_send` by the sync worker after the job; a late or stale one finds nothing
/// to apply.
#[derive(Debug)]
struct SyncFinished;
impl Message for SyncFinished {
    type Result = ();
}

/// Write the group commit. Sent by the actor to itself (`notify`, at most one pending), so
/// it runs once the mailbox is drained and every produce already waiting shares the write.
#[derive(Debug)]
struct FlushAppends;
impl Message for FlushAppends {
    type Result = ();
}

/// See the module docs.
#[derive(Debug)]
pub struct PartitionActor {
    /// Parent of every handler's span: names the actor in every event.
    span: tracing::Span,
    topic: String,
    partition: u32,
    /// "partition topic/p", for logs (made once: handlers name the actor on every call).
    label: Arc<str>,
    dir: PathBuf,
    log_config: LogConfig,
    max_size: Option<u64>,
    retention_ms: Option<u64>,
    settings: Arc<BrokerSettings>,
    slot: Slot,
    /// Outlives restarts so backpressure keeps counting groups that have not committed yet.
    registered: BTreeMap<String, StartFrom>,
    /// The group commit and the parked produces.
    produces: ProduceQueue<ProduceReply>,
    /// A `FlushAppends` is in the mailbox.
    flush_scheduled: bool,
    waiters: Vec<Waiter>,
    /// The early wake-ups of `waiters`, shared with the partition's produce lane.
    parked: Arc<ParkedPolls>,
    restarts: RestartBudget,
    /// Set by `restarting`; `started` then reopens under the restart budget.
    restart_pending: bool,
    /// Its produce, fetch and latency metrics (shared with `produces`).
    metrics: PartitionMetrics,
    /// Its groups' lag gauges: set on each commit, and after each write for the groups
    /// already seen committing (a lookup per group, no walk over the log).
    lag: LagGauges,
    /// The sync, retention and cleaning timers, cancelled when the topic is deleted (a
    /// running timer would keep the actor alive once every address is gone).
    timers: Vec<SpawnHandle>,
    /// How the log is cleaned, when the topic is compacted (see `cleaning.rs`).
    cleaning: Option<CleaningPlan>,
    /// A cleaning pass of this partition runs on the cleaner thread.
    cleaning_in_flight: bool,
    /// The cleaner's metrics, made at the first pass.
    cleaner_metrics: Option<CleanerMetrics>,
}

impl PartitionActor {
    pub fn new(
        topic: &str,
        partition: u32,
        config: &TopicConfig,
        settings: Arc<BrokerSettings>,
        parked: Arc<ParkedPolls>,
    ) -> Self {
        let metrics = PartitionMetrics::new(topic, partition);
        let settings_key_map = settings.cleaner_key_map_bytes;
        let log_config = config.log_config(settings.fsync, settings.max_record_bytes);
        let mut produces = ProduceQueue::new(config.backpressure, settings.block_timeout)
            .with_metrics(metrics.clone());
        produces.set_cleanup_policy(config.cleanup_policy);
        PartitionActor {
            span: tracing::info_span!("partition", topic = %topic, partition),
            topic: topic.to_owned(),
            partition,
            label: format!("partition {topic}/{partition}").into(),
            dir: partition_dir(&settings.data_dir, topic, partition),
            log_config,
            max_size: config.max_size,
            // The timer of time retention runs only when the policy applies retention.
            retention_ms: log_config.retention.ms,
            produces,
            metrics,
            lag: LagGauges::new(topic, partition),
            settings,
            slot: Slot::Opening,
            registered: BTreeMap::new(),
            flush_scheduled: false,
            waiters: Vec::new(),
            parked,
            restarts: RestartBudget::default(),
            restart_pending: false,
            timers: Vec::new(),
            cleaning: CleaningPlan::for_topic(config, settings_key_map),
            cleaning_in_flight: false,
            cleaner_metrics: None,
        }
    }

    fn name(&self) -> Arc<str> {
        self.label.clone()
    }

    fn open(&mut self, ctx: &mut Context<Self>) {
        if let Slot::Deleted = self.slot {
            return; // a reopen scheduled before the delete
        }
        let now = self.settings.clock.now_ms();
        let opened = Partition::open(
            &self.settings.fs,
            &self.dir,
            (&self.topic, self.partition),
            self.log_config,
            self.max_size,
            now,
        );
        match opened {
            Ok((mut partition, report)) => {
                partition.set_max_decompressed_bytes(self.settings.max_decompressed_batch_bytes);
                partition.set_worker(self.settings.sync_worker.clone());
                for (group, &start) in &self.registered {
                    if let Err(e) = partition.register_group(group, start) {
                        tracing::warn!(%group, error = %e, "cannot register group");
                    }
                }
                tracing::info!(
                    topic = %self.topic, partition = self.partition,
                    log_end_offset = partition.log_end_offset(), clean = report.clean_shutdown,
                    bytes_cut = report.bytes_cut(), "partition opened"
                );
                self.slot = Slot::Open(Box::new(partition));
                self.start_timers(ctx);
            }
            Err(e) => {
                tracing::error!(topic = %self.topic, partition = self.partition, error = %e, "cannot open partition");
                self.slot = Slot::Failed(e.to_string());
                self.schedule_reopen(ctx);
            }
        }
    }

    /// After a restart or a failed open: reopen now, later, or never (budget spent).
    fn schedule_reopen(&mut self, ctx: &mut Context<Self>) {
        match self.restarts.record(Instant::now()) {
            RestartDecision::Now => self.open(ctx),
            RestartDecision::After(delay) => {
                ctx.run_later(delay, |act, ctx| act.open(ctx));
            }
            RestartDecision::GiveUp => {
                let reason = format!(
                    "restarted more than {} times within {:?}; giving up",
                    super::supervise::MAX_RESTARTS,
                    super::supervise::RESTART_WINDOW
                );
                tracing::error!(topic = %self.topic, partition = self.partition, %reason);
                self.slot = Slot::Failed(reason);
            }
        }
    }

    fn start_timers(&mut self, ctx: &mut Context<Self>) {
        if let FsyncPolicy::Interval(every) = self.log_config.fsync {
            let timer = ctx.run_interval(every, |act, ctx| act.interval_sync(ctx));
            self.timers.push(timer);
        }
        if let Some(ms) = self.retention_ms {
            // Check a few times per retention period, at most once a second.
            let every = Duration::from_millis((ms / 4).clamp(1, 1000));
            let timer = ctx.run_interval(every, |act, ctx| {
                let now = act.settings.clock.now_ms();
                if let Slot::Open(p) = &mut act.slot {
                    if let Err(e) = p.enforce_retention(now) {
                        tracing::warn!(partition = %act.name(), error = %e, "time retention failed");
                    }
                }
                // Records that expired free room exactly as commits do.
                act.admit_parked(ctx);
            });
            self.timers.push(timer);
        }
        self.start_cleaning_timer(ctx);
    }

    /// The `FsyncPolicy::Interval` tick: applies the last sync if it is done (in case its
    /// `SyncFinished` is late), then hands the next one, if there is anything to sync and
    /// none in flight, to the sync worker.
    fn interval_sync(&mut self, ctx: &mut Context<Self>) {
        self.collect_sync(ctx);
        let Slot::Open(p) = &mut self.slot else {
            return;
        };
        match p.begin_sync() {
            Ok(Some(job)) => {
                let addr = ctx.address();
                self.settings.sync_worker.run(move || {
                    job.run();
                    addr.do_send(SyncFinished);
                });
            }
            Ok(None) => {}
            Err(e) => self.sync_failed(&e, ctx),
        }
    }

    /// Applies the interval sync in flight if it is done, recording its durations.
    fn collect_sync(&mut self, ctx: &mut Context<Self>) {
        let Slot::Open(p) = &mut self.slot else {
            return;
        };
        let synced = p.poll_sync();
        p.drain_sync_times(|took| self.metrics.fsync_took(took));
        if let Err(e) = synced {
            self.sync_failed(&e, ctx);
        }
    }

    fn sync_failed(&self, e: &Error, ctx: &mut Context<Self>) {
        // A failed fsync may have dropped dirty pages: never trust a retry; reopen from disk.
        tracing::error!(partition = %self.name(), error = %e, "sync failed; restarting");
        ctx.stop();
    }

    fn unavailable(&self) -> Error {
        self.slot.unavailable(&self.topic, self.partition)
    }

    fn restarted(&self) -> Error {
        Error::PartitionRestarted {
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }

    fn open_partition(&mut self) -> Result<&mut Partition> {
        match &mut self.slot {
            Slot::Open(p) => Ok(p),
            other => Err(other.unavailable(&self.topic, self.partition)),
        }
    }

    /// Stores `group`'s commit with `write`, then does what follows every commit: the group
    /// now counts from its commit (no longer from its registration), and a commit that moved
    /// forward may free room for parked produces. An I/O error stops the actor: the reopen
    /// reads what reached the disk.
    fn store_commit(
        &mut self,
        ctx: &mut Context<Self>,
        group: &str,
        write: impl FnOnce(&mut Partition) -> Result<()>,
    ) -> Result<()> {
        let name = self.name();
        guarded(self, ctx, &name, |act, ctx| {
            let result = write(act.open_partition()?);
            if matches!(result, Err(Error::Io { .. })) {
                ctx.stop();
            }
            result?;
            act.registered.remove(group);
            if let Slot::Open(p) = &act.slot {
                if let Some(lag) = p.lag(group, true) {
                    act.lag.set_lag(group, lag);
                }
            }
            act.admit_parked(ctx);
            Ok(())
        })
        .unwrap_or_else(|| Err(self.restarted()))
    }

    /// Offers a produce to the queue and does what it asks: flush now or once the mailbox is
    /// drained (every produce already waiting shares the write and the sync), or wake up
    /// when a parked one may time out.
    fn produce(
        &mut self,
        batch: Produced,
        reply: ProduceReply,
        since: Option<Instant>,
        ctx: &mut Context<Self>,
    ) {
        let partition = match &self.slot {
            Slot::Open(p) => p,
            other => {
                let error = other.unavailable(&self.topic, self.partition);
                return match batch {
                    Produced::Records(_) => reply.answer(Err(error)),
                    Produced::Kafka(_) => reply.answer_kafka(Err(error)),
                };
            }
        };
        match self.produces.offer(partition, batch, reply, since) {
            Offered::Pending { flush_now: true } => self.flush(ctx),
            Offered::Pending { flush_now: false } => self.schedule_flush(ctx),
            Offered::Parked { wake_in } => {
                ctx.run_later(wake_in, |act, _| {
                    act.produces
                        .expire((&act.topic, act.partition), Instant::now())
                });
            }
            Offered::Answered => {}
        }
    }

    fn schedule_flush(&mut self, ctx: &mut Context<Self>) {
        if !self.flush_scheduled {
            self.flush_scheduled = true;
            ctx.notify(FlushAppends);
        }
    }

    /// Writes the group commit; wakes the long polls when records were written, restarts
    /// the actor after an I/O error (the file's state is then unknown: reload it).
    fn flush(&mut self, ctx: &mut Context<Self>) {
        let now = self.settings.clock.now_ms();
        let partition = match &mut self.slot {
            Slot::Open(p) => Ok(&mut **p),
            other => Err(other.unavailable(&self.topic, self.partition)),
        };
        let flushed = self.produces.flush(partition, now);
        self.after_write(flushed, ctx);
    }

    fn after_write(&mut self, written: Result<bool>, ctx: &mut Context<Self>) {
        self.record_write_metrics();
        match written {
            Ok(true) => self.wake_waiters(ctx),
            Ok(false) => {}
            Err(Error::Io { .. }) => ctx.stop(),
            Err(_) => {}
        }
    }

    /// When an append arrives: the blocking callers parked here in long polls are woken now,
    /// if the lane that sent it has not woken them yet, to be running by the time the write
    /// answers them (see [`ParkedPolls`]).
    fn wake_early(&mut self) {
        self.parked.fire();
    }

    /// The parked long polls, to answer them all: none is listed for an early wake-up any
    /// more.
    fn take_waiters(&mut self) -> Vec<Waiter> {
        self.parked.list([]);
        std::mem::take(&mut self.waiters)
    }

    /// Lists the early wake-ups of the polls parked now (the lane fires them).
    fn list_parked(&self) {
        let wakes = self.waiters.iter().filter_map(|waiter| match waiter {
            Waiter::Group(wait) if !wait.wake.is_canceled() => wait.early_wake.clone(),
            _ => None,
        });
        self.parked.list(wakes);
    }

    /// After a write: every parked long poll is answered, a group poll's with its fetch.
    fn wake_waiters(&mut self, ctx: &mut Context<Self>) {
        for waiter in self.take_waiters() {
            match waiter {
                Waiter::Append(tx) => drop(tx.send(Ok(()))),
                Waiter::Group(wait) if wait.wake.is_canceled() => {}
                Waiter::Group(wait) if wait.claimed.swap(true, Ordering::AcqRel) => {
                    let _ = wait.wake.send(Ok(None));
                }
                Waiter::Group(wait) => {
                    let fetched = self.serve_fetch(ctx, &wait.group, wait.from, wait.max_records);
                    let _ = wait.wake.send(fetched.map(Some));
                }
            }
        }
    }

    /// A fetch for `group` from `from` (`None`: its committed offset), counted in the
    /// metrics; one that returned records schedules the read ahead.
    fn serve_fetch(
        &mut self,
        ctx: &mut Context<Self>,
        group: &str,
        from: Option<u64>,
        max_records: usize,
    ) -> Result<Fetched> {
        let partition = self.open_partition()?;
        let fetched = partition.fetch(group, from, max_records)?;
        // A fetch at the log end (a consumer caught up) schedules nothing.
        let ahead = !fetched.is_empty() && partition.can_read_ahead();
        let bytes = fetched.records.batches().map(<[u8]>::len).sum();
        self.metrics.fetched(fetched.records.len() as u64, bytes);
        if ahead {
            self.read_ahead_later(ctx, max_records);
        }
        Ok(fetched)
    }

    /// After a write: the fsyncs it made (`FsyncPolicy::Always`), and the lag of the groups
    /// that have a gauge here, which every append moves.
    fn record_write_metrics(&mut self) {
        if let Slot::Open(p) = &mut self.slot {
            p.drain_sync_times(|took| self.metrics.fsync_took(took));
            self.lag.update_lags(|group| p.lag(group, true));
        }
    }

    /// Admits parked produces, oldest first, while there is room (after a commit or time
    /// retention freed some).
    fn admit_parked(&mut self, ctx: &mut Context<Self>) {
        let now = self.settings.clock.now_ms();
        let Slot::Open(p) = &mut self.slot else {
            return;
        };
        match self.produces.admit_parked(p, now) {
            Ok(true) => self.schedule_flush(ctx),
            Ok(false) => {}
            Err(e) => self.after_write(Err(e), ctx),
        }
    }
}

impl Actor for PartitionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        if let Slot::Deleted = self.slot {
            return;
        }
        if std::mem::take(&mut self.restart_pending) {
            self.schedule_reopen(ctx);
        } else {
            self.open(ctx);
        }
    }
}

impl Supervised for PartitionActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        // A restart cancels the context's timers (`started` makes new ones).
        self.timers.clear();
        if let Slot::Deleted = self.slot {
            return; // nothing to reopen: stay deleted
        }
        // Drop the files without a clean-shutdown checkpoint: the reopen validates them.
        self.slot = Slot::Opening;
        // A restart drops the context's queued items, the scheduled flush among them.
        self.flush_scheduled = false;
        let (topic, partition) = (self.topic.clone(), self.partition);
        self.produces.fail_all(|| Error::PartitionRestarted {
            topic: topic.clone(),
            partition,
        });
        // The long polls fetch once more (another partition may have data) and then report
        // the restart; merely waking them would park them again on the reopened partition
        // for the rest of their wait, since the first reopen is immediate.
        for waiter in self.take_waiters() {
            waiter.fail(self.restarted());
        }
        tracing::warn!(partition = %self.name(), restarts = self.restarts.total() + 1, "restarting; reloading from disk");
        crate::metrics::actor_restarted("partition");
        self.restart_pending = true;
    }
}

impl Handler<Append> for PartitionActor {
    type Result = ();

    fn handle(&mut self, msg: Append, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "Append").entered();
        self.wake_early();
        let name = self.name();
        guarded(self, ctx, &name, |act, ctx| {
            act.produce(
                Produced::Records(msg.batch),
                ProduceReply::Lane(msg.reply),
                msg.since,
                ctx,
            )
        });
    }
}

impl Handler<AppendKafka> for PartitionActor {
    type Result = ResponseFuture<Result<KafkaAppend>>;

    fn handle(&mut self, msg: AppendKafka, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "AppendKafka").entered();
        self.wake_early();
        let name = self.name();
        guarded_future(self, ctx, &name, |act, ctx| {
            let (tx, rx) = oneshot::channel();
            act.produce(
                Produced::Kafka(msg.batch),
                ProduceReply::Kafka(tx),
                None,
                ctx,
            );
            let restarted = act.restarted();
            Box::pin(async move { rx.await.unwrap_or(Err(restarted)) })
        })
    }
}

impl Handler<FlushAppends> for PartitionActor {
    type Result = ();

    fn handle(&mut self, _: FlushAppends, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "FlushAppends").entered();
        self.flush_scheduled = false;
        let name = self.name();
        guarded(self, ctx, &name, |act, ctx| act.flush(ctx));
    }
}

impl Handler<SyncFinished> for PartitionActor {
    type Result = ();

    fn handle(&mut self, _: SyncFinished, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "SyncFinished").entered();
        let name = self.name();
        guarded(self, ctx, &name, |act, ctx| act.collect_sync(ctx));
    }
}

impl PartitionActor {
    /// Reads ahead for the fetch after this one (`Partition::read_ahead`) once this fetch's
    /// answer is on its way: every task already woken on this thread runs first (the
    /// coordinator forwarding the answer to the poller among them), so the read takes only
    /// time the thread would spend idle, not the poller's.
    fn read_ahead_later(&mut self, ctx: &mut Context<Self>, max_records: usize) {
        let yielded = actix::fut::wrap_future::<_, Self>(actix_rt::task::yield_now());
        ctx.spawn(yielded.map(move |(), act, ctx| {
            let name = act.name();
            guarded(act, ctx, &name, |act, _| {
                if let Slot::Open(partition) = &mut act.slot {
                    partition.read_ahead(max_records);
                }
            });
        }));
    }
}

impl Handler<Fetch> for PartitionActor {
    type Result = Result<Fetched>;

    fn handle(&mut self, msg: Fetch, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Fetch").entered();
        let name = self.name();
        guarded(self, ctx, &name, |act, ctx| {
            act.serve_fetch(ctx, &msg.group, msg.from, msg.max_records)
        })
        .unwrap_or_else(|| Err(self.restarted()))
    }
}

impl Handler<WaitForData> for PartitionActor {
    type Result = ();

    fn handle(&mut self, msg: WaitForData, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "WaitForData").entered();
        let name = self.name();
        guarded(self, ctx, &name, |act, _| {
            let ready = match &act.slot {
                Slot::Open(p) => p.has_data_for(&msg.group, msg.from),
                _ => true, // let the poll fetch now and meet the error
            };
            if ready {
                // The poll fetches: no partition of it reads ahead of that.
                msg.claimed.store(true, Ordering::Release);
                let _ = msg.wake.send(Ok(None));
                return;
            }
            act.waiters.retain(|w| !w.is_canceled());
            let early = msg.early_wake.is_some();
            act.waiters.push(Waiter::Group(msg));
            if early {
                act.list_parked();
            }
        });
    }
}

/// The first offset whose record's timestamp is at least `timestamp_ms`. Sent by `TopicActor`
/// for an `OffsetForTimestamp`: reads the time and offset indexes, then the batch found;
/// segments older than the target are not read. Errors: `Corrupt`, `Io`,
/// `PartitionRestarted`, `PartitionFailed`.
#[derive(Debug)]
pub struct FindOffset {
    pub timestamp_ms: u64,
}
impl Message for FindOffset {
    type Result = Result<Option<u64>>;
}

impl Handler<FindOffset> for PartitionActor {
    type Result = Result<Option<u64>>;

    fn handle(&mut self, msg: FindOffset, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "FindOffset").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            act.open_partition()?.offset_for_timestamp(msg.timestamp_ms)
        })
    }
}

impl Handler<RegisterGroup> for PartitionActor {
    type Result = ();

    fn handle(&mut self, msg: RegisterGroup, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "RegisterGroup").entered();
        let name = self.name();
        guarded(self, ctx, &name, |act, _| {
            if let Slot::Open(p) = &mut act.slot {
                if let Err(e) = p.register_group(&msg.group, msg.start) {
                    tracing::warn!(group = %msg.group, error = %e, "cannot register group; retried on reopen");
                }
            }
            act.registered.insert(msg.group, msg.start);
        });
    }
}

impl Handler<DescribePartition> for PartitionActor {
    type Result = MessageResult<DescribePartition>;

    fn handle(&mut self, _: DescribePartition, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DescribePartition").entered();
        let mut stats = match &self.slot {
            Slot::Open(p) => p.stats(),
            _ => PartitionStats {
                partition: self.partition,
                failed: Some(self.unavailable().to_string()),
                ..PartitionStats::default()
            },
        };
        stats.restarts = self.restarts.total();
        stats.fsyncs = self.metrics.fsyncs();
        stats.parked_polls = self.waiters.iter().filter(|w| !w.is_canceled()).count();
        stats.parked_produces = self.produces.parked();
        MessageResult(stats)
    }
}

impl Handler<ClosePartition> for PartitionActor {
    type Result = Result<()>;

    fn handle(&mut self, _: ClosePartition, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ClosePartition").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, ctx| {
            // Produces accepted before the shutdown are written and acknowledged first.
            act.flush(ctx);
            act.produces.fail_all(|| Error::BrokerStopped);
            for waiter in act.take_waiters() {
                waiter.fail(Error::BrokerStopped);
            }
            match std::mem::replace(&mut act.slot, Slot::Closed) {
                Slot::Open(p) => p.close(),
                _ => Ok(()),
            }
        })
    }
}

impl Handler<Crash> for PartitionActor {
    type Result = Result<()>;

    fn handle(&mut self, _: Crash, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Crash").entered();
        let name = self.name();
        guarded(self, ctx, &name, |_, _| {
            panic!("injected fault (CrashPartition)")
        });
        Ok(())
    }
}
