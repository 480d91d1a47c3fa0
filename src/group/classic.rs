//! A Kafka client's consumer group as the classic group protocol sees it (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup): members, the group's generation, its state and the
//! JoinGroup barrier. Plain Rust, time passed in; the Kafka listener's group actor owns one
//! per group name and does what it asks of the broker.
//!
//! # Model
//! * States are Kafka's: `Empty` (no member), `PreparingRebalance` (the barrier: waiting for
//!   every known member to send JoinGroup again), `CompletingRebalance` (joined, waiting for
//!   SyncGroups), `Stable`.
//! * A rebalance starts when a member joins or changes its protocols, leaves, is evicted, or
//!   the owner asks (a native member changed the broker's assignment). It completes when
//!   every known member has joined again, or at the rebalance deadline (the longest
//!   rebalance timeout of the members), which removes the members that did not. One that
//!   starts from `Empty` waits at least the initial rebalance delay, so members starting
//!   together land in one generation. Completion bumps the generation (an `i32`, as on the
//!   wire) by one.
//! * At each barrier the protocol the vote chose decides who assigns: the broker for one of
//!   [`BROKER_ASSIGNORS`] in a `consumer` group whose subscriptions all decoded (every
//!   member is a follower and gets, in SyncGroup, what the owner computed), else the leader
//!   the group elects, as in Kafka (Kafka Streams, custom assignors, Kafka Connect...: the
//!   leader's JoinGroup carries every member's metadata and its SyncGroup everyone's
//!   assignment, relayed as sent; the followers' SyncGroups wait for it).
//! * A JoinGroup without a member id gets one generated; from JoinGroup v4 it comes back in
//!   a `MemberIdRequired` error and counts as a member only when the client joins again
//!   with it (a pending id lapses after the broker's session timeout).
//! * A member's session timeout is at most the broker's (Kafka's
//!   `group.max.session.timeout.ms`) and above zero (NanoKafka has no configured minimum);
//!   a JoinGroup asking for another is refused with `InvalidSessionTimeout`. A member silent
//!   for longer than its session timeout is removed; one waiting in JoinGroup is alive.
//! * Static members (`group.instance.id`, KIP-345): a restarted instance takes its member's
//!   place and assignment, usually with no rebalance, and fences the id it replaced (see
//!   `static_members`).

mod static_members;
mod vote;

use static_members::joined;
pub use static_members::Joined;

use std::collections::{BTreeMap, BTreeSet};

/// Kafka's names for a classic group's states (what DescribeGroups and ListGroups report).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassicState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl ClassicState {
    pub fn kafka_name(self) -> &'static str {
        match self {
            ClassicState::Empty => "Empty",
            ClassicState::PreparingRebalance => "PreparingRebalance",
            ClassicState::CompletingRebalance => "CompletingRebalance",
            ClassicState::Stable => "Stable",
        }
    }
}

/// The assignors the broker computes assignments for (through the native groups): the
/// clients' built-in ones, whose assignments carry no user data (`RoundRobinAssigner` is
/// kafkajs's).
pub const BROKER_ASSIGNORS: [&str; 5] = [
    "range",
    "roundrobin",
    "sticky",
    "cooperative-sticky",
    "RoundRobinAssigner",
];

/// Who computes the members' assignments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assigning {
    /// The broker (see [`BROKER_ASSIGNORS`]).
    Broker,
    /// The leader the group elects (any other group), as in Kafka.
    Leader,
}

/// What the classic protocol answers instead of a success: Kafka's error codes by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassicError {
    UnknownMemberId,
    IllegalGeneration,
    RebalanceInProgress,
    InconsistentGroupProtocol,
    /// A session timeout of zero, or above the broker's (its `group.max.session.timeout.ms`).
    InvalidSessionTimeout,
    /// Join again with this member id (JoinGroup v4+).
    MemberIdRequired(String),
    /// The instance id belongs to another member id: this one was replaced.
    FencedInstanceId,
}

