//! `GroupCoordinatorActor`: one consumer group of one topic. Owns a [`GroupState`]
//! (members, generation, assignment) and serves polls by fetching from the member's
//! partitions. Runs under a `Supervisor` on the I/O arbiter of its topic's first partition
//! (so a poll's fetches from partitions on that thread cross no thread, and a handle's poll
//! reaches it without waking the broker thread: [`CoordinatorRef`]); a restart resets
//! memberships (members rejoin, their next call gets `UnknownMember`), committed offsets are
//! untouched (they live in the partitions).
//!
//! # Polls
//! A poll ([`PollGroup`], [`ConsumerPollGroup`]) asks the member's partitions in round-robin
//! order for records ([`Fetch`]) and returns the first non-empty answer. If all are empty and
//! the poll may wait, it sends `WaitForData` to each and awaits the first to resolve, or the
//! group's next rebalance (the coordinator completes a oneshot per parked poll whenever its
//! generation changes). A partition woken by a write answers its parked wait with the poll's
//! fetch, read as it wakes it, which saves the poll a round trip per batch at low rates.
//! Woken while the group's generation (an atomic the coordinator shares with its polls) is
//! still the poll's, the poll returns those records (or, when there are none, fetches once
//! more at once); otherwise it first asks its coordinator to `Replan`, and records read in
//! the old generation are dropped (a fetch moves no offset) rather than returned, so no
//! record goes to two members of one generation. After a rebalance the poll reads only the
//! partitions its member owns now, from their committed offsets. No loop sleeps or polls on
//! a timer; the only timer is the poll's deadline (a wait too long for the clock, such as
//! `Duration::MAX`, has none). A partition that restarts answers its waits with
//! `PartitionRestarted`; the poll then fetches once more from the other partitions and
//! returns that error only if none has data.
//!
//! A push subscription's poll, and a `RecordStream`'s, save round trips at low rates, where
//! each record is a batch of its own: when the member's last poll found no backlog it sets
//! [`PollPause::wait_first`], so the poll sends the waits at once instead of fetching every
//! partition in turn first (a wait answers at once where data is); after a wait, a
//! subscription's poll fetches first the partition whose data ended it. Under a backlog (full
//! batches) they fetch first, as a `Consumer` does. A caught-up stream's poll also asks the
//! coordinator to send its next poll as it answers ([`Chain`]; see `chain.rs`). A poll
//! answered by one partition's wait leaves its waits at the others to its member's next
//! poll, which sends a wait only where none is left (see `waits.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::channel::oneshot;
use futures::future::{select, Either, FutureExt};

use super::io_thread::Rung;
use super::partition::{CommitOffset, Fetch, PartitionRef};
use super::supervise::{guarded, guarded_future, guarded_reply, RestartBudget};
use super::BrokerSettings;
use crate::error::{Error, Result};
use crate::group::{Assignment, Assignor, GroupOptions, GroupState};
use crate::partition::Fetched;
use crate::types::GroupStats;

mod alter;
mod attempts;
mod chain;
mod delete;
mod waits;
pub use alter::AddPartitions;
pub use attempts::{CommitAttempt, CommittedAttempts};
pub use chain::{Chain, NextPoll};
pub use delete::DeleteGroup;

/// A coordinator's address and its I/O thread (see [`Rung`]): a push subscription of the
/// group runs on that thread too.
pub type CoordinatorRef = Rung<GroupCoordinatorActor>;

/// Join (or heartbeat by joining again). Sent by `TopicActor`: for a `JoinGroup` (options
/// `Some`, `holding` `None`) or a `JoinAsKafkaMember` (options `None`: the group's own;
/// `holding` the partitions the Kafka client still holds). A new member makes a new
/// generation: parked polls wake and re-plan. Reply: the member's assignment.
/// Errors: `GroupOptionsMismatch` when `options` differ from the group's (nothing changed).
#[derive(Debug)]
pub struct Join {
    pub member: String,
    /// `None`: whatever options the group has (a Kafka client's member, which cannot know
    /// them).
    pub options: Option<GroupOptions>,
    /// `Some` for a Kafka client's member: the partitions its client still holds as it
    /// joins (see [`GroupState::join_kafka_member`]); `None` for a native member.
    pub holding: Option<BTreeSet<u32>>,
}
impl Message for Join {
    type Result = Result<Assignment>;
}

