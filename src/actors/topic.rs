//! `TopicActor`: one topic. Starts its `PartitionActor`s (spread over the I/O arbiters) and,
//! on first join, one `GroupCoordinatorActor` per group; routes every topic message to them.
//! Runs under a `Supervisor`: a panic in a handler is caught and the actor restarted with
//! the same state (its children's addresses and the round-robin counter), so nothing is
//! lost and queued requests are served after the restart.

mod wire;
mod wire_groups;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use actix::prelude::*;
use futures::future::join_all;
use futures::FutureExt;

use super::coordinator::{
    Beat, Chain, CommitAsMember, ConsumerPollGroup, CoordinatorRef, CrashGroup, DescribeGroup,
    FetchedBatch, GroupCoordinatorActor, Join, Leave, PollGroup, PollPause,
};
use super::io_thread::IoThreadHandle;
use super::lane::{append_routed, Lane, ParkedPolls, Placed};
use super::partition::{
    AppendKafka, ClosePartition, CommitOffset, Crash, DeleteRecordsBefore, DescribePartition,
    FindOffset, GroupLag, PartitionActor, PartitionRef, RegisterGroup,
};
use super::supervise::{guarded, guarded_future};
use super::{BrokerSettings, MAILBOX_CAPACITY};
use crate::config::validate_id;
use crate::config::{CleanupPolicy, SchemaValidation, TopicConfig};
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions};
use crate::messages::{
    Commit, ConsumerPoll, CrashPartition, CrashTopic, DeleteRecords, FencedCommit, Heartbeat,
    JoinGroup, KafkaAppend, Lag, LeaveGroup, OffsetForTimestamp, Poll, Produce, ProduceBatch,
    ProduceKafkaBatch,
};
use crate::partition::{lag, Fetched};
use crate::routing::{check_keys, route, RequestLimits};
use crate::storage::RecordBatch;
use crate::types::{ConsumerBatch, Delivery, Record, TopicStats};
pub use wire_groups::{CommittedOffsets, DescribeGroups, JoinAsKafkaMember, SetCommittedOffset};

mod alter;
mod delete;
mod forget;
mod reset;
pub use alter::AlterTopicActors;
pub use delete::DeleteTopicActors;

/// Everything about the topic, for `stats()`: `DescribePartition` to every partition and
/// `DescribeGroup` to every coordinator, lag added from the partitions' committed offsets.
/// Sent by the `BrokerActor` for a `GetStats`. Never fails (an actor that does not answer
/// is left out).
#[derive(Debug)]
pub struct DescribeTopic;
impl Message for DescribeTopic {
    type Result = TopicStats;
}

/// Clean shutdown of every partition (`ClosePartition` to each, all closed even when one
/// fails). Sent by the `BrokerActor` for a `Shutdown`. Errors: the first partition's close
/// error.
#[derive(Debug)]
pub struct CloseTopic;
impl Message for CloseTopic {
    type Result = Result<()>;
}

/// Fault injection for tests: crash a group's coordinator (`CrashGroup`). Sent by the
/// `BrokerActor` for a `CrashGroupCoordinator`. Errors: `UnknownGroup`.
#[derive(Debug)]
pub struct CrashCoordinator {
    pub group: String,
}
impl Message for CrashCoordinator {
    type Result = Result<()>;
}

/// See the module docs.
#[derive(Debug)]
pub struct TopicActor {
    /// Parent of every handler's span: names the actor in every event.
    span: tracing::Span,
    name: String,
    /// "topic <name>", for logs and errors (made once).
    label: Arc<str>,
    settings: Arc<BrokerSettings>,
    partitions: Vec<PartitionRef>,
    /// Each partition's produce lane, shared with the handles (see [`super::lane`]).
    lanes: Vec<Arc<Lane>>,
    groups: BTreeMap<String, CoordinatorRef>,
    /// Next partition for a keyless record.
    next_partition: u32,
    restarts: u64,
    /// Set when the topic is deleted, grows or changes its cleanup policy; shared with the
    /// handles' cached produce routes, which then stop using them (see
    /// [`TopicRoute::stale`]).
    stale: Arc<AtomicBool>,
    /// The topic's cleanup policy: a compacted topic refuses a batch with a keyless record
    /// before it is split (see [`crate::routing::check_keys`]).
    cleanup_policy: CleanupPolicy,
    /// Whether records from Kafka clients are checked against the schema registry (keys,
    /// values), as the topic's config says: read by the listener from a cached route.
    schema_validation: SchemaValidation,
    /// Where new partitions are placed, as at creation (see [`TopicActor::new`]).
    io_threads: Vec<IoThreadHandle>,
    first_arbiter: usize,
}