/// One protocol a member offers: its name and its metadata (for `consumer`, a
/// ConsumerProtocolSubscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Vec<u8>,
}

/// A JoinGroup, decoded.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// Empty for a new member.
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    /// The topics the member subscribes to, when its protocol type is `consumer` and its
    /// subscription decoded; `None` otherwise.
    pub topics: Option<BTreeSet<String>>,
    /// JoinGroup v4+: a new member gets its id in a `MemberIdRequired` error first.
    pub require_known_member_id: bool,
    /// The static member's `group.instance.id` (JoinGroup v5+); `None` for a dynamic one.
    pub instance_id: Option<String>,
}

/// A member of the group.
#[derive(Debug, Clone)]
pub struct ClassicMember {
    pub id: String,
    /// A static member's `group.instance.id`.
    pub instance_id: Option<String>,
    /// The id of its native memberships: its member id, or, for a static member that
    /// replaced others, the id the first of them joined with (kept across its restarts, so
    /// that a restart moves nothing in the native groups).
    pub native_id: String,
    pub client_id: String,
    pub client_host: String,
    session_timeout_ms: u64,
    rebalance_timeout_ms: u64,
    pub protocols: Vec<Protocol>,
    /// Subscribed topics (protocol type `consumer`).
    pub topics: BTreeSet<String>,
    /// Whether its subscription decoded: the broker can assign only such members.
    subscription_read: bool,
    last_seen_ms: u64,
    /// Has joined in the rebalance under way (its JoinGroup waits for the barrier).
    awaiting_join: bool,
    /// Has sent SyncGroup for the current generation.
    synced: bool,
    /// Its assignment in the current generation, as SyncGroup returns it.
    pub assignment: Vec<u8>,
}

impl ClassicMember {
    /// The metadata it offered for `protocol`.
    pub fn metadata(&self, protocol: &str) -> &[u8] {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map_or(&[][..], |p| &p.metadata[..])
    }
}

/// The answer to a member's JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinAnswer {
    pub member_id: String,
    pub generation: i32,
    pub protocol_type: String,
    pub protocol_name: String,
    /// Empty when the broker assigns (no member is the leader).
    pub leader: String,
    /// Every member's id and metadata for the chosen protocol, for the leader only.
    pub members: Vec<(String, Vec<u8>)>,
}

/// What became of a JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinStep {
    /// Wait for the barrier: the answer comes from [`ClassicGroup::finish_rebalance`].
    Wait(String),
    /// Answered now: a known member rejoining a settled generation with the same protocols.
    Answer(JoinAnswer),
}

/// What became of a SyncGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncStep {
    /// The member's assignment, now.
    Answer(Vec<u8>),
    /// A follower of a leader-assigned group: wait for the leader's SyncGroup.
    Wait,
    /// The leader synced: these members (the caller among them) get these assignments.
    Release(Vec<(String, Vec<u8>)>),
}

/// A rebalance that reached its barrier: who stays, who was dropped, which protocol won.
/// The owner makes the assignments (broker-assigned groups) and calls
/// [`ClassicGroup::finish_rebalance`].
#[derive(Debug, Clone)]
pub struct Barrier {
    /// Members that did not join in time, removed.
    pub removed: Vec<ClassicMember>,
    /// The chosen protocol (empty when no member is left).
    pub protocol: String,
}

/// One classic group. See the module docs.
#[derive(Debug)]
pub struct ClassicGroup {
    name: String,
    state: ClassicState,
    generation: i32,
    assigning: Assigning,
    protocol_type: String,
    protocol: String,
    leader: String,
    members: BTreeMap<String, ClassicMember>,
    /// Static members: instance id → its current member id (see `static_members`).
    static_members: BTreeMap<String, String>,
    /// Member ids handed out in `MemberIdRequired`, with when they lapse.
    pending: BTreeMap<String, u64>,
    /// The broker's session timeout: the longest any member may stay silent.
    session_timeout_ms: u64,
    initial_delay_ms: u64,
    /// While preparing: no completion before this (the initial delay) ...
    not_before_ms: u64,
    /// ... and completion, without the laggards, at this.
    deadline_ms: u64,
    /// Makes member ids unique across broker runs (ids are not persisted).
    id_nonce: u64,
    next_id: u64,
}

