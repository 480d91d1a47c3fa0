//! `GroupCoordinatorActor`: one consumer group of one topic. Owns a [`GroupState`]
//! (members, generation, assignment) and serves polls by fetching from the member's
//! partitions. Runs under a `Supervisor` on the broker's arbiter; a restart resets
//! memberships (members rejoin, their next call gets `UnknownMember`), committed offsets are
//! untouched (they live in the partitions).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::future::{select_all, FutureExt};

use super::partition::{CommitOffset, Fetch, PartitionActor, WaitForData};
use super::supervise::{guarded, RestartBudget};
use super::BrokerSettings;
use crate::error::{Error, Result};
use crate::group::{Assignment, Assignor, GroupOptions, GroupState};
use crate::partition::Fetched;
use crate::types::GroupStats;

/// Join (or heartbeat by joining again). Errors: `InvalidConfig` on an assignor mismatch.
#[derive(Debug)]
pub struct Join {
    pub member: String,
    pub options: GroupOptions,
}
impl Message for Join {
    type Result = Result<Assignment>;
}

/// Leave. Errors: `UnknownMember`.
#[derive(Debug)]
pub struct Leave {
    pub member: String,
}
impl Message for Leave {
    type Result = Result<()>;
}

/// Heartbeat. Errors: `UnknownMember`.
#[derive(Debug)]
pub struct Beat {
    pub member: String,
}
impl Message for Beat {
    type Result = Result<Assignment>;
}

/// Poll for `member`. Errors: `UnknownMember`, and the partitions' fetch errors.
#[derive(Debug)]
pub struct PollGroup {
    pub member: String,
    pub max_records: usize,
    pub wait: Option<Duration>,
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
/// resumes at the committed offsets); the reply carries the current assignment.
/// Errors: as `PollGroup`.
#[derive(Debug)]
pub struct ConsumerPollGroup {
    pub member: String,
    pub generation: u64,
    pub positions: BTreeMap<u32, u64>,
    pub max_records: usize,
    pub wait: Option<Duration>,
}
impl Message for ConsumerPollGroup {
    type Result = Result<FetchedBatch>;
}

/// The reply to [`ConsumerPollGroup`]: the member's current assignment and what the poll read.
#[derive(Debug)]
pub struct FetchedBatch {
    pub assignment: Assignment,
    pub fetched: Option<Fetched>,
}

/// A commit fenced by generation and ownership, then forwarded to the partition.
/// Errors: `UnknownMember`, `IllegalGeneration`, `PartitionNotAssigned`, and the partition's
/// commit errors.
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

/// Generation and assignment (the topic adds lag). Never fails.
#[derive(Debug)]
pub struct DescribeGroup;
impl Message for DescribeGroup {
    type Result = GroupStats;
}

/// Fault injection for tests: panic inside the handler.
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
    topic: String,
    group: String,
    state: GroupState,
    /// Fixed by the first join; later joins must agree.
    options: GroupOptions,
    partitions: Vec<Addr<PartitionActor>>,
    settings: Arc<BrokerSettings>,
    restarts: RestartBudget,
}

impl GroupCoordinatorActor {
    pub fn new(
        topic: &str,
        group: &str,
        options: GroupOptions,
        partitions: Vec<Addr<PartitionActor>>,
        settings: Arc<BrokerSettings>,
    ) -> Self {
        GroupCoordinatorActor {
            span: tracing::info_span!("group", topic = %topic, group = %group),
            topic: topic.to_owned(),
            group: group.to_owned(),
            state: Self::fresh_state(
                topic,
                group,
                options.assignor,
                partitions.len() as u32,
                &settings,
            ),
            options,
            partitions,
            settings,
            restarts: RestartBudget::default(),
        }
    }

    fn fresh_state(
        topic: &str,
        group: &str,
        assignor: Assignor,
        partitions: u32,
        settings: &BrokerSettings,
    ) -> GroupState {
        let timeout_ms = settings.session_timeout.as_millis() as u64;
        GroupState::new(topic, group, partitions, assignor, timeout_ms)
    }

    fn name(&self) -> String {
        format!("group {}/{}", self.topic, self.group)
    }

    fn now_ms(&self) -> u64 {
        self.settings.clock.now_ms()
    }
}

impl Actor for GroupCoordinatorActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        // Evict on a timer a few times per session timeout; every request also evicts first.
        let every = (self.settings.session_timeout / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        ctx.run_interval(every, |act, _| {
            let now = act.now_ms();
            act.state.evict_expired(now);
        });
    }
}

impl Supervised for GroupCoordinatorActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        self.restarts.record(Instant::now());
        let partitions = self.partitions.len() as u32;
        self.state = Self::fresh_state(
            &self.topic,
            &self.group,
            self.state.assignor(),
            partitions,
            &self.settings,
        );
        tracing::warn!(group = %self.name(), "coordinator restarted; members must rejoin");
    }
}

impl Handler<Join> for GroupCoordinatorActor {
    type Result = Result<Assignment>;

    fn handle(&mut self, msg: Join, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Join").entered();
        if msg.options != self.options {
            return Err(Error::InvalidConfig(format!(
                "group {:?} was created with {:?}, not {:?}",
                self.group, self.options, msg.options
            )));
        }
        let now = self.now_ms();
        Ok(self.state.join(&msg.member, now))
    }
}

impl Handler<Leave> for GroupCoordinatorActor {
    type Result = Result<()>;

    fn handle(&mut self, msg: Leave, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Leave").entered();
        let now = self.now_ms();
        self.state.leave(&msg.member, now)
    }
}