impl TopicActor {
    /// Starts the topic's partition actors, partition `p` on arbiter `(first_arbiter + p) % n`.
    pub fn new(
        name: &str,
        config: &TopicConfig,
        settings: Arc<BrokerSettings>,
        io_threads: &[IoThreadHandle],
        first_arbiter: usize,
    ) -> Self {
        let mut topic = TopicActor {
            span: tracing::info_span!("topic", topic = %name),
            name: name.to_owned(),
            label: format!("topic {name}").into(),
            settings,
            partitions: Vec::new(),
            lanes: Vec::new(),
            groups: BTreeMap::new(),
            next_partition: 0,
            restarts: 0,
            stale: Arc::default(),
            cleanup_policy: config.cleanup_policy,
            schema_validation: SchemaValidation::of(config),
            io_threads: io_threads.to_vec(),
            first_arbiter,
        };
        topic.start_partitions(config);
        topic
    }

    /// Starts the partitions `config` has beyond those running (all, at first), each with
    /// its produce lane.
    fn start_partitions(&mut self, config: &TopicConfig) {
        let shared_name: Arc<str> = self.name.as_str().into();
        for p in self.partitions.len() as u32..config.partitions {
            let io = &self.io_threads[(self.first_arbiter + p as usize) % self.io_threads.len()];
            let (name, config, settings) =
                (self.name.clone(), config.clone(), self.settings.clone());
            let parked = Arc::new(ParkedPolls::default());
            let partition_parked = parked.clone();
            let addr = Supervisor::start_in_arbiter(&io.arbiter, move |ctx| {
                ctx.set_mailbox_capacity(MAILBOX_CAPACITY);
                PartitionActor::new(&name, p, &config, settings, partition_parked)
            });
            let partition = PartitionRef::new(addr, io.clone());
            let (addr, doorbell) = partition.lane_target();
            let lane = Lane::new(shared_name.clone(), p, addr, doorbell, parked);
            self.lanes.push(Arc::new(lane));
            self.partitions.push(partition);
        }
    }

    fn partition(&self, partition: u32) -> Result<&PartitionRef> {
        self.partitions
            .get(partition as usize)
            .ok_or_else(|| Error::UnknownPartition {
                topic: self.name.clone(),
                partition,
            })
    }

    fn group(&self, group: &str) -> Result<&CoordinatorRef> {
        self.groups.get(group).ok_or_else(|| Error::UnknownGroup {
            topic: self.name.clone(),
            group: group.to_owned(),
        })
    }

    /// `group`'s coordinator, started with `options` (and registered with every partition)
    /// when the group is new, on the I/O thread of the topic's first partition.
    fn coordinator(&mut self, group: &str, options: GroupOptions) -> CoordinatorRef {
        if let Some(coordinator) = self.groups.get(group) {
            return coordinator.clone();
        }
        let io = &self.io_threads[self.first_arbiter % self.io_threads.len()];
        let (topic, name, partitions, settings) = (
            self.name.clone(),
            group.to_owned(),
            self.partitions.clone(),
            self.settings.clone(),
        );
        let addr = Supervisor::start_in_arbiter(
            &io.arbiter,
            move |ctx: &mut Context<GroupCoordinatorActor>| {
                ctx.set_mailbox_capacity(MAILBOX_CAPACITY);
                GroupCoordinatorActor::new(&topic, &name, options, partitions, settings)
            },
        );
        let coordinator = CoordinatorRef::new(addr, io.clone());
        for partition in &self.partitions {
            partition.do_send(RegisterGroup {
                group: group.to_owned(),
                start: options.start,
            });
        }
        self.groups.insert(group.to_owned(), coordinator.clone());
        coordinator
    }

    /// For member-scoped requests, a group that does not exist means "not a member".
    fn member_group(&self, group: &str, member: &str) -> Result<&CoordinatorRef> {
        self.groups.get(group).ok_or_else(|| Error::UnknownMember {
            topic: self.name.clone(),
            group: group.to_owned(),
            member: member.to_owned(),
        })
    }

