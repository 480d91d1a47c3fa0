//! A Kafka client's consumer group as the KIP-848 consumer group protocol sees it
//! (ConsumerGroupHeartbeat): members, the epochs, subscriptions and reconciliation. Plain
//! Rust, time passed in; the Kafka listener's consumer group actor owns one per group name and
//! asks the broker's native groups for the assignment (see `listener::groups::consumer`).
//!
//! # Model
//! * The **group epoch** goes up by one whenever the group's membership or a member's
//!   subscription changes (a member joins, leaves or is fenced, a subscription's topics
//!   change, a regex matches other topics). The target assignment is computed at once, so the
//!   assignment epoch is the group epoch.
//! * A member joins with epoch 0 and a member id its client generated (v1; for a v0 request
//!   without one the broker makes one), leaves with -1. Its **member epoch** becomes
//!   the group epoch once it holds nothing outside its new assignment; until then it stays
//!   where it was (Kafka's `UNREVOKED_PARTITIONS`), and its assignment is what it holds of the
//!   new one. A partition the new assignment gives a member while another still holds it
//!   reaches it in a later heartbeat, at the same epoch (Kafka's `UNRELEASED_PARTITIONS`): the
//!   owner computing the assignment (the native groups) withholds it until its holder reported
//!   it gone, so a partition is revoked from its owner before it is assigned elsewhere.
//! * A heartbeat with an epoch above the member's, or below it except its previous epoch with
//!   no partition outside its assignment (its last answer was lost), is `FencedMemberEpoch`.
//! * Subscriptions: topic names and/or a regex (RE2/J syntax, matched against the whole topic
//!   name by the `regex` crate, whose syntax is RE2's), evaluated against the topics that
//!   exist at each heartbeat, so topics created or deleted since are noticed then.
//! * Server assignors: [`SERVER_ASSIGNORS`], chosen per member by its `ServerAssignor`; the
//!   group uses the one most of its members name (ties: the first in [`SERVER_ASSIGNORS`];
//!   none named: `uniform`, Kafka's default).
//! * A member silent for longer than the broker's session timeout is removed (Kafka's
//!   `group.consumer.session.timeout.ms`). A member asked to revoke partitions has its
//!   rebalance timeout (`RebalanceTimeoutMs`) to report them gone, counted from the
//!   heartbeat whose answer asked it; heartbeats do not reset it, and it starts again only
//!   once the member gave up what it was asked to and must revoke more. At that deadline a
//!   member still holding any of them is removed (Kafka fences it: the group epoch goes up,
//!   its partitions go to their new owners, and its next heartbeat is `UnknownMemberId`).
//!   Both are done by [`ConsumerGroup::expire`]; [`ConsumerGroup::rebalance_deadline`] says
//!   when the next rebalance timeout falls due.
//! * Static members (an `InstanceId`) are Kafka's: one leaving with epoch -2 keeps its
//!   partitions until its session timeout, for its instance's next member (see
//!   `static_members`).
//! * OffsetCommit (v9) and OffsetFetch (v9) are fenced by member epoch as Kafka fences them
//!   ([`ConsumerGroup::check_commit`], [`ConsumerGroup::check_fetch`]).

use std::collections::{BTreeMap, BTreeSet};

mod static_members;

/// The assignors the broker runs for the consumer protocol, the default first. `uniform` is
/// dealt per topic by the native groups' sticky assignor, `range` by their range assignor
/// (Kafka's range assignor is per topic too).
pub const SERVER_ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// The epoch a member leaves with.
pub const LEAVE_EPOCH: i32 = -1;
/// The epoch a static member leaves with for a while: it keeps its partitions for its
/// instance's next member.
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// Topic name → partitions.
pub type Partitions = BTreeMap<String, BTreeSet<u32>>;

