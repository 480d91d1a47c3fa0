//! Consumer groups for Kafka clients: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup (here), DescribeGroups and ListGroups (`describe`), OffsetCommit and
//! OffsetFetch (`offsets`); the KIP-848 consumer group protocol, ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe (`consumer`: its members fit the model below the same way, and a
//! group name is served by one protocol at a time).
//!
//! ACLs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and ConsumerGroupHeartbeat need READ
//! on the group (ConsumerGroupHeartbeat DESCRIBE on each subscribed topic too, and a regex
//! matches only topics the principal may DESCRIBE), OffsetCommit READ on the group and on
//! each topic, OffsetFetch, DescribeGroups and FindCoordinator DESCRIBE on the group (and
//! OffsetFetch DESCRIBE on each topic), ListGroups lists only the groups the principal may
//! DESCRIBE, DeleteGroups and OffsetDelete need DELETE on the group (and OffsetDelete READ
//! on each topic): `GROUP_AUTHORIZATION_FAILED`, `TOPIC_AUTHORIZATION_FAILED` otherwise.
//!
//! # One group model
//! A Kafka group spans topics, a native group is one topic's; a Kafka client's group named
//! `g` is the native groups `(t, g)` of the topics `t` its members subscribe to, plus the
//! classic protocol's own bookkeeping (a `KafkaGroupActor` per group name, see `actor`):
//! * when the group's vote chooses an assignor the broker knows
//!   ([`BROKER_ASSIGNORS`](crate::group::classic::BROKER_ASSIGNORS): the clients' built-in
//!   ones), every Kafka member is a member of the native group of each topic it subscribes
//!   to, so the native group's assignor (a native group a Kafka member creates has the
//!   default options: round-robin, from the earliest offset) deals each topic's partitions
//!   over its native and Kafka members alike, and a Kafka member's assignment is what the
//!   native groups gave it, whatever protocol name it is told. Every Kafka member is
//!   answered as a follower (JoinGroup's leader is empty, its member list too) and gets its
//!   assignment in SyncGroup, as Kafka 4 answers classic members of a consumer group;
//! * when it chooses any other assignor (Kafka Streams' `stream`, a custom one), the group
//!   is served as Kafka serves every classic group: it elects a leader, the leader's
//!   JoinGroup carries every member's metadata, and its SyncGroup's assignments reach the
//!   members byte for byte, user data included. Such a group takes no part in native groups
//!   (its leader deals the partitions; native members of the same name on its topics are
//!   not coordinated with it), but its commits are the partitions' like any group's, so
//!   `lag()` and OffsetFetch read them, and DescribeGroups shows its members with what
//!   their leader assigned;
//! * the classic generation counts classic rebalances. A join, leave or eviction on the
//!   Kafka side rebalances both; one on the native side (a native member joins, leaves or
//!   is evicted) makes the Kafka members' next Heartbeat answer `REBALANCE_IN_PROGRESS`, so
//!   they join again and learn their new partitions. Until then they read on, so a
//!   partition the native group moves off a Kafka member is withheld from its new owner
//!   (native or Kafka) until that member joined again without it (see `actor`);
//! * liveness: Kafka heartbeats keep the native memberships alive; a member silent for its
//!   session timeout is evicted on both sides. The broker's session timeout is the largest a
//!   member may ask for (Kafka's `group.max.session.timeout.ms`; there is no configured
//!   minimum but zero): a JoinGroup asking for more is refused with
//!   `INVALID_SESSION_TIMEOUT`;
//! * static members (`group.instance.id`, KIP-345; see `crate::group::classic`): a Kafka
//!   member's native memberships go by its `native_id`, its member id but for a restarted
//!   static member, which keeps the native id of the member it replaced (so the instance's
//!   first). A restart within the session timeout thus changes nothing natively: the same
//!   partitions, no native rebalance, so no `REBALANCE_IN_PROGRESS` for the other members.
//!   (Moving the memberships to the new member id instead would be a native leave and join,
//!   each a native rebalance.) An instance id that Kafka's clients would refuse (empty,
//!   over 249 bytes, control characters) is `INVALID_REQUEST`;
//! * committed offsets are the partitions' own (the next offset to read, Kafka's meaning), so
//!   `lag()` and OffsetFetch read the same numbers, whoever committed them.
//!
//! Protocol choice: Kafka's vote among the protocols every member offers, eager ones
//! (`range`, `roundrobin`) first when the broker would assign one: the broker's assignments
//! are eager (each generation is a complete assignment, and the barrier makes every Kafka
//! member give up its partitions before any gets new ones). A group whose members offer
//! only `cooperative-sticky` gets it: such clients keep their partitions while they join
//! again, revoke what the new assignment drops, then join again; a partition changing owner
//! goes to the new one only in that next generation (KIP-429), so no two members read it at
//! once.
//!
//! Groups whose protocol type is not `consumer` (Kafka Connect, schema registries...) carry
//! no subscription the broker can read: they are leader-assigned too, as every group is in
//! Kafka, and take no part in native groups.