/// Leave (a rebalance). Sent by `TopicActor` for a `LeaveGroup` (also from a subscription
/// or a Kafka client's member leaving). Errors: `UnknownMember`.
#[derive(Debug)]
pub struct Leave {
    pub member: String,
}
impl Message for Leave {
    type Result = Result<()>;
}

/// Heartbeat. Sent by `TopicActor` for a `Heartbeat`. Reply: the member's current
/// assignment. Errors: `UnknownMember` (evicted, never joined, or the coordinator restarted:
/// join again).
#[derive(Debug)]
pub struct Beat {
    pub member: String,
}
impl Message for Beat {
    type Result = Result<Assignment>;
}

/// Poll for `member`. Sent by `TopicActor` (a `Poll` or `PollFetched`) or straight by a
/// handle that knows the group's `CoordinatorRef`. The poll runs as a future outside the
/// handler: `Fetch` to the member's partitions in round-robin order, the first non-empty
/// answer wins (`PollServed`); with `wait` and nothing to read, `WaitForData` to each and
/// the first write or rebalance ends the wait (see "Polls" in the module docs).
/// Errors: `UnknownMember`, and the partitions' fetch errors (`PartitionRestarted` only when
/// no other partition had data).
#[derive(Debug)]
pub struct PollGroup {
    pub member: String,
    pub max_records: usize,
    pub wait: Option<Duration>,
    /// Woken as soon as an append is sent to a partition of the poll while the poll waits
    /// (see [`PollPause::early_wake`]).
    pub early_wake: Option<Waker>,
}
impl Message for PollGroup {
    /// The records of the partition that had some, `None` when none had.
    type Result = Result<Option<Fetched>>;
}

/// `partition` answered `member`'s poll with records: its next poll starts after it.
/// Fire-and-forget, sent by the coordinator's own poll future once the fetch is done (the
/// poll runs outside the handler, so it cannot update the state itself).
#[derive(Debug)]
pub struct PollServed {
    pub member: String,
    pub partition: u32,
}
impl Message for PollServed {
    type Result = ();
}

/// Poll for a `Consumer` handle: like [`PollGroup`], but from the member's own positions
/// when it acts on the current generation (after a rebalance they are dropped and reading
/// resumes at the committed offsets); the reply carries the current assignment. The poll
/// is also the member's heartbeat. Sent by `TopicActor` (`ConsumerPoll`,
/// `ConsumerPollFetched`, `SubscriptionPoll`), or straight by a handle or a push
/// subscription that knows the group's `CoordinatorRef`.
/// Errors: as `PollGroup`.
#[derive(Debug)]
pub struct ConsumerPollGroup {
    pub member: String,
    pub generation: u64,
    pub positions: BTreeMap<u32, u64>,
    pub max_records: usize,
    pub wait: Option<Duration>,
    /// What a push subscription holds back (nothing for a `Consumer`).
    pub pause: PollPause,
    /// Whether the answer carries the member's next poll, sent already (a `RecordStream`'s;
    /// see [`Chain`]).
    pub chain: Chain,
}
impl Message for ConsumerPollGroup {
    type Result = Result<FetchedBatch>;
}

/// The partitions a push subscription holds back from a poll (their earlier records are
/// still with its subscriber, or waiting for a retry: reading them now would break their
/// order), and a signal that ends the poll's wait early, answered with no records (a held
/// partition was released: the subscription polls again with it). The signal fires when its
/// sender is used or dropped.
#[derive(Debug, Default)]
pub struct PollPause {
    pub partitions: BTreeSet<u32>,
    pub wake: Option<oneshot::Receiver<()>>,
    /// The member is caught up (its last poll found no backlog: a subscription's or a
    /// stream's): the poll waits for data first instead of fetching every partition first.
    /// A wait answers at once where data is, so nothing is missed, and a poll that finds
    /// nothing costs one parallel round of waits instead of a fetch of each partition in
    /// turn and then the waits.
    pub wait_first: bool,
    /// A blocking caller's thread, woken as soon as an append is sent to a partition the poll
    /// waits at (`lane::ParkedPolls`), before the append is written and the poll answered:
    /// the thread, which may take tens of microseconds to be scheduled on an idle core, wakes
    /// while the partition's thread wakes and writes, then spins the few microseconds until
    /// its answer (`wait::block_on_with`).
    pub early_wake: Option<Waker>,
}