impl ClassicGroup {
    pub fn new(name: &str, session_timeout_ms: u64, initial_delay_ms: u64, id_nonce: u64) -> Self {
        ClassicGroup {
            name: name.to_owned(),
            state: ClassicState::Empty,
            generation: 0,
            assigning: Assigning::Broker,
            protocol_type: String::new(),
            protocol: String::new(),
            leader: String::new(),
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending: BTreeMap::new(),
            session_timeout_ms,
            initial_delay_ms,
            not_before_ms: 0,
            deadline_ms: 0,
            id_nonce,
            next_id: 0,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn state(&self) -> ClassicState {
        self.state
    }
    #[cfg(any(test, feature = "console"))]
    pub fn generation(&self) -> i32 {
        self.generation
    }
    pub fn assigning(&self) -> Assigning {
        self.assigning
    }
    pub fn protocol_type(&self) -> &str {
        &self.protocol_type
    }
    pub fn protocol(&self) -> &str {
        &self.protocol
    }
    pub fn members(&self) -> impl Iterator<Item = &ClassicMember> {
        self.members.values()
    }
    pub fn member(&self, id: &str) -> Option<&ClassicMember> {
        self.members.get(id)
    }
    /// Members waiting in JoinGroup for the barrier.
    pub fn awaiting_join(&self) -> impl Iterator<Item = &ClassicMember> {
        self.members.values().filter(|m| m.awaiting_join)
    }

    /// A JoinGroup.
    ///
    /// # Errors
    /// `MemberIdRequired` (v4+, no member id yet, not static), `UnknownMemberId` (an id or
    /// instance id this group does not know), `FencedInstanceId` (the instance id is another
    /// member id's), `InconsistentGroupProtocol` (another protocol type, no protocol in
    /// common with the members, or no protocol at all), `InvalidSessionTimeout`.
    pub fn join(&mut self, request: JoinRequest, now_ms: u64) -> Result<Joined, ClassicError> {
        self.expire_pending(now_ms);
        if request.session_timeout_ms == 0 || request.session_timeout_ms > self.session_timeout_ms {
            return Err(ClassicError::InvalidSessionTimeout);
        }
        if request.protocols.is_empty()
            || (self.state != ClassicState::Empty
                && (request.protocol_type != self.protocol_type
                    || !self.offers_common_protocol(&request.member_id, &request.protocols)))
        {
            return Err(ClassicError::InconsistentGroupProtocol);
        }
        let mut id = request.member_id.clone();
        let instance_id = request.instance_id.clone();
        if id.is_empty() {
            if let Some(restarted) = self.restart_static_member(&request, now_ms) {
                return Ok(restarted);
            }
            // Kafka's shape: the instance id first for a static member, else the client id.
            id = self.new_member_id(instance_id.as_deref().unwrap_or(&request.client_id));
            if request.require_known_member_id && instance_id.is_none() {
                let lapses = now_ms.saturating_add(self.session_timeout_ms);
                self.pending.insert(id.clone(), lapses);
                return Err(ClassicError::MemberIdRequired(id));
            }
        } else {
            self.check_instance(&id, instance_id.as_deref())?;
            if self.pending.remove(&id).is_none() && !self.members.contains_key(&id) {
                return Err(ClassicError::UnknownMemberId);
            }
        }
        if self.state == ClassicState::Empty {
            self.protocol_type = request.protocol_type.clone();
        }
        let session_timeout_ms = request.session_timeout_ms;
        let subscription_read = request.topics.is_some();
        let topics = request.topics.clone().unwrap_or_default();
        match self.members.get_mut(&id) {
            Some(member) => {
                member.last_seen_ms = now_ms;
                member.client_id = request.client_id;
                member.client_host = request.client_host;
                member.session_timeout_ms = session_timeout_ms;
                member.rebalance_timeout_ms = request.rebalance_timeout_ms;
                let unchanged = member.protocols == request.protocols;
                let settled = matches!(
                    self.state,
                    ClassicState::Stable | ClassicState::CompletingRebalance
                );
                // Kafka's rule: a follower rejoining with the same protocols is told the
                // current generation again, no rebalance (every member is a follower when
                // the broker assigns).
                if unchanged && settled && self.leader != id {
                    return Ok(joined(JoinStep::Answer(self.answer_for(&id))));
                }
                member.protocols = request.protocols;
                member.topics = topics;
                member.subscription_read = subscription_read;
                member.awaiting_join = true;
            }
            None => {
                let member = ClassicMember {
                    id: id.clone(),
                    instance_id,
                    native_id: id.clone(),
                    client_id: request.client_id,
                    client_host: request.client_host,
                    session_timeout_ms,
                    rebalance_timeout_ms: request.rebalance_timeout_ms,
                    protocols: request.protocols,
                    topics,
                    subscription_read,
                    last_seen_ms: now_ms,
                    awaiting_join: true,
                    synced: false,
                    assignment: Vec::new(),
                };
                self.add_member(member);
            }
        }
        if self.state != ClassicState::PreparingRebalance {
            self.prepare_rebalance(now_ms, &format!("{id} joined"));
        }
        self.extend_deadline();
        Ok(joined(JoinStep::Wait(id)))
    }

    /// Starts a rebalance (if none is under way): members must join again.
    pub fn prepare_rebalance(&mut self, now_ms: u64, cause: &str) {
        if self.state == ClassicState::PreparingRebalance {
            return;
        }
        let delay = match self.state {
            ClassicState::Empty => self.initial_delay_ms,
            _ => 0,
        };
        tracing::info!(group = %self.name, generation = self.generation, cause,
            "preparing a rebalance");
        self.state = ClassicState::PreparingRebalance;
        self.not_before_ms = now_ms.saturating_add(delay);
        self.deadline_ms = now_ms;
        self.extend_deadline();
    }

    /// The rebalance deadline: the longest rebalance timeout of the members, counted from
    /// the start (a member joining later cannot shorten it).
    fn extend_deadline(&mut self) {
        let longest = self
            .members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0);
        let start = self.not_before_ms;
        self.deadline_ms = self.deadline_ms.max(start.saturating_add(longest));
    }

    /// Whether the barrier is reached: every member joined (and the initial delay passed),
    /// or the deadline passed.
    pub fn barrier_reached(&self, now_ms: u64) -> bool {
        self.state == ClassicState::PreparingRebalance
            && ((now_ms >= self.not_before_ms && self.members.values().all(|m| m.awaiting_join))
                || now_ms >= self.deadline_ms)
    }

    #[cfg(test)]
    /// When the group next needs attention without a request: the end of the initial delay
    /// or the rebalance deadline, else the next session expiry.
    pub fn next_deadline(&self) -> Option<u64> {
        match self.state {
            ClassicState::PreparingRebalance if self.members.values().all(|m| m.awaiting_join) => {
                Some(self.not_before_ms)
            }
            ClassicState::PreparingRebalance => Some(self.deadline_ms),
            _ => self
                .members
                .values()
                .map(|m| {
                    m.last_seen_ms
                        .saturating_add(m.session_timeout_ms)
                        .saturating_add(1)
                })
                .min(),
        }
    }

    /// At the barrier: removes the members that did not join, picks the protocol and who
    /// assigns. The owner then makes the assignments and calls [`ClassicGroup::finish_rebalance`].
    pub fn reach_barrier(&mut self) -> Barrier {
        let laggards: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join)
            .map(|m| m.id.clone())
            .collect();
        let removed = laggards
            .iter()
            .filter_map(|id| self.remove_member(id))
            .collect();
        let protocol = self.choose_protocol().unwrap_or_default();
        self.assigning = match self.broker_can_assign() && BROKER_ASSIGNORS.contains(&&*protocol) {
            true => Assigning::Broker,
            false => Assigning::Leader,
        };
        Barrier { removed, protocol }
    }