/// Why a request is refused: Kafka's error codes by name, with Kafka's message where it
/// gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerError {
    InvalidRequest(String),
    UnsupportedAssignor(String),
    InvalidRegularExpression(String),
    UnknownMemberId,
    FencedMemberEpoch,
    /// A commit or offset fetch with an epoch other than the member's.
    StaleMemberEpoch,
    /// A join with the instance id of a static member that has not left.
    UnreleasedInstanceId(String),
    /// A member id other than the one its instance id now has.
    FencedInstanceId(String),
}

/// A ConsumerGroupHeartbeat, decoded; `owned` already by topic name (a topic id the broker
/// does not know is dropped: its topic is gone, nobody can be given it).
#[derive(Debug, Clone, Default)]
pub struct HeartbeatRequest {
    pub version: i16,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    /// `None`: unchanged since the last heartbeat.
    pub subscribed_topic_names: Option<BTreeSet<String>>,
    /// `None`: unchanged; `Some("")`: no regex any more.
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// `None`: unchanged since the last heartbeat.
    pub owned: Option<Partitions>,
    pub client_id: String,
    pub client_host: String,
}

/// What the owner must do for a heartbeat before [`ConsumerGroup::finish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatStep {
    /// The member left: leave these native groups as `native`, answer with `epoch`.
    Left {
        member_id: String,
        native: String,
        epoch: i32,
        topics: BTreeSet<String>,
    },
    Reconcile(Reconcile),
}

/// Join (or beat) the native group of each of `topics` and `lingering` as `native`, saying
/// the member's client holds `holding`, with `assignor` if the native group is new; leave
/// those of `dropped`. Then call [`ConsumerGroup::finish`] with what the native groups of
/// `topics` gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconcile {
    pub member_id: String,
    /// Its name in the native groups: its member id, or for a static member the member id
    /// of its instance's first member, whose partitions later ones take over.
    pub native: String,
    pub topics: BTreeSet<String>,
    /// Topics it no longer subscribes to but still holds partitions of: it stays in their
    /// native groups, so that their new owners wait for its revocation.
    pub lingering: BTreeSet<String>,
    pub dropped: BTreeSet<String>,
    pub holding: Partitions,
    pub assignor: &'static str,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    /// `None`: unchanged since the last answer.
    pub assignment: Option<Partitions>,
}

/// A member of the group.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    previous_epoch: i32,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: BTreeSet<String>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The topics its subscription resolves to among those that exist.
    pub topics: BTreeSet<String>,
    /// What it was last told it owns.
    pub assigned: Partitions,
    /// What the native groups last gave it (its target, less what others still hold).
    pub target: Partitions,
    /// What its client last said it holds.
    owned: Partitions,
    /// The revocation it was asked for and has not done: its rebalance timer.
    revoking: Option<Revocation>,
    /// The topics whose native group it is a member of, and its name there.
    native: BTreeSet<String>,
    native_id: String,
    last_seen_ms: u64,
}

/// Partitions a member was asked to revoke, and when it is fenced if it still holds any.
#[derive(Debug, Clone)]
struct Revocation {
    partitions: Partitions,
    deadline_ms: u64,
}

/// Kafka's names for a consumer group's states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    /// A member's epoch is not the group's yet.
    Reconciling,
    Stable,
}

#[cfg(feature = "console")]
impl ConsumerMember {
    /// Its name in the native groups (the first id of a restarted static member).
    pub fn native_id(&self) -> &str {
        &self.native_id
    }
}