/// The reply to [`ConsumerPollGroup`]: the member's current assignment and what the poll read.
#[derive(Debug)]
pub struct FetchedBatch {
    pub assignment: Assignment,
    pub fetched: Option<Fetched>,
    /// The group's generation as it moves on (`u64::MAX` once the coordinator restarted or
    /// its topic was deleted): whoever keeps this reply for later (a `Consumer`'s fetch
    /// ahead) checks that no rebalance has happened since, without asking the coordinator.
    pub generation_now: Arc<AtomicU64>,
    /// The member's next poll, when the poll asked to chain and this answer allows it.
    /// Boxed: a reader keeps this answer in its poll's future, which must stay small (see
    /// `consumer::poll_prepared`).
    pub next: Option<Box<NextPoll>>,
}

/// A commit fenced by generation and ownership, then forwarded to the partition
/// (`CommitOffset`). Sent by `TopicActor` for a `FencedCommit`, or straight by a push
/// subscription. Errors: `UnknownMember`, `IllegalGeneration`, `PartitionNotAssigned` (nothing
/// committed), and the partition's commit errors.
#[derive(Debug)]
pub struct CommitAsMember {
    pub member: String,
    pub generation: u64,
    pub partition: u32,
    pub offset: u64,
}
impl Message for CommitAsMember {
    type Result = Result<()>;
}

/// A long poll woke up (data, or a rebalance): is its plan still good? Sent by the poll's own
/// future to its coordinator. Reply: the new assignment and partition order when the group
/// rebalanced since `generation` (the poll then reads the new partitions from their
/// committed offsets), and the signal of the next rebalance to wait on.
/// Errors: `UnknownMember` (the member left or was evicted meanwhile).
#[derive(Debug)]
struct Replan {
    member: String,
    generation: u64,
}
impl Message for Replan {
    type Result = Result<(Option<Replanned>, Rebalanced)>;
}

/// A changed plan: the member's assignment, its partitions in poll order, and every
/// partition of the topic (a topic alter may have added some since the poll began).
type Replanned = (Assignment, Vec<u32>, Arc<[PartitionRef]>);

/// Resolves when the group rebalances (or its coordinator restarts).
type Rebalanced = oneshot::Receiver<()>;

/// Generation and assignment (the topic adds lag). Sent by `TopicActor` for `stats()`
/// (`DescribeTopic`) and for `DescribeGroups`. Never fails.
#[derive(Debug)]
pub struct DescribeGroup;
impl Message for DescribeGroup {
    type Result = GroupStats;
}

/// Fault injection for tests: panic inside the handler. Sent by `TopicActor`
/// (`CrashCoordinator`, behind the public `CrashGroupCoordinator`); the restart resets the
/// memberships.
#[derive(Debug)]
pub struct CrashGroup;
impl Message for CrashGroup {
    type Result = ();
}

/// See the module docs.
#[derive(Debug)]
pub struct GroupCoordinatorActor {
    /// Parent of every handler's span: names the actor in every event.
    span: tracing::Span,
    /// "group topic/group", for logs and errors (made once).
    label: Arc<str>,
    topic: String,
    /// Shared by the messages of every poll and commit (cloned per message).
    group: Arc<str>,
    state: GroupState,
    /// Fixed by the first join; later joins must agree.
    options: GroupOptions,
    /// Shared with every poll in flight (cloned per poll, so not a `Vec` of addresses).
    partitions: Arc<[PartitionRef]>,
    settings: Arc<BrokerSettings>,
    restarts: RestartBudget,
    /// Long polls waiting for the next rebalance (see [`GroupCoordinatorActor::with_state`]).
    rebalance_waiters: Vec<oneshot::Sender<()>>,
    /// The generation the waiters were last told about, also read by the polls in flight
    /// (a poll that fetched in a generation that has since ended does not return it).
    announced_generation: Arc<AtomicU64>,
    /// The topic was deleted (see [`DeleteGroup`]).
    deleted: bool,
    /// The eviction timer, cancelled by a delete.
    evict_timer: Option<SpawnHandle>,
    /// Per member, the waits its last poll left parked for its next (`waits.rs`); forgotten
    /// at every rebalance.
    kept_waits: HashMap<String, waits::KeptSlot>,
}

