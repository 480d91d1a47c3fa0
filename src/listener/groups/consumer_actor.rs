//! `ConsumerGroupActor`: one Kafka client group of the KIP-848 consumer group protocol, on the
//! listener's arbiter. It owns a [`ConsumerGroup`] (members, epochs, subscriptions) and the
//! members' native memberships: each member is a member of the native group (topic, group)
//! of each topic its subscription resolves to, as a classic member of a broker-assigned
//! group is (see `actor`), so native and Kafka members share one group per topic and the
//! native assignor deals its partitions. Each heartbeat joins the member's native groups
//! again saying what its client holds (what it reported, and what it was told since), so a
//! partition moving to another member is withheld from the new owner until its holder's
//! heartbeat no longer holds it: revocation before assignment.
//!
//! The group's assignor names the native groups' assignor when a member's join creates one:
//! `uniform` is the native sticky assignor, `range` the native range assignor. A native group
//! that exists keeps its own.
//!
//! Requests are served one at a time: a heartbeat holds the mailbox while it joins the native
//! groups (`ctx.wait`), so epochs never move under a heartbeat in flight. A timer (a few
//! times per session timeout, at most every 100 ms) removes silent members; a wake-up set
//! for the earliest rebalance timeout after each heartbeat fences a member that did not
//! revoke in time, so its partitions reach their new owners without waiting for a request.

use std::collections::BTreeSet;
use std::time::Duration;

use actix::prelude::*;

use crate::async_handle::AsyncNanoKafka;
use crate::clock::SharedClock;
use crate::error::Error;
use crate::group::consumer_protocol::{
    ConsumerError, ConsumerGroup, ConsumerGroupState, ConsumerMember, HeartbeatAnswer,
    HeartbeatRequest, HeartbeatStep, Partitions, Reconcile,
};
use crate::group::{Assignor, GroupOptions};

type Reply<T> = Result<T, ConsumerError>;

/// A ConsumerGroupHeartbeat, its owned partitions by name; `topics`: every topic that exists.
/// Reply: the member's id, epoch and (when it changed) assignment; errors as
/// [`ConsumerGroup::begin`].
#[derive(Debug)]
pub struct ConsumerBeat {
    pub request: HeartbeatRequest,
    pub topics: BTreeSet<String>,
}
impl Message for ConsumerBeat {
    type Result = Reply<HeartbeatAnswer>;
}

/// May this OffsetCommit be written? See [`ConsumerGroup::check_commit`].
#[derive(Debug)]
pub struct CheckConsumerCommit {
    pub member: String,
    pub epoch: i32,
}
impl Message for CheckConsumerCommit {
    type Result = Reply<()>;
}

/// May this OffsetFetch read? See [`ConsumerGroup::check_fetch`].
#[derive(Debug)]
pub struct CheckConsumerFetch {
    pub member: Option<String>,
    pub epoch: i32,
}
impl Message for CheckConsumerFetch {
    type Result = Reply<()>;
}

/// The group as ConsumerGroupDescribe, DescribeGroups and ListGroups show it. Never fails.
#[derive(Debug)]
pub struct DescribeConsumer;
impl Message for DescribeConsumer {
    type Result = ConsumerDescribed;
}

/// The reply to [`DescribeConsumer`].
#[derive(Debug, Clone)]
pub struct ConsumerDescribed {
    pub state: ConsumerGroupState,
    pub group_epoch: i32,
    pub assignor: &'static str,
    pub members: Vec<ConsumerMember>,
}

/// Stop, if the group has no members (DeleteGroups): `true` when it stopped. Never fails.
#[derive(Debug)]
pub struct RetireConsumer;
impl Message for RetireConsumer {
    type Result = bool;
}

/// See the module docs.
pub struct ConsumerGroupActor {
    broker: AsyncNanoKafka,
    group: ConsumerGroup,
    clock: SharedClock,
    session_timeout: Duration,
    /// The wake-up for the group's earliest rebalance timeout.
    fence: Option<SpawnHandle>,
}

impl std::fmt::Debug for ConsumerGroupActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerGroupActor")
            .field("group", &self.name())
            .finish_non_exhaustive()
    }
}

impl ConsumerGroupActor {
    pub fn new(
        broker: AsyncNanoKafka,
        name: &str,
        clock: SharedClock,
        session_timeout: Duration,
        id_nonce: u64,
    ) -> Self {
        let session_ms = u64::try_from(session_timeout.as_millis()).unwrap_or(u64::MAX);
        ConsumerGroupActor {
            broker,
            group: ConsumerGroup::new(name, session_ms, id_nonce),
            clock,
            session_timeout,
            fence: None,
        }
    }

    fn name(&self) -> String {
        self.group.name().to_owned()
    }

    fn leave_native(&mut self, ctx: &mut Context<Self>, leaves: Vec<(String, String)>) {
        super::leave_native(ctx, &self.broker, self.group.name(), leaves);
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        let gone = self.group.expire(self.clock.now_ms());
        let leaves = gone
            .into_iter()
            .flat_map(|(member, topics)| topics.into_iter().map(move |t| (t, member.clone())))
            .collect();
        self.leave_native(ctx, leaves);
    }