impl ConsumerGroupState {
    pub fn kafka_name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// One consumer-protocol group. See the module docs.
#[derive(Debug)]
pub struct ConsumerGroup {
    name: String,
    group_epoch: i32,
    members: BTreeMap<String, ConsumerMember>,
    session_timeout_ms: u64,
    /// Makes broker-made member ids unique across broker runs.
    id_nonce: u64,
    next_id: u64,
}

impl ConsumerGroup {
    pub fn new(name: &str, session_timeout_ms: u64, id_nonce: u64) -> Self {
        ConsumerGroup {
            name: name.to_owned(),
            group_epoch: 0,
            members: BTreeMap::new(),
            session_timeout_ms,
            id_nonce,
            next_id: 0,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }
    pub fn members(&self) -> impl Iterator<Item = &ConsumerMember> {
        self.members.values()
    }
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.members.values().all(|m| {
            // A static member gone for a while reconciles when its next member joins.
            m.member_epoch == self.group_epoch || m.member_epoch == STATIC_LEAVE_EPOCH
        }) {
            ConsumerGroupState::Stable
        } else {
            ConsumerGroupState::Reconciling
        }
    }

    /// The assignor most members name (see the module docs).
    pub fn assignor(&self) -> &'static str {
        let votes = |name: &str| {
            let named = self.members.values();
            named
                .filter(|m| m.server_assignor.as_deref() == Some(name))
                .count()
        };
        let most = SERVER_ASSIGNORS.iter().map(|a| votes(a)).max().unwrap_or(0);
        SERVER_ASSIGNORS
            .into_iter()
            .find(|a| votes(a) == most)
            .unwrap_or(SERVER_ASSIGNORS[0])
    }

    /// A heartbeat's first half: validates it, then joins, leaves or checks the member, and
    /// resolves its subscription against `existing` topics.
    ///
    /// # Errors
    /// `InvalidRequest`, `UnsupportedAssignor`, `InvalidRegularExpression` (see
    /// [`validate`]), `UnknownMemberId` (a non-zero epoch from no member), `FencedMemberEpoch`,
    /// `UnreleasedInstanceId` and `FencedInstanceId` (see `static_members`).
    pub fn begin(
        &mut self,
        request: HeartbeatRequest,
        existing: &BTreeSet<String>,
        now_ms: u64,
    ) -> Result<HeartbeatStep, ConsumerError> {
        validate(&request)?;
        let id = match request.member_id.is_empty() {
            true => self.new_member_id(),
            false => request.member_id.clone(),
        };
        let instance = request.instance_id.as_deref();
        let replaced = match instance {
            Some(instance) => self.check_instance(&id, instance, request.member_epoch)?,
            None => None,
        };
        if request.member_epoch == STATIC_LEAVE_EPOCH {
            return self.leave_for_a_while(&id);
        }
        if request.member_epoch == LEAVE_EPOCH {
            let gone = self
                .remove(&id, "left")
                .ok_or(ConsumerError::UnknownMemberId)?;
            return Ok(HeartbeatStep::Left {
                member_id: gone.id,
                native: gone.native_id,
                epoch: LEAVE_EPOCH,
                topics: gone.native,
            });
        }
        if let Some(previous) = &replaced {
            self.take_over(previous, &id, now_ms);
        } else if request.member_epoch == 0 {
            // A join, or a fenced member joining again: it starts over, holding nothing.
            // Its native memberships stay its own until it joined them again.
            let (native, native_id) = match self.members.remove(&id) {
                Some(rejoined) => (rejoined.native, rejoined.native_id),
                None => (BTreeSet::new(), id.clone()),
            };
            let member = ConsumerMember {
                id: id.clone(),
                instance_id: None,
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                member_epoch: 0,
                previous_epoch: 0,
                rebalance_timeout_ms: request.rebalance_timeout_ms,
                subscribed_topic_names: BTreeSet::new(),
                subscribed_topic_regex: None,
                server_assignor: None,
                topics: BTreeSet::new(),
                assigned: Partitions::new(),
                target: Partitions::new(),
                owned: Partitions::new(),
                revoking: None,
                native,
                native_id,
                last_seen_ms: now_ms,
            };
            self.members.insert(id.clone(), member);
            self.bump(&format!("{id} joined"));
        }
        let member = self
            .members
            .get_mut(&id)
            .ok_or(ConsumerError::UnknownMemberId)?;
        check_epoch(member, request.member_epoch, request.owned.as_ref())?;
        member.last_seen_ms = now_ms;
        member.client_id = request.client_id;
        member.client_host = request.client_host;
        if request.instance_id.is_some() {
            member.instance_id = request.instance_id;
        }
        if request.rack_id.is_some() {
            member.rack_id = request.rack_id;
        }
        if request.rebalance_timeout_ms >= 0 {
            member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        }
        if let Some(names) = request.subscribed_topic_names {
            member.subscribed_topic_names = names;
        }
        if let Some(regex) = request.subscribed_topic_regex {
            member.subscribed_topic_regex = Some(regex).filter(|r| !r.is_empty());
        }
        if request.server_assignor.is_some() {
            member.server_assignor = request.server_assignor;
        }
        if let Some(owned) = request.owned {
            member.owned = owned;
        }
        let topics = resolve(member, existing);
        let changed = topics != member.topics;
        member.topics = topics.clone();
        let holding = union(&member.owned, &member.assigned);
        let (lingering, dropped) = member
            .native
            .difference(&topics)
            .cloned()
            .partition(|t| holding.get(t).is_some_and(|ps| !ps.is_empty()));
        let native = member.native_id.clone();
        if changed && (request.member_epoch != 0 || replaced.is_some()) {
            self.bump(&format!("{id}'s subscription changed"));
        }
        Ok(HeartbeatStep::Reconcile(Reconcile {
            member_id: id,
            native,
            topics,
            lingering,
            dropped,
            holding,
            assignor: self.assignor(),
        }))
    }