impl GroupCoordinatorActor {
    pub fn new(
        topic: &str,
        group: &str,
        options: GroupOptions,
        partitions: Vec<PartitionRef>,
        settings: Arc<BrokerSettings>,
    ) -> Self {
        GroupCoordinatorActor {
            span: tracing::info_span!("group", topic = %topic, group = %group),
            label: format!("group {topic}/{group}").into(),
            topic: topic.to_owned(),
            group: group.into(),
            state: Self::fresh_state(
                topic,
                group,
                options.assignor,
                partitions.len() as u32,
                &settings,
            ),
            options,
            partitions: partitions.into(),
            settings,
            restarts: RestartBudget::default(),
            rebalance_waiters: Vec::new(),
            announced_generation: Arc::new(AtomicU64::new(0)),
            deleted: false,
            evict_timer: None,
            kept_waits: HashMap::new(),
        }
    }

    fn fresh_state(
        topic: &str,
        group: &str,
        assignor: Assignor,
        partitions: u32,
        settings: &BrokerSettings,
    ) -> GroupState {
        // Saturates: `Duration::MAX` means members are never evicted for silence.
        let timeout_ms = u64::try_from(settings.session_timeout.as_millis()).unwrap_or(u64::MAX);
        GroupState::new(topic, group, partitions, assignor, timeout_ms)
    }

    fn name(&self) -> Arc<str> {
        self.label.clone()
    }

    fn now_ms(&self) -> u64 {
        self.settings.clock.now_ms()
    }

    /// Runs `change` on the group state at the current time, then wakes the long polls
    /// waiting for a rebalance if it rebalanced (a join, a leave, an eviction), so that they
    /// re-plan instead of serving partitions their member no longer owns.
    fn with_state<R>(&mut self, change: impl FnOnce(&mut GroupState, u64) -> R) -> R {
        let now = self.now_ms();
        let result = change(&mut self.state, now);
        self.announce_rebalance();
        result
    }

    fn announce_rebalance(&mut self) {
        let generation = self.state.generation();
        if self.announced_generation.swap(generation, Ordering::AcqRel) != generation {
            crate::metrics::group_rebalanced(&self.topic, &self.group);
            self.kept_waits.clear();
            for waiter in self.rebalance_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }

    /// `member`'s slot for the waits its polls leave to the next (`waits.rs`); its name is
    /// copied only the first time.
    fn kept_slot(&mut self, member: &str) -> waits::KeptSlot {
        if let Some(slot) = self.kept_waits.get(member) {
            return slot.clone();
        }
        let slot = waits::KeptSlot::default();
        self.kept_waits.insert(member.to_owned(), slot.clone());
        slot
    }

    /// A signal that resolves at the next rebalance.
    fn next_rebalance(&mut self) -> Rebalanced {
        self.rebalance_waiters.retain(|w| !w.is_canceled());
        let (tx, rx) = oneshot::channel();
        self.rebalance_waiters.push(tx);
        rx
    }
}

impl Actor for GroupCoordinatorActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        if self.deleted {
            return;
        }
        // Evict on a timer a few times per session timeout; every request also evicts first.
        let every = (self.settings.session_timeout / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        self.evict_timer = Some(ctx.run_interval(every, |act, _| {
            act.with_state(|state, now| state.evict_expired(now));
        }));
    }
}

