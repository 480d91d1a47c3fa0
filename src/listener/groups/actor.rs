//! `KafkaGroupActor`: one Kafka client group (the classic protocol), on the listener's
//! arbiter. It owns a [`ClassicGroup`] (members, generation, barrier), the JoinGroup and
//! SyncGroup requests parked until the group can answer them, and the group's native
//! memberships: every member of a broker-assigned group is a member of the native group
//! (topic, group) of each topic it subscribes to, so native and Kafka members share one
//! group per topic and the native assignor deals its partitions over both. The members of
//! a leader-assigned group have no native memberships (a group that turns leader-assigned
//! leaves them at the barrier): their leader deals the partitions.
//!
//! Each join of a native group says what the member's client still holds of the topic:
//! nothing under an eager protocol (its client revoked everything before it joined again),
//! its last assignment (the one its SyncGroup returned) under a cooperative one. The native
//! group withholds a partition from its new owner while another member holds it, so under
//! `cooperative-sticky` a partition changing owner reaches the new one in the generation
//! after the old one revoked it and joined again (KIP-429).
//!
//! The native side knows a member by its `native_id` (the id its first static instance
//! joined with, if it is a restarted static member): a restart passes the old member id's
//! native memberships and assignments to the new one, and answers the old id's parked
//! JoinGroup and SyncGroup `FENCED_INSTANCE_ID`.
//!
//! Requests are served one at a time: a request that needs the broker (a heartbeat beats the
//! native memberships, a completed barrier joins them) holds the mailbox until the broker
//! answered (`ctx.wait`), so the classic state never moves under a request in flight.
//! A timer (a few times per session timeout, at most every 100 ms) evicts silent members,
//! completes a barrier at its deadline or after the initial delay, and keeps the native
//! memberships of members waiting in JoinGroup alive.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use actix::prelude::*;
use futures::channel::oneshot;

use super::protocol::encode_assignment;
use crate::async_handle::AsyncNanoKafka;
use crate::clock::SharedClock;
use crate::error::Error;
use crate::group::classic::{
    Assigning, ClassicError, ClassicGroup, ClassicMember, ClassicState, JoinAnswer, JoinRequest,
    JoinStep, Joined, SyncStep,
};
use crate::group::GroupOptions;

type Reply<T> = Result<T, ClassicError>;

/// A JoinGroup. Reply: when the rebalance completes (or at once; see [`JoinStep`]).
#[derive(Debug)]
pub struct Join(pub JoinRequest);
impl Message for Join {
    type Result = Reply<JoinAnswer>;
}

/// A SyncGroup. Reply: the member's assignment (for a follower of a leader-assigned group,
/// once its leader synced).
#[derive(Debug)]
pub struct Sync {
    pub member: String,
    pub instance: Option<String>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Vec<u8>)>,
}
impl Message for Sync {
    type Result = Reply<Vec<u8>>;
}

/// A Heartbeat; also beats the member's native memberships. `RebalanceInProgress` when a
/// native group of its topics rebalanced since the generation began (a native member
/// joined, left or was evicted, or a subscribed topic appeared); `UnknownMemberId` when a
/// native group evicted it.
#[derive(Debug)]
pub struct Beat {
    pub member: String,
    pub instance: Option<String>,
    pub generation: i32,
}
impl Message for Beat {
    type Result = Reply<()>;
}

/// A LeaveGroup of these members, each a member id or empty, and an instance id or none
/// (each answered on its own, see [`ClassicGroup::leave`]).
#[derive(Debug)]
pub struct Leave(pub Vec<(String, Option<String>)>);
impl Message for Leave {
    type Result = Vec<Reply<()>>;
}

/// May this OffsetCommit be written? (See [`ClassicGroup::check_commit`].)
#[derive(Debug)]
pub struct CheckCommit {
    pub member: String,
    pub instance: Option<String>,
    pub generation: i32,
}
impl Message for CheckCommit {
    type Result = Reply<()>;
}

/// The group as DescribeGroups shows it. Never fails.
#[derive(Debug)]
pub struct Describe;
impl Message for Describe {
    type Result = Described;
}

/// Stop, if the group has no members (Kafka's DeleteGroups): `true` when it stopped.
/// Never fails.
#[derive(Debug)]
pub struct Retire;
impl Message for Retire {
    type Result = bool;
}

/// The reply to [`Describe`].
#[derive(Debug, Clone)]
pub struct Described {
    pub state: ClassicState,
    /// The generation (the console shows it; DescribeGroups does not).
    #[cfg(feature = "console")]
    pub generation: i32,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<ClassicMember>,
}