    /// A heartbeat's second half: `granted` is what the native groups give the member now
    /// (topic → partitions), `joined` the topics whose native group it is now a member of
    /// (`lingering` ones included).
    /// Moves its epoch (see the module docs), starts or stops its rebalance timer, and
    /// answers. `request_epoch` is the epoch the heartbeat came with; `full`: it carried the
    /// member's whole state (a join, or its owned partitions); `now_ms`: when it came.
    pub fn finish(
        &mut self,
        member_id: &str,
        granted: Partitions,
        joined: BTreeSet<String>,
        request_epoch: i32,
        full: bool,
        now_ms: u64,
    ) -> Option<HeartbeatAnswer> {
        let group_epoch = self.group_epoch;
        let member = self.members.get_mut(member_id)?;
        member.native = joined;
        let granted: Partitions = granted
            .into_iter()
            .filter(|(_, ps)| !ps.is_empty())
            .collect();
        let before = (member.member_epoch, member.assigned.clone());
        // What its client may hold: what it reported, and what it was told since.
        let holding = union(&member.owned, &member.assigned);
        let (kept, pending) = split(&holding, &granted);
        if !pending.is_empty() {
            // It keeps what it holds of its new assignment until it reported the rest gone.
            member.assigned = kept;
            // Kafka's timer runs from when the member is asked until it gave up all of it.
            let asked = member.revoking.as_ref();
            if asked.is_none_or(|r| intersection(&pending, &r.partitions).is_empty()) {
                let timeout = u64::try_from(member.rebalance_timeout_ms).unwrap_or(0);
                member.revoking = Some(Revocation {
                    partitions: pending,
                    deadline_ms: now_ms.saturating_add(timeout),
                });
            }
        } else {
            member.revoking = None;
            if member.member_epoch != group_epoch {
                member.previous_epoch = member.member_epoch;
                member.member_epoch = group_epoch;
            }
            member.assigned = granted.clone();
        }
        member.target = granted;
        let changed = before != (member.member_epoch, member.assigned.clone());
        let send = changed || full || request_epoch != member.member_epoch;
        Some(HeartbeatAnswer {
            member_id: member.id.clone(),
            member_epoch: member.member_epoch,
            assignment: send.then(|| member.assigned.clone()),
        })
    }