impl Supervised for GroupCoordinatorActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        self.restarts.record(Instant::now());
        crate::metrics::actor_restarted("group");
        // A restart cancels the context's timers (`started` makes a new one).
        self.evict_timer = None;
        let partitions = self.partitions.len() as u32;
        self.state = Self::fresh_state(
            &self.topic,
            &self.group,
            self.state.assignor(),
            partitions,
            &self.settings,
        );
        // Parked polls re-plan and meet `UnknownMember`: their member must rejoin.
        self.announced_generation.store(u64::MAX, Ordering::Release);
        self.announce_rebalance();
        tracing::warn!(group = %self.name(), "coordinator restarted; members must rejoin");
    }
}

impl Handler<Join> for GroupCoordinatorActor {
    type Result = Result<Assignment>;

    fn handle(&mut self, msg: Join, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Join").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            match msg.options {
                Some(requested) if requested != act.options => {
                    return Err(Error::GroupOptionsMismatch {
                        topic: act.topic.clone(),
                        group: act.group.to_string(),
                        existing: act.options,
                        requested,
                    });
                }
                _ => {}
            }
            Ok(act.with_state(|state, now| match &msg.holding {
                Some(holding) => state.join_kafka_member(&msg.member, holding, now),
                None => state.join(&msg.member, now),
            }))
        })
    }
}

impl Handler<Leave> for GroupCoordinatorActor {
    type Result = Result<()>;

    fn handle(&mut self, msg: Leave, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Leave").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            act.with_state(|state, now| state.leave(&msg.member, now))
        })
    }
}

impl Handler<Beat> for GroupCoordinatorActor {
    type Result = Result<Assignment>;

    fn handle(&mut self, msg: Beat, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Beat").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            act.with_state(|state, now| state.heartbeat(&msg.member, now))
        })
    }
}

impl Handler<PollGroup> for GroupCoordinatorActor {
    type Result = ResponseFuture<Result<Option<Fetched>>>;

    fn handle(&mut self, msg: PollGroup, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "PollGroup").entered();
        let name = self.name();
        guarded_future(self, ctx, &name, |act, ctx| {
            let order = match act.with_state(|state, now| state.poll_order(&msg.member, now)) {
                Ok(order) => order,
                Err(e) => return Box::pin(async { Err(e) }),
            };
            let pause = PollPause {
                early_wake: msg.early_wake,
                ..PollPause::default()
            };
            let poll = act.serve_poll(
                ctx,
                msg.member,
                (&order, None, pause),
                msg.max_records,
                msg.wait,
            );
            Box::pin(poll.map(|answer| Ok(answer?.0)))
        })
    }
}

impl Handler<PollServed> for GroupCoordinatorActor {
    type Result = ();

    fn handle(&mut self, msg: PollServed, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "PollServed").entered();
        let name = self.name();
        guarded(self, ctx, &name, |act, _| {
            act.state.served(&msg.member, msg.partition)
        });
    }
}

impl Handler<Replan> for GroupCoordinatorActor {
    type Result = Result<(Option<Replanned>, Rebalanced)>;

    fn handle(&mut self, msg: Replan, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Replan").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            if act.deleted {
                return Err(Error::UnknownTopic {
                    topic: act.topic.clone(),
                });
            }
            let replanned = act.with_state(|state, now| {
                let order = state.poll_order(&msg.member, now)?;
                let assignment = state.heartbeat(&msg.member, now)?;
                Ok::<_, Error>(
                    (assignment.generation != msg.generation).then_some((assignment, order)),
                )
            })?;
            let replanned =
                replanned.map(|(assignment, order)| (assignment, order, act.partitions.clone()));
            Ok((replanned, act.next_rebalance()))
        })
    }
}