impl Handler<Beat> for GroupCoordinatorActor {
    type Result = Result<Assignment>;

    fn handle(&mut self, msg: Beat, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Beat").entered();
        let now = self.now_ms();
        self.state.heartbeat(&msg.member, now)
    }
}

impl Handler<PollGroup> for GroupCoordinatorActor {
    type Result = ResponseFuture<Result<Option<Fetched>>>;

    fn handle(&mut self, msg: PollGroup, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "PollGroup").entered();
        let now = self.now_ms();
        let order = match self.state.poll_order(&msg.member, now) {
            Ok(order) => order,
            Err(e) => return Box::pin(async { Err(e) }),
        };
        Box::pin(self.serve_poll(ctx, msg.member, &order, None, msg.max_records, msg.wait))
    }
}

impl Handler<PollServed> for GroupCoordinatorActor {
    type Result = ();

    fn handle(&mut self, msg: PollServed, _: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "PollServed").entered();
        self.state.served(&msg.member, msg.partition);
    }
}

impl GroupCoordinatorActor {
    /// A poll of `member`'s partitions in `order`, from `positions` where given (else the
    /// committed offsets). Once it is served, the member's next poll starts after the
    /// partition that answered (`PollServed`, sent before the reply, so it is handled first).
    fn serve_poll(
        &self,
        ctx: &mut Context<Self>,
        member: String,
        order: &[u32],
        positions: Option<&BTreeMap<u32, u64>>,
        max_records: usize,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<Option<Fetched>>> + 'static {
        let targets = order
            .iter()
            .map(|&p| {
                let from = positions.and_then(|ps| ps.get(&p).copied());
                (self.partitions[p as usize].clone(), from)
            })
            .collect();
        let deadline = wait.map(|w| Instant::now() + w);
        let (coordinator, group) = (ctx.address(), self.group.clone());
        async move {
            let fetched = poll_partitions(targets, group, max_records, deadline).await?;
            if let Some(fetched) = &fetched {
                coordinator.do_send(PollServed {
                    member,
                    partition: fetched.partition,
                });
            }
            Ok(fetched)
        }
    }
}

/// Fetches from `targets` in order and returns the first non-empty result (`None`: all were
/// empty); when all are
/// empty and a deadline is set, waits until one has data (woken by its produce) or the
/// deadline passes, then tries once more. A wait cut short by a partition restart is
/// reported (`PartitionRestarted`) after that last fetch finds nothing.
async fn poll_partitions(
    targets: Vec<(Addr<PartitionActor>, Option<u64>)>,
    group: String,
    max_records: usize,
    deadline: Option<Instant>,
) -> Result<Option<Fetched>> {
    let mut restarted = None;
    loop {
        // A partition that fails (restarting, corrupt) must not starve the others: its error
        // is returned only when no other partition has data.
        let mut first_error = None;
        for (partition, from) in &targets {
            let fetch = Fetch {
                group: group.clone(),
                from: *from,
                max_records,
            };
            match partition
                .send(fetch)
                .await
                .map_err(|_| Error::BrokerStopped)?
            {
                Ok(fetched) if !fetched.is_empty() => return Ok(Some(fetched)),
                Ok(_) => {}
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        if let Some(e) = first_error.or(restarted.take()) {
            return Err(e);
        }
        let remaining = match deadline {
            Some(d) if d > Instant::now() => d - Instant::now(),
            _ => return Ok(None),
        };
        if targets.is_empty() {
            actix_rt::time::sleep(remaining).await;
            return Ok(None);
        }
        let waits = targets.iter().map(|(partition, from)| {
            let wait = WaitForData {
                group: group.clone(),
                from: *from,
                wait: remaining,
            };
            let woken_by_error = |reply: Result<Result<()>, MailboxError>| reply.ok()?.err();
            partition.send(wait).map(woken_by_error).boxed_local()
        });
        (restarted, _, _) = select_all(waits).await;
    }
}

impl Handler<ConsumerPollGroup> for GroupCoordinatorActor {
    type Result = ResponseFuture<Result<FetchedBatch>>;

    fn handle(&mut self, msg: ConsumerPollGroup, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ConsumerPollGroup").entered();
        let now = self.now_ms();
        let (order, assignment) = match self
            .state
            .poll_order(&msg.member, now)
            .and_then(|order| Ok((order, self.state.heartbeat(&msg.member, now)?)))
        {
            Ok(found) => found,
            Err(e) => return Box::pin(async { Err(e) }),
        };
        // Positions from an older generation are stale: resume at the committed offsets.
        let positions = (msg.generation == assignment.generation).then_some(&msg.positions);
        let poll = self.serve_poll(
            ctx,
            msg.member,
            &order,
            positions,
            msg.max_records,
            msg.wait,
        );
        Box::pin(async move {
            Ok(FetchedBatch {
                assignment,
                fetched: poll.await?,
            })
        })
    }
}

impl Handler<CommitAsMember> for GroupCoordinatorActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: CommitAsMember, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CommitAsMember").entered();
        let now = self.now_ms();
        let fenced = self
            .state
            .check_fenced(&msg.member, msg.generation, Some(msg.partition), now);
        if let Err(e) = fenced {
            return Box::pin(async { Err(e) });
        }
        let partition = self.partitions[msg.partition as usize].clone();
        let commit = CommitOffset {
            group: self.group.clone(),
            offset: msg.offset,
        };
        Box::pin(async move {
            partition
                .send(commit)
                .await
                .map_err(|_| Error::BrokerStopped)?
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