    /// Removes the members silent for longer than the session timeout and those whose
    /// rebalance timeout fell due at or before `now_ms` (see the module docs); each comes
    /// back as its name in its native groups, with the topics whose native group it must
    /// leave.
    pub fn expire(&mut self, now_ms: u64) -> Vec<(String, BTreeSet<String>)> {
        let session_ms = self.session_timeout_ms;
        let due: Vec<(String, &str)> = self
            .members
            .values()
            .filter_map(|m| {
                let cause = if now_ms.saturating_sub(m.last_seen_ms) > session_ms {
                    "timed out"
                } else if m.revoking.as_ref().is_some_and(|r| r.deadline_ms <= now_ms) {
                    "was fenced: it did not revoke within its rebalance timeout"
                } else {
                    return None;
                };
                Some((m.id.clone(), cause))
            })
            .collect();
        due.into_iter()
            .filter_map(|(id, cause)| self.remove(&id, cause))
            .map(|m| (m.native_id, m.native))
            .collect()
    }

    /// When the earliest rebalance timeout falls due, if any member is asked to revoke.
    pub fn rebalance_deadline(&self) -> Option<u64> {
        let revoking = self.members.values().filter_map(|m| m.revoking.as_ref());
        revoking.map(|r| r.deadline_ms).min()
    }

    /// Whether an OffsetCommit may be written, as Kafka's `ConsumerGroup.validateOffsetCommit`:
    /// any commit with a negative epoch while the group has no members; else the member's,
    /// with its current epoch.
    ///
    /// # Errors
    /// `UnknownMemberId`, `StaleMemberEpoch`.
    pub fn check_commit(&self, member_id: &str, epoch: i32) -> Result<(), ConsumerError> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        self.check_member_epoch(member_id, epoch)
    }

    /// Whether an OffsetFetch (v9) may read, as Kafka's `ConsumerGroup.validateOffsetFetch`:
    /// without a member id and with a negative epoch, always; else the member's, with its
    /// current epoch.
    ///
    /// # Errors
    /// `UnknownMemberId`, `StaleMemberEpoch`.
    pub fn check_fetch(&self, member_id: Option<&str>, epoch: i32) -> Result<(), ConsumerError> {
        match member_id {
            None if epoch < 0 => Ok(()),
            _ => self.check_member_epoch(member_id.unwrap_or_default(), epoch),
        }
    }

    fn check_member_epoch(&self, member_id: &str, epoch: i32) -> Result<(), ConsumerError> {
        let member = self
            .members
            .get(member_id)
            .ok_or(ConsumerError::UnknownMemberId)?;
        match member.member_epoch == epoch {
            true => Ok(()),
            false => Err(ConsumerError::StaleMemberEpoch),
        }
    }

    fn remove(&mut self, member_id: &str, cause: &str) -> Option<ConsumerMember> {
        let gone = self.members.remove(member_id)?;
        self.bump(&format!("{member_id} {cause}"));
        Some(gone)
    }

    fn bump(&mut self, cause: &str) {
        self.group_epoch = self.group_epoch.saturating_add(1);
        tracing::info!(group = %self.name, group_epoch = self.group_epoch, cause,
            "consumer group epoch bumped");
    }

    /// A v0 member without an id: Kafka's broker makes one; unique across broker runs.
    fn new_member_id(&mut self) -> String {
        self.next_id += 1;
        format!("member-{:x}-{}", self.id_nonce, self.next_id)
    }
}