/// What a poll reads and where it waits; see [`poll_partitions`].
struct PollPlan {
    coordinator: Addr<GroupCoordinatorActor>,
    group: Arc<str>,
    member: String,
    /// Every partition of the topic, to re-target after a rebalance.
    partitions: Arc<[PartitionRef]>,
    /// The member's partitions in poll order, each with the reader's own position (`None`:
    /// the group's committed offset).
    targets: Vec<(u32, Option<u64>)>,
    /// The generation the targets belong to.
    generation: u64,
    /// The group's generation now (the coordinator's `announced_generation`).
    current: Arc<AtomicU64>,
    /// Resolves at the next rebalance after the plan was made; set for polls that may wait.
    rebalanced: Option<Rebalanced>,
    /// Partitions never read (see [`PollPause`]), also after a re-plan.
    paused: BTreeSet<u32>,
    /// Ends a wait early (see [`PollPause`]).
    wake: Option<oneshot::Receiver<()>>,
    /// Wait before the first fetch (see [`PollPause::wait_first`]).
    wait_first: bool,
    /// A push subscription's poll (it has a `wake`): after a wait, the partition whose data
    /// ended it is fetched first.
    subscription: bool,
    /// See [`PollPause::early_wake`].
    early_wake: Option<Waker>,
    /// Where the poll leaves its unanswered waits to its member's next poll, and takes over
    /// those of the last (`waits.rs`); `None` for a poll that does not wait.
    kept: Option<waits::KeptSlot>,
}

impl GroupCoordinatorActor {
    /// A poll of `member`'s partitions in `order`, from `positions` where given (else the
    /// committed offsets). Once it is served, the member's next poll starts after the
    /// partition that answered (`PollServed`, sent before the reply, so it is handled first).
    /// Resolves to what was read and, when the group rebalanced while the poll waited, the
    /// member's new assignment. Partitions in `pause` are not read.
    fn serve_poll(
        &mut self,
        ctx: &mut Context<Self>,
        member: String,
        (order, positions, pause): (&[u32], Option<&BTreeMap<u32, u64>>, PollPause),
        max_records: usize,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<(Option<Fetched>, Option<Assignment>)>> + 'static {
        let targets = order
            .iter()
            .filter(|p| !pause.partitions.contains(p))
            .map(|&p| (p, positions.and_then(|ps| ps.get(&p).copied())))
            .collect();
        // `None` inside: a wait too long to add to the clock, i.e. forever.
        let deadline = wait.map(|w| Instant::now().checked_add(w));
        let subscription = pause.wake.is_some();
        // A poll that wakes a blocking caller early keeps no waits (`waits.rs`).
        let may_keep = wait.is_some() && pause.early_wake.is_none();
        let kept = may_keep.then(|| self.kept_slot(&member));
        let plan = PollPlan {
            coordinator: ctx.address(),
            group: self.group.clone(),
            member,
            partitions: self.partitions.clone(),
            targets,
            generation: self.state.generation(),
            current: self.announced_generation.clone(),
            rebalanced: wait.map(|_| self.next_rebalance()),
            paused: pause.partitions,
            wake: pause.wake,
            wait_first: pause.wait_first && wait.is_some(),
            subscription,
            kept,
            early_wake: pause.early_wake,
        };
        poll_partitions(plan, max_records, deadline)
    }
}