mod actor;
mod consumer;
mod consumer_actor;
mod delete;
mod describe;
mod offsets;
mod protocol;
#[cfg(feature = "console")]
mod view;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use actix::prelude::*;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use crate::async_handle::AsyncNanoKafka;
use crate::clock::SharedClock;
use crate::config::validate_id;
use crate::group::classic::{ClassicError, ClassicGroup, JoinRequest, Protocol};
use crate::security::acl::Operation;
use actor::{Beat, Join, KafkaGroupActor, Leave, Sync};
pub use consumer::{consumer_group_describe, consumer_group_heartbeat};
use consumer_actor::ConsumerGroupActor;
pub use delete::{delete_groups, offset_delete};
pub use describe::{describe_groups, find_coordinator, list_groups};
pub use offsets::{offset_commit, offset_fetch};
#[cfg(feature = "console")]
pub(crate) use view::{KafkaGroupView, KafkaGroupsReader, KafkaMemberView};

/// The Kafka groups of one listener, by name; each started by its first request. A name has
/// a classic group, a consumer-protocol (KIP-848) group, or both, of which one at most has
/// members (see `consumer`).
#[derive(Debug, Default)]
pub struct KafkaGroups {
    groups: Mutex<HashMap<String, Addr<KafkaGroupActor>>>,
    consumer: Mutex<HashMap<String, Addr<ConsumerGroupActor>>>,
    /// The broker's session timeout and clock, asked once.
    settings: OnceLock<(Duration, SharedClock)>,
}

impl KafkaGroups {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Addr<KafkaGroupActor>>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The group's actor, if it was ever used.
    pub fn get(&self, name: &str) -> Option<Addr<KafkaGroupActor>> {
        self.map().get(name).cloned()
    }

    /// Stops and forgets the group's actors when they have no members (Kafka's DeleteGroups).
    /// `Some(true)` when it was retired, `Some(false)` when it has members, `None` when there
    /// is no such group.
    pub async fn retire(&self, name: &str) -> Option<bool> {
        let consumer = self.retire_consumer(name).await;
        let Some(addr) = self.get(name) else {
            return consumer;
        };
        if consumer == Some(false) {
            return consumer;
        }
        // A stopped actor (the broker stopping) has nothing left to retire.
        let retired = addr.send(actor::Retire).await.unwrap_or(true);
        if retired {
            let mut map = self.map();
            if map.get(name).is_some_and(|a| *a == addr) {
                map.remove(name);
            }
        }
        Some(retired)
    }