    /// Routes a batch and sends it to its partitions (see [`append_routed`]).
    fn produce(
        &mut self,
        partition: Option<u32>,
        batch: RecordBatch,
    ) -> ResponseFuture<Result<Vec<Delivery>>> {
        let limits = (self.partitions.len() as u32, self.settings.limits());
        let next = &mut self.next_partition;
        let next_keyless = || {
            *next = next.wrapping_add(1);
            next.wrapping_sub(1)
        };
        let routed = check_keys((&self.name, partition), self.cleanup_policy, &batch)
            .and_then(|()| route(&self.name, limits, partition, &batch, next_keyless));
        match routed {
            Ok(routes) => Box::pin(
                append_routed(&self.lanes, batch, routes)
                    .map(|placed| placed.map(Placed::into_deliveries)),
            ),
            Err(e) => Box::pin(async { Err(e) }),
        }
    }
}

/// The addresses of a topic's partition actors, for the handles' direct produce route, and
/// where its round-robin stands (so a handle continues the rotation). Sent to the broker by
/// the handles once they know the topic exists (it existed at open, or they created it) and
/// after a produce that went through the broker (no route known, or a stale one); answered
/// by the topic. The handle keeps the reply until its `stale` flag is set. Errors:
/// `UnknownTopic`.
#[derive(Debug)]
pub struct GetRoute {
    pub topic: String,
}

/// The reply to [`GetRoute`].
#[derive(Debug)]
pub struct TopicRoute {
    /// One per partition.
    pub lanes: Vec<Arc<Lane>>,
    /// One per partition: where a handle sends a commit for a group it knows exists here
    /// (groups are never removed from a live topic, so `stale` covers them too).
    pub partitions: Vec<PartitionRef>,
    pub next_keyless: u32,
    /// The broker's size limits, checked before a batch is split.
    pub limits: RequestLimits,
    /// The topic's cleanup policy, whose key rule is checked before a batch is split.
    pub cleanup_policy: CleanupPolicy,
    /// Whether the listener checks this topic's records against the schema registry.
    pub schema_validation: SchemaValidation,
    /// Set once the topic is deleted, before its partitions close, once it has grown, or
    /// once its cleanup policy or schema validation changed: a handle that finds it set
    /// forgets the route and asks the broker again (the topic may have been re-created, or
    /// have more partitions, or another key rule).
    pub stale: Arc<AtomicBool>,
}

impl Message for GetRoute {
    type Result = Result<TopicRoute>;
}
impl crate::messages::TopicMessage for GetRoute {
    type Reply = TopicRoute;
    fn topic(&self) -> &str {
        &self.topic
    }
}

impl Handler<GetRoute> for TopicActor {
    type Result = Result<TopicRoute>;

    fn handle(&mut self, _: GetRoute, _: &mut Context<Self>) -> Self::Result {
        Ok(TopicRoute {
            lanes: self.lanes.clone(),
            partitions: self.partitions.clone(),
            limits: self.settings.limits(),
            cleanup_policy: self.cleanup_policy,
            schema_validation: self.schema_validation,
            next_keyless: self.next_partition,
            stale: self.stale.clone(),
        })
    }
}

/// A group's coordinator, for the handles' direct poll route (a handle that knows it polls the
/// coordinator without waking the broker thread; see `actors.md`). Sent to the broker,
/// answered by the topic: by a handle once a poll or commit of the group through the broker
/// answered `Ok` (it keeps the reply in the topic's route; one learned after the topic was
/// deleted and re-created is not kept), and by `Subscribe` for its subscription's actor.
/// Errors: `UnknownTopic`, `UnknownGroup`.
#[derive(Debug)]
pub struct GetGroupRoute {
    pub topic: String,
    pub group: String,
}

impl Message for GetGroupRoute {
    type Result = Result<CoordinatorRef>;
}
impl crate::messages::TopicMessage for GetGroupRoute {
    type Reply = CoordinatorRef;
    fn topic(&self) -> &str {
        &self.topic
    }
}

impl Handler<GetGroupRoute> for TopicActor {
    type Result = Result<CoordinatorRef>;

    fn handle(&mut self, msg: GetGroupRoute, _: &mut Context<Self>) -> Self::Result {
        self.group(&msg.group).cloned()
    }
}

impl Actor for TopicActor {
    type Context = Context<Self>;
}

impl Supervised for TopicActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        self.restarts += 1;
        tracing::warn!(restarts = self.restarts, "topic actor restarted");
        crate::metrics::actor_restarted("topic");
    }
}