/// See the module docs.
pub struct KafkaGroupActor {
    broker: AsyncNanoKafka,
    group: ClassicGroup,
    clock: SharedClock,
    session_timeout: Duration,
    joins: HashMap<String, oneshot::Sender<Reply<JoinAnswer>>>,
    syncs: HashMap<String, oneshot::Sender<Reply<Vec<u8>>>>,
    /// Member → the topics whose native group it is a member of.
    native: BTreeMap<String, BTreeSet<String>>,
    /// Topic → the native group's generation when the classic generation began.
    native_generations: BTreeMap<String, u64>,
    /// Member → topic → its partitions in the current generation.
    granted: BTreeMap<String, Partitions>,
    /// Member → topic → its partitions as its last SyncGroup returned them: what a
    /// cooperative client holds when it joins again.
    synced: BTreeMap<String, Partitions>,
}

/// Topic → partitions.
type Partitions = BTreeMap<String, BTreeSet<u32>>;

impl std::fmt::Debug for KafkaGroupActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaGroupActor")
            .field("group", &self.group.name())
            .finish_non_exhaustive()
    }
}

impl KafkaGroupActor {
    pub fn new(
        broker: AsyncNanoKafka,
        group: ClassicGroup,
        clock: SharedClock,
        session_timeout: Duration,
    ) -> Self {
        KafkaGroupActor {
            broker,
            group,
            clock,
            session_timeout,
            joins: HashMap::new(),
            syncs: HashMap::new(),
            native: BTreeMap::new(),
            native_generations: BTreeMap::new(),
            granted: BTreeMap::new(),
            synced: BTreeMap::new(),
        }
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    fn name(&self) -> String {
        self.group.name().to_owned()
    }

    /// After every change: a rebalance under way fails the parked SyncGroups (their
    /// members must join again); a barrier reached completes.
    fn settle(&mut self, ctx: &mut Context<Self>) {
        if self.group.state() == ClassicState::PreparingRebalance {
            for (_, parked) in self.syncs.drain() {
                let _ = parked.send(Err(ClassicError::RebalanceInProgress));
            }
        }
        if self.group.barrier_reached(self.now()) {
            self.complete(ctx);
        }
    }

    /// Members gone from the group: their parked requests are told so, and their native
    /// memberships are left (before any later request is served).
    fn forget(&mut self, ctx: &mut Context<Self>, gone: Vec<ClassicMember>) {
        let mut leaves = Vec::new();
        for member in gone {
            if let Some(parked) = self.joins.remove(&member.id) {
                let _ = parked.send(Err(ClassicError::UnknownMemberId));
            }
            if let Some(parked) = self.syncs.remove(&member.id) {
                let _ = parked.send(Err(ClassicError::UnknownMemberId));
            }
            self.granted.remove(&member.id);
            self.synced.remove(&member.id);
            for topic in self.native.remove(&member.id).unwrap_or_default() {
                leaves.push((topic, member.native_id.clone()));
            }
        }
        self.leave_native(ctx, leaves);
    }

    /// A static member restarted as `id`: the requests `replaced` left parked are fenced, and
    /// what it had passes to `id`; its native memberships keep their id (`native_id`).
    fn replace(&mut self, replaced: &str, id: &str) {
        if let Some(parked) = self.joins.remove(replaced) {
            let _ = parked.send(Err(ClassicError::FencedInstanceId));
        }
        if let Some(parked) = self.syncs.remove(replaced) {
            let _ = parked.send(Err(ClassicError::FencedInstanceId));
        }
        if let Some(topics) = self.native.remove(replaced) {
            self.native.insert(id.to_owned(), topics);
        }
        for map in [&mut self.granted, &mut self.synced] {
            if let Some(v) = map.remove(replaced) {
                map.insert(id.to_owned(), v);
            }
        }
    }

    /// Leaves these native memberships (topic, member) before any later request is served.
    fn leave_native(&mut self, ctx: &mut Context<Self>, leaves: Vec<(String, String)>) {
        super::leave_native(ctx, &self.broker, self.group.name(), leaves);
    }

    /// The barrier is reached: drop the laggards, then (broker-assigned) bring every
    /// member's native memberships in line with its subscription, read the native
    /// assignments and answer the parked JoinGroups; a leader-assigned group leaves its
    /// native memberships instead.
    fn complete(&mut self, ctx: &mut Context<Self>) {
        let barrier = self.group.reach_barrier();
        self.forget(ctx, barrier.removed);
        let protocol = barrier.protocol;
        if self.group.assigning() == Assigning::Leader {
            self.granted.clear();
            let group = &self.group;
            let leaves = std::mem::take(&mut self.native)
                .into_iter()
                .flat_map(|(member, topics)| {
                    let native_id = group
                        .member(&member)
                        .map_or(member, |m| m.native_id.clone());
                    topics.into_iter().map(move |t| (t, native_id.clone()))
                })
                .collect();
            self.leave_native(ctx, leaves);
            self.native_generations.clear();
            let answers = self.group.finish_rebalance(protocol, BTreeMap::new());
            self.answer_joins(answers);
            return;
        }
        // How the members joined again is the generation's that ends: a cooperative client
        // kept its last assignment, an eager one revoked it.
        // The native side knows each member by its native id: the plan and the work below
        // use it, and their results are keyed by member id again at the end.
        let kept_by_cooperative = crate::group::classic::is_cooperative(self.group.protocol());
        let member_ids: BTreeMap<String, String> = self
            .group
            .members()
            .map(|m| (m.native_id.clone(), m.id.clone()))
            .collect();
        let plan: Vec<(String, BTreeSet<String>, BTreeSet<String>, Partitions)> = self
            .group
            .members()
            .map(|m| {
                let joined = self.native.get(&m.id).cloned().unwrap_or_default();
                let holding = match kept_by_cooperative {
                    true => self.synced.get(&m.id).cloned().unwrap_or_default(),
                    false => Partitions::new(),
                };
                (m.native_id.clone(), m.topics.clone(), joined, holding)
            })
            .collect();
        // A native group a Kafka member creates has the default options, so native members
        // joining it with the defaults fit, unless the group is cooperative: a cooperative
        // rebalance should move only what balance needs (each move costs the new owner a
        // generation of waiting for the old one to revoke), which is the sticky assignor. A
        // native group that exists keeps its own, whatever protocol name the Kafka members
        // are told.
        let options = match crate::group::classic::is_cooperative(&protocol) {
            true => GroupOptions::default().assignor(crate::group::Assignor::Sticky),
            false => GroupOptions::default(),
        };
        let (broker, group) = (self.broker.clone(), self.name());
        let work = async move {
            let mut joined: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (member, wanted, had, holding) in &plan {
                for topic in had.difference(wanted) {
                    let _ = broker.leave_group(topic, &group, member).await;
                }
                let now_in = joined.entry(member.clone()).or_default();
                for topic in wanted {
                    let holding = holding.get(topic).cloned().unwrap_or_default();
                    match broker
                        .join_group_as_kafka_member(topic, &group, member, options, holding)
                        .await
                    {
                        Ok(_) => {
                            now_in.insert(topic.clone());
                        }
                        // Not there (yet): a heartbeat notices when it appears.
                        Err(Error::UnknownTopic { .. }) => {}
                        Err(e) => tracing::warn!(%group, %member, %topic, error = %e,
                            "a Kafka member cannot join the native group"),
                    }
                }
            }
            // A join that added or removed a member counted what every Kafka member owned
            // as held (its client reads on until it joins again); these have joined again,
            // so each states once more what it holds, the last change being in.
            for (member, _, _, holding) in &plan {
                for topic in joined.get(member).into_iter().flatten() {
                    let holding = holding.get(topic).cloned().unwrap_or_default();
                    let _ = broker
                        .join_group_as_kafka_member(topic, &group, member, options, holding)
                        .await;
                }
            }
            // Read after every join: each join rebalanced the native group.
            let topics: BTreeSet<&String> = joined.values().flatten().collect();
            let mut native = BTreeMap::new();
            for topic in topics {
                if let Ok(Some(stats)) = broker.describe_native_group(topic, &group).await {
                    native.insert(topic.clone(), stats);
                }
            }
            (joined, native)
        };
        ctx.wait(work.into_actor(self).map(move |(joined, native), act, _| {
            act.native_generations = native
                .iter()
                .map(|(topic, stats)| (topic.clone(), stats.generation))
                .collect();
            act.granted = joined
                .iter()
                .map(|(member, topics)| {
                    let partitions = topics.iter().map(|topic| {
                        let owned = native
                            .get(topic)
                            .and_then(|stats| stats.assignment.get(member))
                            .into_iter()
                            .flatten()
                            .copied()
                            .collect();
                        (topic.clone(), owned)
                    });
                    let id = member_ids.get(member).unwrap_or(member);
                    (id.clone(), partitions.collect())
                })
                .collect();
            let assignments = act
                .granted
                .iter()
                .map(|(member, partitions)| {
                    let partitions = partitions
                        .iter()
                        .map(|(topic, ps)| (topic.as_str(), ps.iter().copied().collect()));
                    (member.clone(), encode_assignment(partitions))
                })
                .collect();
            act.native = joined
                .into_iter()
                .map(|(member, topics)| {
                    (member_ids.get(&member).cloned().unwrap_or(member), topics)
                })
                .collect();
            let answers = act.group.finish_rebalance(protocol, assignments);
            act.answer_joins(answers);
        }));
    }

    fn answer_joins(&mut self, answers: Vec<JoinAnswer>) {
        for answer in answers {
            if let Some(parked) = self.joins.remove(&answer.member_id) {
                let _ = parked.send(Ok(answer));
            }
        }
    }

    /// The timer: evictions, barrier deadlines, and the native memberships of members
    /// waiting in JoinGroup kept alive (they send no heartbeat meanwhile).
    fn tick(&mut self, ctx: &mut Context<Self>) {
        let expired = self.group.expire(self.now());
        self.forget(ctx, expired);
        let waiting: Vec<(String, BTreeSet<String>)> = self
            .group
            .awaiting_join()
            .filter_map(|m| Some((m.native_id.clone(), self.native.get(&m.id)?.clone())))
            .collect();
        if !waiting.is_empty() {
            let (broker, group) = (self.broker.clone(), self.name());
            ctx.spawn(
                async move {
                    for (member, topics) in waiting {
                        for topic in topics {
                            let _ = broker.heartbeat(&topic, &group, &member).await;
                        }
                    }
                }
                .into_actor(self),
            );
        }
        self.settle(ctx);
    }
}

/// Runs `work` with the mailbox held, and answers with its output.
fn serialized<T: 'static>(
    ctx: &mut Context<KafkaGroupActor>,
    work: impl ActorFuture<KafkaGroupActor, Output = Reply<T>> + 'static,
) -> ResponseFuture<Reply<T>> {
    super::serialized(ctx, work, ClassicError::RebalanceInProgress)
}