    /// Completes the rebalance with `assignments` (broker-assigned groups; a leader-assigned
    /// group's come with its leader's SyncGroup): bumps the generation, elects a leader
    /// (leader-assigned groups) and returns every waiting member's JoinGroup answer.
    pub fn finish_rebalance(
        &mut self,
        protocol: String,
        mut assignments: BTreeMap<String, Vec<u8>>,
    ) -> Vec<JoinAnswer> {
        self.generation = self.generation.wrapping_add(1).max(1);
        self.protocol = protocol;
        if self.members.is_empty() {
            self.state = ClassicState::Empty;
            self.protocol.clear();
            self.leader.clear();
            tracing::info!(group = %self.name, generation = self.generation, "group is empty");
            return Vec::new();
        }
        self.state = ClassicState::CompletingRebalance;
        self.leader = match self.assigning {
            Assigning::Broker => String::new(),
            Assigning::Leader if self.members.contains_key(&self.leader) => self.leader.clone(),
            Assigning::Leader => self.members.keys().next().cloned().unwrap_or_default(),
        };
        for member in self.members.values_mut() {
            member.awaiting_join = false;
            member.synced = false;
            member.assignment = assignments.remove(&member.id).unwrap_or_default();
        }
        tracing::info!(group = %self.name, generation = self.generation,
            protocol = %self.protocol, members = ?self.members.keys().collect::<Vec<_>>(),
            "rebalance complete");
        let ids: Vec<String> = self.members.keys().cloned().collect();
        ids.iter().map(|id| self.answer_for(id)).collect()
    }