impl Handler<CrashTopic> for TopicActor {
    type Result = Result<()>;

    fn handle(&mut self, _: CrashTopic, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CrashTopic").entered();
        let name = self.label.clone();
        guarded(self, ctx, &name, |_, _| {
            panic!("injected fault (CrashTopic)")
        });
        Ok(())
    }
}

/// Sends `msg` and flattens a mailbox error into `BrokerStopped`.
async fn ask<A, M, T>(addr: Addr<A>, msg: M) -> Result<T>
where
    A: Handler<M>,
    A::Context: actix::dev::ToEnvelope<A, M>,
    M: Message<Result = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    addr.send(msg).await.map_err(|_| Error::BrokerStopped)?
}

impl Handler<Produce> for TopicActor {
    type Result = ResponseFuture<Result<Vec<Delivery>>>;

    fn handle(&mut self, msg: Produce, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Produce").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            act.produce(msg.partition, RecordBatch::from(&msg.records[..]))
        })
    }
}

impl Handler<ProduceBatch> for TopicActor {
    type Result = ResponseFuture<Result<Vec<Delivery>>>;

    fn handle(&mut self, msg: ProduceBatch, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ProduceBatch").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            act.produce(msg.partition, msg.batch)
        })
    }
}

impl Handler<JoinGroup> for TopicActor {
    type Result = ResponseFuture<Result<Assignment>>;

    fn handle(&mut self, msg: JoinGroup, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "JoinGroup").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            let join = Join {
                member: msg.member,
                options: Some(msg.options),
                holding: None,
            };
            act.join_coordinator(&msg.group, msg.options, join)
        })
    }
}

impl TopicActor {
    /// Checks the group and member ids, then sends `join` to the group's coordinator
    /// (started with `options` on the group's first join). Native and Kafka members' joins
    /// alike.
    fn join_coordinator(
        &mut self,
        group: &str,
        options: GroupOptions,
        join: Join,
    ) -> ResponseFuture<Result<Assignment>> {
        if let Err(e) =
            validate_id("group", group).and_then(|()| validate_id("member", &join.member))
        {
            return Box::pin(async { Err(e) });
        }
        Box::pin(self.coordinator(group, options).ask(join))
    }
}