impl Actor for KafkaGroupActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let every =
            (self.session_timeout / 4).clamp(Duration::from_millis(10), Duration::from_millis(100));
        ctx.run_interval(every, |act, ctx| act.tick(ctx));
    }
}

impl Handler<Join> for KafkaGroupActor {
    type Result = ResponseFuture<Reply<JoinAnswer>>;

    fn handle(&mut self, msg: Join, ctx: &mut Context<Self>) -> Self::Result {
        let joined = self.group.join(msg.0, self.now());
        if let Ok(Joined {
            fenced: Some(replaced),
            step,
        }) = &joined
        {
            self.replace(replaced, step.member_id());
        }
        let reply = match joined.map(|j| j.step) {
            Err(e) => Box::pin(async move { Err(e) }) as Self::Result,
            Ok(JoinStep::Answer(answer)) => Box::pin(async move { Ok(answer) }),
            Ok(JoinStep::Wait(member)) => {
                let (tx, rx) = oneshot::channel();
                // A second JoinGroup of the same member replaces the first (Kafka answers
                // the older one with an error; its client has given up on it).
                if let Some(older) = self.joins.insert(member, tx) {
                    let _ = older.send(Err(ClassicError::RebalanceInProgress));
                }
                Box::pin(async move { rx.await.unwrap_or(Err(ClassicError::RebalanceInProgress)) })
            }
        };
        self.settle(ctx);
        reply
    }
}