/// Kafka's checks of a ConsumerGroupHeartbeat's fields (its `throwIfConsumerGroupHeartbeat
/// RequestIsInvalid`).
///
/// # Errors
/// `InvalidRequest` (with Kafka's message), `UnsupportedAssignor`, `InvalidRegularExpression`.
pub fn validate(request: &HeartbeatRequest) -> Result<(), ConsumerError> {
    let invalid = |why: &str| Err(ConsumerError::InvalidRequest(why.to_owned()));
    if request.version >= 1 && request.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if request.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if request.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    match request.member_epoch {
        0 => {
            if request.rebalance_timeout_ms < 0 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if request.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            let names = request.subscribed_topic_names.as_ref();
            if names.is_none_or(BTreeSet::is_empty) && request.subscribed_topic_regex.is_none() {
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                );
            }
        }
        STATIC_LEAVE_EPOCH if request.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        e if e > 0 || e == LEAVE_EPOCH || e == STATIC_LEAVE_EPOCH => {
            if request.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
        }
        _ => return invalid("MemberEpoch is invalid."),
    }
    if let Some(assignor) = &request.server_assignor {
        if !SERVER_ASSIGNORS.contains(&assignor.as_str()) {
            return Err(ConsumerError::UnsupportedAssignor(format!(
                "ServerAssignor {assignor} is not supported. Supported assignors: {}.",
                SERVER_ASSIGNORS.join(", ")
            )));
        }
    }
    if let Some(regex) = request.subscribed_topic_regex.as_deref() {
        compile(regex)?;
    }
    Ok(())
}

/// A subscription regex, matched against whole topic names (Kafka's `Pattern.matches`).
fn compile(regex: &str) -> Result<regex::Regex, ConsumerError> {
    regex::Regex::new(&format!("^(?:{regex})$"))
        .map_err(|e| ConsumerError::InvalidRegularExpression(format!("{regex}: {e}")))
}

/// The topics of `existing` the member subscribes to, by name or regex.
fn resolve(member: &ConsumerMember, existing: &BTreeSet<String>) -> BTreeSet<String> {
    // Validated when it was sent.
    let regex = member
        .subscribed_topic_regex
        .as_deref()
        .and_then(|r| compile(r).ok());
    existing
        .iter()
        .filter(|t| {
            member.subscribed_topic_names.contains(*t)
                || regex.as_ref().is_some_and(|r| r.is_match(t))
        })
        .cloned()
        .collect()
}

/// Kafka's rule: an epoch above the member's is fenced; one below it is fenced unless it is
/// the previous epoch and the member holds nothing outside its assignment (the answer that
/// moved its epoch was lost).
fn check_epoch(
    member: &ConsumerMember,
    epoch: i32,
    owned: Option<&Partitions>,
) -> Result<(), ConsumerError> {
    let lost_answer = || {
        epoch == member.previous_epoch
            && owned.is_some_and(|o| {
                o.iter()
                    .all(|(t, ps)| ps.iter().all(|p| contains(&member.assigned, t, *p)))
            })
    };
    if epoch > member.member_epoch || (epoch < member.member_epoch && !lost_answer()) {
        return Err(ConsumerError::FencedMemberEpoch);
    }
    Ok(())
}

fn contains(partitions: &Partitions, topic: &str, partition: u32) -> bool {
    partitions
        .get(topic)
        .is_some_and(|ps| ps.contains(&partition))
}

fn union(a: &Partitions, b: &Partitions) -> Partitions {
    let mut all = a.clone();
    for (topic, ps) in b {
        all.entry(topic.clone()).or_default().extend(ps);
    }
    all
}

/// The partitions of `a` that are in `b`, and those that are not.
fn split(a: &Partitions, b: &Partitions) -> (Partitions, Partitions) {
    let (mut both, mut only) = (Partitions::new(), Partitions::new());
    for (topic, ps) in a {
        let (inside, outside): (BTreeSet<u32>, BTreeSet<u32>) =
            ps.iter().partition(|p| contains(b, topic, **p));
        for (into, part) in [(&mut both, inside), (&mut only, outside)] {
            if !part.is_empty() {
                into.insert(topic.clone(), part);
            }
        }
    }
    (both, only)
}

fn intersection(a: &Partitions, b: &Partitions) -> Partitions {
    split(a, b).0
}

#[cfg(test)]
#[path = "consumer_protocol_tests.rs"]
mod tests;