impl Handler<LeaveGroup> for TopicActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: LeaveGroup, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "LeaveGroup").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.member_group(&msg.group, &msg.member) {
                Ok(addr) => Box::pin(addr.ask(Leave { member: msg.member })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<Heartbeat> for TopicActor {
    type Result = ResponseFuture<Result<Assignment>>;

    fn handle(&mut self, msg: Heartbeat, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Heartbeat").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.member_group(&msg.group, &msg.member) {
                Ok(addr) => Box::pin(addr.ask(Beat { member: msg.member })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

/// [`Poll`] for the handles: the reply is what the poll read, in its buffer, which the caller
/// copies or decodes on its own thread (the public `Poll` copies the records out in this
/// actor). Sent to the broker by a handle that has no coordinator route for the group yet;
/// answered by the topic through coordinator `PollGroup`. Errors: as [`Poll`].
#[derive(Debug)]
pub struct PollFetched(pub Poll);
impl Message for PollFetched {
    type Result = Result<Option<Fetched>>;
}
impl crate::messages::TopicMessage for PollFetched {
    type Reply = Option<Fetched>;
    fn topic(&self) -> &str {
        &self.0.topic
    }
}

/// [`ConsumerPoll`] for the handles (a `Consumer<T>` decodes straight from the buffer),
/// answered as [`PollFetched`] is, through coordinator `ConsumerPollGroup`. Errors: as
/// [`ConsumerPoll`].
#[derive(Debug)]
pub struct ConsumerPollFetched(pub ConsumerPoll);
impl Message for ConsumerPollFetched {
    type Result = Result<FetchedBatch>;
}
impl crate::messages::TopicMessage for ConsumerPollFetched {
    type Reply = FetchedBatch;
    fn topic(&self) -> &str {
        &self.0.topic
    }
}

/// A push subscription's poll: [`ConsumerPoll`] that skips the partitions in `pause` and
/// whose wait its `wake` cuts short (see [`PollPause`]). Answered as [`ConsumerPollFetched`].
/// Sent to the broker by a `SubscriptionActor` only when it has no coordinator address (the
/// coordinator is gone): otherwise it sends `ConsumerPollGroup` to the coordinator directly.
/// The broker's answer (`UnknownTopic`, `UnknownGroup`, `UnknownMember`) names why.
#[derive(Debug)]
pub struct SubscriptionPoll {
    pub poll: ConsumerPoll,
    pub pause: PollPause,
}
impl Message for SubscriptionPoll {
    type Result = Result<FetchedBatch>;
}
impl crate::messages::TopicMessage for SubscriptionPoll {
    type Reply = FetchedBatch;
    fn topic(&self) -> &str {
        &self.poll.topic
    }
}

/// `max_records` of a poll must be at least 1.
pub(crate) fn check_max_records(max_records: usize) -> Result<()> {
    match max_records {
        0 => Err(Error::InvalidArgument {
            name: "max_records",
            reason: "must be at least 1".into(),
        }),
        _ => Ok(()),
    }
}

impl TopicActor {
    /// Hands a poll to its group's coordinator.
    fn poll_group(&self, msg: Poll) -> ResponseFuture<Result<Option<Fetched>>> {
        let coordinator = check_max_records(msg.max_records)
            .and_then(|()| self.member_group(&msg.group, &msg.member));
        match coordinator {
            Ok(addr) => Box::pin(addr.ask(PollGroup {
                member: msg.member,
                max_records: msg.max_records,
                wait: msg.wait,
                // Routed through the broker: a first poll, or one after a topic was recreated.
                early_wake: None,
            })),
            Err(e) => Box::pin(async { Err(e) }),
        }
    }

    /// Hands a consumer's poll to its group's coordinator.
    fn consumer_poll_group(
        &self,
        msg: ConsumerPoll,
        pause: PollPause,
    ) -> ResponseFuture<Result<FetchedBatch>> {
        let coordinator = check_max_records(msg.max_records)
            .and_then(|()| self.member_group(&msg.group, &msg.member));
        match coordinator {
            Ok(addr) => Box::pin(addr.ask(ConsumerPollGroup {
                member: msg.member,
                generation: msg.generation,
                positions: msg.positions,
                max_records: msg.max_records,
                wait: msg.wait,
                pause,
                chain: Chain::Off,
            })),
            Err(e) => Box::pin(async { Err(e) }),
        }
    }
}

/// The actor face's poll: the records are copied out here.
impl Handler<Poll> for TopicActor {
    type Result = ResponseFuture<Result<Vec<Record<Vec<u8>>>>>;

    fn handle(&mut self, msg: Poll, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Poll").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            let poll = act.poll_group(msg);
            Box::pin(async move { Ok(poll.await?.map_or_else(Vec::new, |f| f.to_raw())) })
        })
    }
}

impl Handler<PollFetched> for TopicActor {
    type Result = ResponseFuture<Result<Option<Fetched>>>;

    fn handle(&mut self, msg: PollFetched, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "PollFetched").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| act.poll_group(msg.0))
    }
}

/// The actor face's consumer poll: the records are copied out here.
impl Handler<ConsumerPoll> for TopicActor {
    type Result = ResponseFuture<Result<ConsumerBatch>>;

    fn handle(&mut self, msg: ConsumerPoll, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ConsumerPoll").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            let poll = act.consumer_poll_group(msg, PollPause::default());
            Box::pin(async move {
                let batch = poll.await?;
                Ok(ConsumerBatch {
                    assignment: batch.assignment,
                    records: batch.fetched.map_or_else(Vec::new, |f| f.to_raw()),
                })
            })
        })
    }
}

impl Handler<ConsumerPollFetched> for TopicActor {
    type Result = ResponseFuture<Result<FetchedBatch>>;

    fn handle(&mut self, msg: ConsumerPollFetched, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ConsumerPollFetched").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            act.consumer_poll_group(msg.0, PollPause::default())
        })
    }
}

impl Handler<SubscriptionPoll> for TopicActor {
    type Result = ResponseFuture<Result<FetchedBatch>>;

    fn handle(&mut self, msg: SubscriptionPoll, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "SubscriptionPoll").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            act.consumer_poll_group(msg.poll, msg.pause)
        })
    }
}