impl Handler<Sync> for KafkaGroupActor {
    type Result = ResponseFuture<Reply<Vec<u8>>>;

    fn handle(&mut self, msg: Sync, ctx: &mut Context<Self>) -> Self::Result {
        let protocol = (msg.protocol_type.as_deref(), msg.protocol_name.as_deref());
        let step = self.group.sync(
            &msg.member,
            msg.instance.as_deref(),
            msg.generation,
            protocol,
            msg.assignments,
            self.now(),
        );
        let reply: Self::Result = match step {
            Err(e) => Box::pin(async move { Err(e) }),
            Ok(SyncStep::Answer(assignment)) => {
                if let Some(granted) = self.granted.get(&msg.member) {
                    self.synced.insert(msg.member.clone(), granted.clone());
                }
                Box::pin(async move { Ok(assignment) })
            }
            Ok(SyncStep::Wait) => {
                let (tx, rx) = oneshot::channel();
                self.syncs.insert(msg.member, tx);
                Box::pin(async move { rx.await.unwrap_or(Err(ClassicError::RebalanceInProgress)) })
            }
            Ok(SyncStep::Release(released)) => {
                let mut own = Vec::new();
                for (member, assignment) in released {
                    if member == msg.member {
                        own = assignment;
                    } else if let Some(parked) = self.syncs.remove(&member) {
                        let _ = parked.send(Ok(assignment));
                    }
                }
                Box::pin(async move { Ok(own) })
            }
        };
        self.settle(ctx);
        reply
    }
}