    /// Sets the wake-up for the group's earliest rebalance timeout, replacing the one set.
    fn wake_for_rebalance_timeout(&mut self, ctx: &mut Context<Self>) {
        if let Some(set) = self.fence.take() {
            ctx.cancel_future(set);
        }
        if let Some(deadline) = self.group.rebalance_deadline() {
            let wait = Duration::from_millis(deadline.saturating_sub(self.clock.now_ms()));
            self.fence = Some(ctx.run_later(wait, |act, ctx| {
                act.fence = None;
                act.tick(ctx);
                act.wake_for_rebalance_timeout(ctx);
            }));
        }
    }
}

impl Actor for ConsumerGroupActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let every =
            (self.session_timeout / 4).clamp(Duration::from_millis(10), Duration::from_millis(100));
        ctx.run_interval(every, |act, ctx| act.tick(ctx));
    }
}

/// Runs `work` with the mailbox held, and answers with its output.
fn serialized<T: 'static>(
    ctx: &mut Context<ConsumerGroupActor>,
    work: impl ActorFuture<ConsumerGroupActor, Output = Reply<T>> + 'static,
) -> ResponseFuture<Reply<T>> {
    super::serialized(ctx, work, ConsumerError::UnknownMemberId)
}

/// The native groups' options for a group whose assignor is `assignor`.
fn native_options(assignor: &str) -> GroupOptions {
    match assignor {
        "range" => GroupOptions::default().assignor(Assignor::Range),
        _ => GroupOptions::default().assignor(Assignor::Sticky),
    }
}

impl Handler<ConsumerBeat> for ConsumerGroupActor {
    type Result = ResponseFuture<Reply<HeartbeatAnswer>>;

    fn handle(&mut self, msg: ConsumerBeat, ctx: &mut Context<Self>) -> Self::Result {
        let epoch = msg.request.member_epoch;
        let full = epoch == 0 || msg.request.owned.is_some();
        let now = self.clock.now_ms();
        match self.group.begin(msg.request, &msg.topics, now) {
            Err(e) => Box::pin(async move { Err(e) }),
            Ok(HeartbeatStep::Left {
                member_id,
                native,
                epoch,
                topics,
            }) => {
                let leaves = topics.into_iter().map(|t| (t, native.clone())).collect();
                self.leave_native(ctx, leaves);
                let answer = HeartbeatAnswer {
                    member_id,
                    member_epoch: epoch,
                    assignment: None,
                };
                serialized(ctx, fut::ready(Ok(answer)))
            }
            Ok(HeartbeatStep::Reconcile(step)) => {
                let member = step.member_id.clone();
                let work = reconcile(self.broker.clone(), self.name(), step);
                serialized(
                    ctx,
                    work.into_actor(self)
                        .map(move |(granted, joined), act, ctx| {
                            let answer =
                                act.group.finish(&member, granted, joined, epoch, full, now);
                            act.wake_for_rebalance_timeout(ctx);
                            answer.ok_or(ConsumerError::UnknownMemberId)
                        }),
                )
            }
        }
    }
}

/// A heartbeat's native half (see [`Reconcile`]): what the native groups give the member,
/// and the topics whose native group it is a member of.
async fn reconcile(
    broker: AsyncNanoKafka,
    group: String,
    step: Reconcile,
) -> (Partitions, BTreeSet<String>) {
    let (member, options) = (&step.native, native_options(step.assignor));
    for topic in &step.dropped {
        let _ = broker.leave_group(topic, &group, member).await;
    }
    let (mut granted, mut joined) = (Partitions::new(), BTreeSet::new());
    for topic in step.topics.iter().chain(&step.lingering).cloned() {
        let held = step.holding.get(&topic).cloned().unwrap_or_default();
        match broker
            .join_group_as_kafka_member(&topic, &group, member, options, held)
            .await
        {
            Ok(assignment) => {
                if step.topics.contains(&topic) {
                    let partitions = assignment.partitions.into_iter().collect();
                    granted.insert(topic.clone(), partitions);
                }
                joined.insert(topic);
            }
            // Deleted since it was listed: the next heartbeat no longer sees it.
            Err(Error::UnknownTopic { .. }) => {}
            Err(e) => tracing::warn!(%group, %member, %topic, error = %e,
                "a consumer group member cannot join the native group"),
        }
    }
    (granted, joined)
}

impl Handler<CheckConsumerCommit> for ConsumerGroupActor {
    type Result = Reply<()>;

    fn handle(&mut self, msg: CheckConsumerCommit, _: &mut Context<Self>) -> Self::Result {
        self.group.check_commit(&msg.member, msg.epoch)
    }
}

impl Handler<CheckConsumerFetch> for ConsumerGroupActor {
    type Result = Reply<()>;

    fn handle(&mut self, msg: CheckConsumerFetch, _: &mut Context<Self>) -> Self::Result {
        self.group.check_fetch(msg.member.as_deref(), msg.epoch)
    }
}

impl Handler<DescribeConsumer> for ConsumerGroupActor {
    type Result = MessageResult<DescribeConsumer>;

    fn handle(&mut self, _: DescribeConsumer, _: &mut Context<Self>) -> Self::Result {
        MessageResult(ConsumerDescribed {
            state: self.group.state(),
            group_epoch: self.group.group_epoch(),
            assignor: self.group.assignor(),
            members: self.group.members().cloned().collect(),
        })
    }
}

impl Handler<RetireConsumer> for ConsumerGroupActor {
    type Result = bool;

    fn handle(&mut self, _: RetireConsumer, ctx: &mut Context<Self>) -> bool {
        let empty = self.group.is_empty();
        if empty {
            ctx.stop();
        }
        empty
    }
}