    fn consumer_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Addr<ConsumerGroupActor>>> {
        self.consumer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The consumer-protocol group's actor, if it was ever used.
    pub fn consumer(&self, name: &str) -> Option<Addr<ConsumerGroupActor>> {
        self.consumer_map().get(name).cloned()
    }

    /// Every consumer-protocol group's name and actor.
    pub fn all_consumer(&self) -> Vec<(String, Addr<ConsumerGroupActor>)> {
        let map = self.consumer_map();
        map.iter().map(|(n, a)| (n.clone(), a.clone())).collect()
    }

    async fn retire_consumer(&self, name: &str) -> Option<bool> {
        let addr = self.consumer(name)?;
        let retired = addr
            .send(consumer_actor::RetireConsumer)
            .await
            .unwrap_or(true);
        if retired {
            let mut map = self.consumer_map();
            if map.get(name).is_some_and(|a| *a == addr) {
                map.remove(name);
            }
        }
        Some(retired)
    }

    /// The broker's session timeout and clock, asked once.
    async fn settings(&self, ctx: &RequestContext<'_>) -> Option<(Duration, SharedClock)> {
        match self.settings.get() {
            Some(settings) => Some(settings.clone()),
            None => {
                let settings = ctx.broker.group_settings().await.ok()?;
                Some(self.settings.get_or_init(|| settings).clone())
            }
        }
    }

    /// The consumer-protocol group's actor, started (on the listener's arbiter) if new.
    /// `None` when the broker has stopped.
    async fn consumer_or_start(
        &self,
        ctx: &RequestContext<'_>,
        name: &str,
    ) -> Option<Addr<ConsumerGroupActor>> {
        if let Some(addr) = self.consumer(name) {
            return Some(addr);
        }
        let (session_timeout, clock) = self.settings(ctx).await?;
        let mut map = self.consumer_map();
        let addr = map.entry(name.to_owned()).or_insert_with(|| {
            let broker: AsyncNanoKafka = ctx.broker.clone();
            let actor = ConsumerGroupActor::new(broker, name, clock, session_timeout, nonce());
            actor.start()
        });
        Some(addr.clone())
    }

    /// Every group's name and actor.
    pub fn all(&self) -> Vec<(String, Addr<KafkaGroupActor>)> {
        let map = self.map();
        map.iter().map(|(n, a)| (n.clone(), a.clone())).collect()
    }

    /// The group's actor, started (on the listener's arbiter) if new. `None` when the broker
    /// has stopped.
    async fn get_or_start(
        &self,
        ctx: &RequestContext<'_>,
        name: &str,
    ) -> Option<Addr<KafkaGroupActor>> {
        if let Some(addr) = self.get(name) {
            return Some(addr);
        }
        let (session_timeout, clock) = self.settings(ctx).await?;
        let mut map = self.map();
        let addr = map.entry(name.to_owned()).or_insert_with(|| {
            let session_ms = u64::try_from(session_timeout.as_millis()).unwrap_or(u64::MAX);
            let delay = &ctx.shared.config.initial_rebalance_delay;
            let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            let group = ClassicGroup::new(name, session_ms, delay_ms, nonce());
            let broker: AsyncNanoKafka = ctx.broker.clone();
            KafkaGroupActor::new(broker, group, clock, session_timeout).start()
        });
        Some(addr.clone())
    }
}

/// Runs `work` on `ctx` with the mailbox held (no other message is served meanwhile), and
/// answers with its output; `stopped` if the actor stops first.
fn serialized<A, T, E>(
    ctx: &mut Context<A>,
    work: impl ActorFuture<A, Output = Result<T, E>> + 'static,
    stopped: E,
) -> ResponseFuture<Result<T, E>>
where
    A: Actor<Context = Context<A>>,
    T: 'static,
    E: 'static,
{
    let (tx, rx) = futures::channel::oneshot::channel();
    ctx.wait(work.map(move |reply, _, _| {
        let _ = tx.send(reply);
    }));
    Box::pin(async move { rx.await.unwrap_or(Err(stopped)) })
}

/// Leaves these native groups (topic, member) of `group` before `ctx` serves any later
/// message.
fn leave_native<A: Actor<Context = Context<A>>>(
    ctx: &mut Context<A>,
    broker: &AsyncNanoKafka,
    group: &str,
    leaves: Vec<(String, String)>,
) {
    if leaves.is_empty() {
        return;
    }
    let (broker, group) = (broker.clone(), group.to_owned());
    ctx.wait(fut::wrap_future(async move {
        for (topic, member) in leaves {
            // Already gone (evicted, topic deleted, coordinator restarted): nothing to undo.
            let _ = broker.leave_group(&topic, &group, &member).await;
        }
    }));
}

/// Makes broker-made member ids unique across broker runs: a client holding an old one would
/// pass for the new member that has it.
fn nonce() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Kafka's error for a classic protocol refusal.
fn code(e: &ClassicError) -> i16 {
    match e {
        ClassicError::UnknownMemberId => ResponseError::UnknownMemberId,
        ClassicError::IllegalGeneration => ResponseError::IllegalGeneration,
        ClassicError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        ClassicError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        ClassicError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        ClassicError::MemberIdRequired(_) => ResponseError::MemberIdRequired,
        ClassicError::FencedInstanceId => ResponseError::FencedInstanceId,
    }
    .code()
}

fn string(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// The group's actor for a request naming `group`, or the error code to answer with.
async fn group_for(ctx: &RequestContext<'_>, group: &str) -> Result<Addr<KafkaGroupActor>, i16> {
    if validate_id("group", group).is_err() {
        return Err(ResponseError::InvalidGroupId.code());
    }
    ctx.shared
        .groups
        .get_or_start(ctx, group)
        .await
        .ok_or(ResponseError::CoordinatorNotAvailable.code())
}

pub async fn join_group(ctx: &RequestContext<'_>, request: JoinGroupRequest) -> JoinGroupResponse {
    let refused = |code: i16, member_id: &str| {
        JoinGroupResponse::default()
            .with_error_code(code)
            .with_generation_id(-1)
            .with_member_id(string(member_id))
            .with_protocol_name((ctx.version < 7).then(StrBytes::default))
    };
    let member_id = request.member_id.to_string();
    if let Err(e) = ctx.check_group(Operation::Read, &request.group_id) {
        return refused(e.code(), &member_id);
    }
    if request.session_timeout_ms <= 0 {
        return refused(ResponseError::InvalidSessionTimeout.code(), &member_id);
    }
    // The protocols do not mix (see `consumer`).
    if consumer::has_members(ctx, &request.group_id).await {
        return refused(ResponseError::InconsistentGroupProtocol.code(), &member_id);
    }
    // What Kafka's clients accept as a `group.instance.id` (a member id is made of it).
    let instance_id = request.group_instance_id.as_ref().map(|i| i.to_string());
    if instance_id
        .as_deref()
        .is_some_and(|i| validate_id("group instance", i).is_err())
    {
        return refused(ResponseError::InvalidRequest.code(), &member_id);
    }
    let addr = match group_for(ctx, &request.group_id).await {
        Ok(addr) => addr,
        Err(code) => return refused(code, &member_id),
    };
    let protocol_type = request.protocol_type.to_string();
    let protocols: Vec<Protocol> = request
        .protocols
        .iter()
        .map(|p| Protocol {
            name: p.name.to_string(),
            metadata: p.metadata.to_vec(),
        })
        .collect();
    // Every protocol of a consumer carries the same subscription; the first is read.
    let topics = match protocol_type.as_str() {
        "consumer" => protocols
            .first()
            .and_then(|p| protocol::subscribed_topics(&p.metadata)),
        _ => None,
    };
    let session_ms = request.session_timeout_ms as u64;
    let rebalance_ms = match ctx.version {
        0 => session_ms,
        _ => u64::try_from(request.rebalance_timeout_ms).unwrap_or(session_ms),
    };
    let join = JoinRequest {
        member_id: member_id.clone(),
        client_id: ctx.client_id.to_owned(),
        client_host: ctx.client_host(),
        session_timeout_ms: session_ms,
        rebalance_timeout_ms: rebalance_ms,
        protocol_type,
        protocols,
        topics,
        require_known_member_id: ctx.version >= 4,
        instance_id,
    };
    match addr.send(Join(join)).await {
        Err(_) => refused(ResponseError::CoordinatorNotAvailable.code(), &member_id),
        Ok(Err(ClassicError::MemberIdRequired(id))) => {
            refused(ResponseError::MemberIdRequired.code(), &id)
        }
        Ok(Err(e)) => refused(code(&e), &member_id),
        Ok(Ok(answer)) => JoinGroupResponse::default()
            .with_generation_id(answer.generation)
            .with_protocol_type(Some(string(&answer.protocol_type)))
            .with_protocol_name(Some(string(&answer.protocol_name)))
            .with_leader(string(&answer.leader))
            .with_member_id(string(&answer.member_id))
            .with_members(
                answer
                    .members
                    .into_iter()
                    .map(|(id, metadata)| {
                        JoinGroupResponseMember::default()
                            .with_member_id(StrBytes::from_string(id))
                            .with_metadata(metadata.into())
                    })
                    .collect(),
            ),
    }
}

pub async fn sync_group(ctx: &RequestContext<'_>, request: SyncGroupRequest) -> SyncGroupResponse {
    if let Err(e) = ctx.check_group(Operation::Read, &request.group_id) {
        return SyncGroupResponse::default().with_error_code(e.code());
    }
    let addr = match group_for(ctx, &request.group_id).await {
        Ok(addr) => addr,
        Err(code) => return SyncGroupResponse::default().with_error_code(code),
    };
    let sync = Sync {
        member: request.member_id.to_string(),
        instance: request.group_instance_id.as_ref().map(|i| i.to_string()),
        generation: request.generation_id,
        protocol_type: request.protocol_type.as_ref().map(|s| s.to_string()),
        protocol_name: request.protocol_name.as_ref().map(|s| s.to_string()),
        assignments: request
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
            .collect(),
    };
    let (protocol_type, protocol_name) = (request.protocol_type, request.protocol_name);
    match addr.send(sync).await {
        Err(_) => SyncGroupResponse::default()
            .with_error_code(ResponseError::CoordinatorNotAvailable.code()),
        Ok(Err(e)) => SyncGroupResponse::default().with_error_code(code(&e)),
        // v5 echoes the protocol the member named (checked equal to the group's).
        Ok(Ok(assignment)) => SyncGroupResponse::default()
            .with_protocol_type(protocol_type)
            .with_protocol_name(protocol_name)
            .with_assignment(assignment.into()),
    }
}

pub async fn heartbeat(ctx: &RequestContext<'_>, request: HeartbeatRequest) -> HeartbeatResponse {
    let error = match ctx.shared.groups.get(&request.group_id) {
        _ if !ctx.may_group(Operation::Read, &request.group_id) => {
            ResponseError::GroupAuthorizationFailed.code()
        }
        // A group this listener never served has no members.
        None => ResponseError::UnknownMemberId.code(),
        Some(addr) => {
            let beat = Beat {
                member: request.member_id.to_string(),
                instance: request.group_instance_id.as_ref().map(|i| i.to_string()),
                generation: request.generation_id,
            };
            match addr.send(beat).await {
                Err(_) => ResponseError::CoordinatorNotAvailable.code(),
                Ok(Err(e)) => code(&e),
                Ok(Ok(())) => 0,
            }
        }
    };
    HeartbeatResponse::default().with_error_code(error)
}

pub async fn leave_group(
    ctx: &RequestContext<'_>,
    request: LeaveGroupRequest,
) -> LeaveGroupResponse {
    if let Err(e) = ctx.check_group(Operation::Read, &request.group_id) {
        return LeaveGroupResponse::default().with_error_code(e.code());
    }
    // v0-2 name one member; v3+ a list (a member id, an instance id or both), each answered.
    let members: Vec<(String, Option<String>)> = match ctx.version {
        0..=2 => vec![(request.member_id.to_string(), None)],
        _ => request
            .members
            .iter()
            .map(|m| {
                let instance = m.group_instance_id.as_ref().map(|i| i.to_string());
                (m.member_id.to_string(), instance)
            })
            .collect(),
    };
    let replies = match ctx.shared.groups.get(&request.group_id) {
        None => vec![Err(ClassicError::UnknownMemberId); members.len()],
        Some(addr) => match addr.send(Leave(members.clone())).await {
            Ok(replies) => replies,
            Err(_) => {
                return LeaveGroupResponse::default()
                    .with_error_code(ResponseError::CoordinatorNotAvailable.code())
            }
        },
    };
    let codes: Vec<i16> = replies
        .iter()
        .map(|r| r.as_ref().err().map_or(0, code))
        .collect();
    match ctx.version {
        0..=2 => LeaveGroupResponse::default().with_error_code(codes[0]),
        _ => LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .zip(codes)
                .map(|((id, instance), code)| {
                    MemberResponse::default()
                        .with_member_id(StrBytes::from_string(id))
                        .with_group_instance_id(instance.map(StrBytes::from_string))
                        .with_error_code(code)
                })
                .collect(),
        ),
    }
}