    fn answer_for(&self, id: &str) -> JoinAnswer {
        let members = match self.leader == id {
            true => self
                .members
                .values()
                .map(|m| (m.id.clone(), m.metadata(&self.protocol).to_vec()))
                .collect(),
            false => Vec::new(),
        };
        JoinAnswer {
            member_id: id.to_owned(),
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone(),
            members,
        }
    }

    /// A SyncGroup. `assignments`: the leader's, in a leader-assigned group.
    ///
    /// # Errors
    /// `UnknownMemberId`, `FencedInstanceId`, `IllegalGeneration`, `RebalanceInProgress`
    /// (preparing a rebalance: join again), `InconsistentGroupProtocol` (v5: another protocol
    /// type or name).
    pub fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol: (Option<&str>, Option<&str>),
        assignments: Vec<(String, Vec<u8>)>,
        now_ms: u64,
    ) -> Result<SyncStep, ClassicError> {
        self.check_member(member_id, instance_id, generation, now_ms)?;
        if self.state == ClassicState::PreparingRebalance {
            return Err(ClassicError::RebalanceInProgress);
        }
        let (protocol_type, protocol_name) = protocol;
        if protocol_type.is_some_and(|t| t != self.protocol_type)
            || protocol_name.is_some_and(|n| n != self.protocol)
        {
            return Err(ClassicError::InconsistentGroupProtocol);
        }
        let leader_assigned = self.assigning == Assigning::Leader;
        if let Some(m) = self.members.get_mut(member_id) {
            m.synced = true;
        }
        let step = match (self.state, leader_assigned) {
            (ClassicState::CompletingRebalance, true) if self.leader == member_id => {
                let mut given: BTreeMap<String, Vec<u8>> = assignments.into_iter().collect();
                for m in self.members.values_mut() {
                    m.assignment = given.remove(&m.id).unwrap_or_default();
                }
                self.state = ClassicState::Stable;
                let released = self
                    .members
                    .values()
                    .filter(|m| m.synced)
                    .map(|m| (m.id.clone(), m.assignment.clone()))
                    .collect();
                SyncStep::Release(released)
            }
            (ClassicState::CompletingRebalance, true) => SyncStep::Wait,
            _ => SyncStep::Answer(self.members[member_id].assignment.clone()),
        };
        if !leader_assigned && self.members.values().all(|m| m.synced) {
            self.state = ClassicState::Stable;
        }
        Ok(step)
    }

    /// A Heartbeat.
    ///
    /// # Errors
    /// `UnknownMemberId`, `FencedInstanceId`, `IllegalGeneration`, `RebalanceInProgress`
    /// (join again).
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now_ms: u64,
    ) -> Result<(), ClassicError> {
        self.check_member(member_id, instance_id, generation, now_ms)?;
        match self.state {
            ClassicState::PreparingRebalance => Err(ClassicError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// Whether an OffsetCommit may be written: a member of the current generation (not
    /// while its assignment is being completed), or a standalone commit (generation -1,
    /// whatever member id it names: a KIP-848 client reading by `assign()` sends the one it
    /// made) to a group without members, as Kafka's `validateOffsetCommit` decides.
    ///
    /// # Errors
    /// `UnknownMemberId`, `FencedInstanceId`, `IllegalGeneration`, `RebalanceInProgress`.
    pub fn check_commit(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now_ms: u64,
    ) -> Result<(), ClassicError> {
        if generation < 0 && self.members.is_empty() {
            return Ok(());
        }
        self.check_member(member_id, instance_id, generation, now_ms)?;
        match self.state {
            ClassicState::CompletingRebalance => Err(ClassicError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// Kafka's order: the instance id (`UnknownMemberId`, `FencedInstanceId`), the member
    /// id, the generation.
    fn check_member(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now_ms: u64,
    ) -> Result<(), ClassicError> {
        self.check_instance(member_id, instance_id)?;
        let current = self.generation;
        let member = self
            .members
            .get_mut(member_id)
            .ok_or(ClassicError::UnknownMemberId)?;
        if generation != current {
            return Err(ClassicError::IllegalGeneration);
        }
        member.last_seen_ms = now_ms;
        Ok(())
    }

    /// Removes `member_id` (LeaveGroup, or its native membership was evicted) and starts a
    /// rebalance. `None` when it is not a member.
    pub fn remove(&mut self, member_id: &str, now_ms: u64, cause: &str) -> Option<ClassicMember> {
        let removed = self.remove_member(member_id)?;
        self.prepare_rebalance(now_ms, &format!("{member_id} {cause}"));
        Some(removed)
    }

    /// Removes the members silent for longer than their session timeout (a member waiting
    /// in JoinGroup is not silent) and lapsed pending ids; a removal starts a rebalance.
    pub fn expire(&mut self, now_ms: u64) -> Vec<ClassicMember> {
        self.expire_pending(now_ms);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                !m.awaiting_join && now_ms.saturating_sub(m.last_seen_ms) > m.session_timeout_ms
            })
            .map(|m| m.id.clone())
            .collect();
        let removed: Vec<ClassicMember> = expired
            .iter()
            .filter_map(|id| self.remove_member(id))
            .collect();
        if !removed.is_empty() {
            self.prepare_rebalance(now_ms, &format!("session timeout of {expired:?}"));
        }
        removed
    }

    fn expire_pending(&mut self, now_ms: u64) {
        self.pending.retain(|_, lapses| now_ms <= *lapses);
    }

    /// `<prefix>-<nonce>-<n>`, Kafka's shape (`client.id`, or a static member's instance id,
    /// then something unique), within the 249 bytes a member id may have.
    fn new_member_id(&mut self, client_id: &str) -> String {
        self.next_id += 1;
        let prefix: String = client_id
            .chars()
            .filter(|c| !c.is_control())
            .take(100)
            .collect();
        let prefix = if prefix.is_empty() { "member" } else { &prefix };
        format!("{prefix}-{:x}-{}", self.id_nonce, self.next_id)
    }
}

/// Whether `protocol` names a cooperative assignor (Kafka's and librdkafka's name).
pub fn is_cooperative(protocol: &str) -> bool {
    protocol == "cooperative-sticky"
}

#[cfg(test)]
#[path = "classic_tests.rs"]
mod tests;