/// Fetches from the plan's targets in order and returns the first non-empty result (`None`:
/// all were empty); when all are empty and a deadline is set, waits until one has data
/// (woken by its produce), the group rebalances, or the deadline passes, then re-plans and
/// tries again. Records read in a generation that has since ended are not returned: after a
/// rebalance the poll re-plans (the member's new partitions, from their committed offsets;
/// a fetch moves no offset, so nothing is lost). A wait cut short by a partition restart is
/// reported (`PartitionRestarted`) after the next fetch finds nothing.
async fn poll_partitions(
    mut plan: PollPlan,
    max_records: usize,
    deadline: Option<Option<Instant>>,
) -> Result<(Option<Fetched>, Option<Assignment>)> {
    let mut restarted = None;
    let mut replanned = None;
    // The target whose wait ended the last wait (a subscription's poll fetches it first).
    let mut woken_target = None;
    'fetch: loop {
        // A partition that fails (restarting, corrupt) must not starve the others: its error
        // is returned only when no other partition has data.
        let mut first_error = None;
        for k in plan.fetch_order(woken_target.take()) {
            let (p, from) = plan.targets[k];
            let fetch = Fetch {
                group: plan.group.clone(),
                from,
                max_records,
            };
            match plan.partitions[p as usize]
                .send(fetch)
                .await
                .map_err(|_| Error::BrokerStopped)?
            {
                Ok(fetched) if !fetched.is_empty() => {
                    if plan.rebalance_seen() {
                        plan.replan(&mut replanned).await?;
                        continue 'fetch;
                    }
                    return Ok(plan.served(fetched, replanned));
                }
                Ok(_) => {}
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        if let Some(e) = first_error.or(restarted.take()) {
            return Err(e);
        }
        let remaining = match deadline {
            None => return Ok((None, replanned)),
            Some(None) => Duration::MAX,
            Some(Some(d)) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left,
                _ => return Ok((None, replanned)),
            },
        };
        let mut round = plan.wait_round(max_records);
        let rebalanced = match plan.rebalanced.as_mut() {
            Some(signal) => signal.map(drop).boxed_local(),
            None => futures::future::pending().boxed_local(),
        };
        let woken = match plan.wake.as_mut() {
            Some(wake) => wake.map(drop).boxed_local(),
            None => futures::future::pending().boxed_local(),
        };
        let rebalanced = select(rebalanced, woken).map(|either| match either {
            Either::Left(_) => false,
            Either::Right(_) => true,
        });
        let data = round.first_answer();
        let answered = match actix_rt::time::timeout(remaining, select(data, rebalanced)).await {
            Ok(Either::Left(((woken, index), _))) => Some((woken, index)),
            Ok(Either::Right((false, _))) => None,
            // The subscription released a held partition: it polls again with it.
            Ok(Either::Right((true, _))) => return Ok((None, replanned)),
            Err(_deadline) => return Ok((None, replanned)),
        };
        let woken_by_data = answered.map(|(woken, index)| {
            woken_target = Some(index);
            plan.keep(round, index, max_records);
            match woken {
                Woken::Data(fetched) => fetched,
                Woken::Error(e) => {
                    restarted = Some(e);
                    None
                }
            }
        });
        // Woken by a partition while the group's generation is still the plan's: the plan
        // holds (the poll was the member's sign of life, and a rebalance since would show in
        // the generation), so return what the write's wake-up read, or fetch without asking
        // the coordinator.
        if let Some(fetched) = woken_by_data.filter(|_| !plan.rebalance_seen()) {
            match fetched.filter(|f| !f.is_empty()) {
                Some(fetched) => return Ok(plan.served(fetched, replanned)),
                None => continue,
            }
        }
        let generation = plan.generation;
        plan.replan(&mut replanned).await?;
        if plan.generation != generation {
            // Other targets now: the index names none of them.
            woken_target = None;
        }
    }
}

/// How a partition ended a poll's wait (see [`super::partition::WaitForData`]).
enum Woken {
    /// It has data: read by the write that woke the poll, or `None` (to fetch).
    Data(Option<Fetched>),
    /// It restarted or closed, or the fetch failed: reported if no partition has data.
    Error(Error),
}

impl PollPlan {
    /// The poll's answer with `fetched`; the member's next poll starts after its partition
    /// (`PollServed`, sent before the reply, so it is handled first).
    fn served(
        self,
        fetched: Fetched,
        replanned: Option<Assignment>,
    ) -> (Option<Fetched>, Option<Assignment>) {
        self.coordinator.do_send(PollServed {
            member: self.member,
            partition: fetched.partition,
        });
        (Some(fetched), replanned)
    }

    /// The indexes of `targets` to fetch from, in order: none for a poll that waits first
    /// (once: a caught-up subscription's or stream's); for a subscription's, the target
    /// `woken` by data first, then the others in order (a fetch of each before it would find
    /// nothing at low rates); otherwise all in order.
    fn fetch_order(&mut self, woken: Option<usize>) -> impl Iterator<Item = usize> {
        let n = match std::mem::take(&mut self.wait_first) {
            true => 0,
            false => self.targets.len(),
        };
        let first = woken.filter(|&k| self.subscription && k < n);
        first
            .into_iter()
            .chain((0..n).filter(move |&k| Some(k) != first))
    }