impl Handler<Beat> for KafkaGroupActor {
    type Result = ResponseFuture<Reply<()>>;

    fn handle(&mut self, msg: Beat, ctx: &mut Context<Self>) -> Self::Result {
        let instance = msg.instance.as_deref();
        if let Err(e) = self
            .group
            .heartbeat(&msg.member, instance, msg.generation, self.now())
        {
            self.settle(ctx);
            return Box::pin(async move { Err(e) });
        }
        // A leader-assigned group's members are in no native group.
        let subscribed = match self.group.assigning() {
            Assigning::Broker => self.group.member(&msg.member).map(|m| m.topics.clone()),
            Assigning::Leader => None,
        }
        .unwrap_or_default();
        let joined = self.native.get(&msg.member).cloned().unwrap_or_default();
        let native_id = self.group.member(&msg.member).map(|m| m.native_id.clone());
        let (broker, group) = (self.broker.clone(), self.name());
        let member = native_id.unwrap_or_else(|| msg.member.clone());
        let beats = async move {
            let mut answers = Vec::new();
            for topic in subscribed {
                let answer = broker.heartbeat(&topic, &group, &member).await;
                answers.push((topic, answer));
            }
            answers
        };
        serialized(
            ctx,
            beats.into_actor(self).map(move |answers, act, ctx| {
                let mut rebalance = None;
                let mut evicted = false;
                for (topic, answer) in answers {
                    let was_joined = joined.contains(&topic);
                    match answer {
                        Ok(a) if was_joined => {
                            if act.native_generations.get(&topic) != Some(&a.generation) {
                                rebalance = Some(format!("native group of {topic} rebalanced"));
                            }
                        }
                        Err(Error::UnknownMember { .. }) if was_joined => evicted = true,
                        // The topic exists now: the member should have its partitions.
                        Ok(_) | Err(Error::UnknownMember { .. }) => {
                            rebalance = Some(format!("subscribed topic {topic} appeared"));
                        }
                        Err(_) => {}
                    }
                }
                let now = act.now();
                let reply = if evicted {
                    let gone = act.group.remove(&msg.member, now, "was evicted natively");
                    act.forget(ctx, gone.into_iter().collect());
                    Err(ClassicError::UnknownMemberId)
                } else if let Some(cause) = rebalance {
                    act.group.prepare_rebalance(now, &cause);
                    Err(ClassicError::RebalanceInProgress)
                } else {
                    Ok(())
                };
                act.settle(ctx);
                reply
            }),
        )
    }
}

impl Handler<Leave> for KafkaGroupActor {
    type Result = ResponseFuture<Vec<Reply<()>>>;

    fn handle(&mut self, msg: Leave, ctx: &mut Context<Self>) -> Self::Result {
        let now = self.now();
        let mut replies = Vec::with_capacity(msg.0.len());
        for (member, instance) in msg.0 {
            match self.group.leave(&member, instance.as_deref(), now) {
                Ok(gone) => {
                    self.forget(ctx, vec![gone]);
                    replies.push(Ok(()));
                }
                Err(e) => replies.push(Err(e)),
            }
        }
        self.settle(ctx);
        // Answered once the native memberships are left (waits run in order).
        let (tx, rx) = oneshot::channel();
        ctx.wait(fut::ready(()).map(move |(), _, _| {
            let _ = tx.send(replies);
        }));
        Box::pin(async move { rx.await.unwrap_or_default() })
    }
}

impl Handler<CheckCommit> for KafkaGroupActor {
    type Result = Reply<()>;

    fn handle(&mut self, msg: CheckCommit, _: &mut Context<Self>) -> Self::Result {
        let instance = msg.instance.as_deref();
        self.group
            .check_commit(&msg.member, instance, msg.generation, self.now())
    }
}

impl Handler<Describe> for KafkaGroupActor {
    type Result = MessageResult<Describe>;

    fn handle(&mut self, _: Describe, _: &mut Context<Self>) -> Self::Result {
        MessageResult(Described {
            state: self.group.state(),
            #[cfg(feature = "console")]
            generation: self.group.generation(),
            protocol_type: self.group.protocol_type().to_owned(),
            protocol: self.group.protocol().to_owned(),
            members: self.group.members().cloned().collect(),
        })
    }
}

impl Handler<Retire> for KafkaGroupActor {
    type Result = bool;

    fn handle(&mut self, _: Retire, ctx: &mut Context<Self>) -> bool {
        let empty = self.group.members().next().is_none();
        if empty {
            ctx.stop();
        }
        empty
    }
}