impl Handler<FencedCommit> for TopicActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: FencedCommit, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "FencedCommit").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            let target = act
                .partition(msg.partition)
                .and_then(|_| act.member_group(&msg.group, &msg.member));
            match target {
                Ok(addr) => Box::pin(addr.ask(CommitAsMember {
                    member: msg.member,
                    generation: msg.generation,
                    partition: msg.partition,
                    offset: msg.offset,
                })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<ProduceKafkaBatch> for TopicActor {
    type Result = ResponseFuture<Result<KafkaAppend>>;

    fn handle(&mut self, msg: ProduceKafkaBatch, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ProduceKafkaBatch").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.partition(msg.partition) {
                Ok(addr) => Box::pin(addr.ask(AppendKafka { batch: msg.batch })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<OffsetForTimestamp> for TopicActor {
    type Result = ResponseFuture<Result<Option<u64>>>;

    fn handle(&mut self, msg: OffsetForTimestamp, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "OffsetForTimestamp").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.partition(msg.partition) {
                Ok(addr) => Box::pin(addr.ask(FindOffset {
                    timestamp_ms: msg.timestamp_ms,
                })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<DeleteRecords> for TopicActor {
    type Result = ResponseFuture<Result<u64>>;

    fn handle(&mut self, msg: DeleteRecords, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DeleteRecords").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.partition(msg.partition) {
                Ok(addr) => Box::pin(addr.ask(DeleteRecordsBefore { before: msg.before })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<Commit> for TopicActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: Commit, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Commit").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            let target = act
                .group(&msg.group)
                .and_then(|_| act.partition(msg.partition));
            match target {
                Ok(addr) => Box::pin(addr.ask(CommitOffset {
                    group: msg.group.into(),
                    offset: msg.offset,
                })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<Lag> for TopicActor {
    type Result = ResponseFuture<Result<BTreeMap<u32, u64>>>;

    fn handle(&mut self, msg: Lag, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Lag").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            let group_exists = act.groups.contains_key(&msg.group);
            let (topic, partitions) = (act.name.clone(), act.partitions.clone());
            Box::pin(async move {
                let asks = partitions.iter().map(|addr| {
                    addr.ask(GroupLag {
                        group: msg.group.clone(),
                        group_exists,
                    })
                });
                let mut lag = BTreeMap::new();
                for (p, result) in join_all(asks).await.into_iter().enumerate() {
                    if let Some(l) = result? {
                        lag.insert(p as u32, l);
                    }
                }
                if lag.is_empty() {
                    return Err(Error::UnknownGroup {
                        topic,
                        group: msg.group,
                    });
                }
                Ok(lag)
            })
        })
    }
}

impl Handler<CrashPartition> for TopicActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: CrashPartition, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CrashPartition").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.partition(msg.partition) {
                Ok(addr) => Box::pin(addr.ask(Crash)),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<CrashCoordinator> for TopicActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: CrashCoordinator, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CrashCoordinator").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| match act.group(&msg.group) {
            Ok(addr) => {
                let addr = addr.clone();
                Box::pin(async move {
                    addr.send(CrashGroup)
                        .await
                        .map_err(|_| Error::BrokerStopped)
                })
            }
            Err(e) => Box::pin(async { Err(e) }),
        })
    }
}

impl Handler<DescribeTopic> for TopicActor {
    type Result = ResponseFuture<TopicStats>;

    fn handle(&mut self, _: DescribeTopic, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DescribeTopic").entered();
        let partitions = self.partitions.clone();
        let groups = self.groups.clone();
        let restarts = self.restarts;
        Box::pin(async move {
            let described = join_all(partitions.iter().map(|p| p.send(DescribePartition))).await;
            let mut stats = TopicStats {
                partitions: described.into_iter().filter_map(|r| r.ok()).collect(),
                groups: BTreeMap::new(),
                restarts,
            };
            for (name, addr) in groups {
                let Ok(mut group) = addr.send(DescribeGroup).await else {
                    continue;
                };
                for p in &stats.partitions {
                    let committed = p.committed.get(&name).copied();
                    let bounds = (p.log_start_offset, p.log_end_offset);
                    group.lag.insert(p.partition, lag(committed, bounds));
                }
                stats.groups.insert(name, group);
            }
            stats
        })
    }
}

impl Handler<CloseTopic> for TopicActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, _: CloseTopic, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CloseTopic").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            let partitions = act.partitions.clone();
            Box::pin(async move {
                let closes = join_all(partitions.iter().map(|p| p.ask(ClosePartition))).await;
                closes.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
            })
        })
    }
}