    /// Whether the group rebalanced since the plan was made.
    fn rebalance_seen(&self) -> bool {
        self.current.load(Ordering::Acquire) != self.generation
    }

    /// Asks the coordinator whether the plan still holds; after a rebalance, re-targets the
    /// member's new partitions from their committed offsets (positions belong to the old
    /// generation) and records the new assignment in `replanned`.
    async fn replan(&mut self, replanned: &mut Option<Assignment>) -> Result<()> {
        let replan = Replan {
            member: self.member.clone(),
            generation: self.generation,
        };
        let (changed, next) = self
            .coordinator
            .send(replan)
            .await
            .map_err(|_| Error::BrokerStopped)??;
        self.rebalanced = Some(next);
        if let Some((assignment, order, partitions)) = changed {
            self.partitions = partitions;
            let paused = &self.paused;
            self.targets = order
                .into_iter()
                .filter(|p| !paused.contains(p))
                .map(|p| (p, None))
                .collect();
            self.generation = assignment.generation;
            *replanned = Some(assignment);
        }
        Ok(())
    }
}

impl Handler<ConsumerPollGroup> for GroupCoordinatorActor {
    type Result = ResponseFuture<Result<FetchedBatch>>;

    fn handle(&mut self, msg: ConsumerPollGroup, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ConsumerPollGroup").entered();
        let name = self.name();
        guarded_future(self, ctx, &name, |act, ctx| {
            let planned = act.with_state(|state, now| {
                let order = state.poll_order(&msg.member, now)?;
                Ok::<_, Error>((order, state.heartbeat(&msg.member, now)?))
            });
            let (order, assignment) = match planned {
                Ok(found) => found,
                Err(e) => return Box::pin(async { Err(e) }),
            };
            let chainer = chain::Chainer::for_poll(&msg, ctx.address());
            // Positions from an older generation are stale: resume at the committed offsets.
            let positions = (msg.generation == assignment.generation).then_some(&msg.positions);
            let poll = act.serve_poll(
                ctx,
                msg.member,
                (&order, positions, msg.pause),
                msg.max_records,
                msg.wait,
            );
            let generation_now = act.announced_generation.clone();
            // Combinators, not `async` blocks: each would hold the poll's future twice.
            Box::pin(poll.map(|answer| {
                let (fetched, replanned) = answer?;
                let mut batch = FetchedBatch {
                    assignment: replanned.unwrap_or(assignment),
                    fetched,
                    generation_now,
                    next: None,
                };
                batch.next = chainer.and_then(|chainer| chainer.next_after(&batch));
                Ok(batch)
            }))
        })
    }
}

impl Handler<CommitAsMember> for GroupCoordinatorActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: CommitAsMember, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CommitAsMember").entered();
        let name = self.name();
        guarded_future(self, ctx, &name, |act, _| {
            let fenced = act.with_state(|state, now| {
                state.check_fenced(&msg.member, msg.generation, Some(msg.partition), now)
            });
            if let Err(e) = fenced {
                return Box::pin(async { Err(e) });
            }
            let partition = act.partitions[msg.partition as usize].clone();
            let commit = CommitOffset {
                group: act.group.clone(),
                offset: msg.offset,
            };
            Box::pin(async move {
                partition
                    .send(commit)
                    .await
                    .map_err(|_| Error::BrokerStopped)?
            })
        })
    }
}

impl Handler<DescribeGroup> for GroupCoordinatorActor {
    type Result = MessageResult<DescribeGroup>;

    fn handle(&mut self, _: DescribeGroup, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DescribeGroup").entered();
        MessageResult(GroupStats {
            generation: self.state.generation(),
            assignment: self.state.assignment().clone(),
            lag: Default::default(),
            restarts: self.restarts.total(),
        })
    }
}

impl Handler<CrashGroup> for GroupCoordinatorActor {
    type Result = ();

    fn handle(&mut self, _: CrashGroup, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "CrashGroup").entered();
        let name = self.name();
        guarded(self, ctx, &name, |_, _| {
            panic!("injected fault (CrashGroup)")
        });
    }
}
