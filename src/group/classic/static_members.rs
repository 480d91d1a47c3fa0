//! Static membership (KIP-345) in a classic group, as Kafka's group coordinator keeps it.
//!
//! A static member is named by its `group.instance.id` as well as its member id; the group
//! maps each instance id to the one member id it currently has (Kafka's `staticMembers`,
//! kept by the only two ways in and out of `members`, `add_member` and `remove_member`):
//! * an unknown instance joins as a new member, with no `MemberIdRequired` detour (its id
//!   begins with the instance id);
//! * a known instance joining without a member id is its process restarted: the member is
//!   kept under a new member id, with its assignment, its native memberships' id and its
//!   leadership. In a `Stable` group whose chosen protocol it leaves unchanged (and, when
//!   the broker assigns, its subscription too) that is all: it is answered the current
//!   generation at once and syncs its old assignment, and the other members see nothing. A
//!   restarted leader is told the leader it replaced (Kafka's answer to JoinGroup v0-8), so
//!   it syncs rather than assigns. Otherwise (another protocol or subscription, or the group
//!   mid-rebalance, where the leader may be assigning the old id) it is a rebalance;
//! * a request naming an instance id must come from its current member id: the replaced id,
//!   or any other, gets `FencedInstanceId`; an instance id the group does not know gets
//!   `UnknownMemberId`;
//! * such a member leaves by its session timeout, or by a LeaveGroup naming it (by member
//!   id, or by instance id alone, as admin tools do).

use super::{
    Assigning, ClassicError, ClassicGroup, ClassicMember, ClassicState, JoinRequest, JoinStep,
};

/// What became of a JoinGroup: its step, and the member id a static member's restart
/// replaced (its parked requests are to be answered `FencedInstanceId`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub step: JoinStep,
    pub fenced: Option<String>,
}

pub(super) fn joined(step: JoinStep) -> Joined {
    Joined { step, fenced: None }
}

impl JoinStep {
    /// The member id the JoinGroup is answered with.
    pub fn member_id(&self) -> &str {
        match self {
            JoinStep::Wait(id) => id,
            JoinStep::Answer(answer) => &answer.member_id,
        }
    }
}

impl ClassicGroup {
    /// The current member id of the instance `instance_id`.
    pub(super) fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.static_members.get(instance_id).map(String::as_str)
    }

    pub(super) fn add_member(&mut self, member: ClassicMember) {
        if let Some(instance) = &member.instance_id {
            self.static_members
                .insert(instance.clone(), member.id.clone());
        }
        self.members.insert(member.id.clone(), member);
    }

    pub(super) fn remove_member(&mut self, id: &str) -> Option<ClassicMember> {
        let member = self.members.remove(id)?;
        if let Some(instance) = &member.instance_id {
            self.static_members.remove(instance);
        }
        Some(member)
    }

    /// A request naming `instance_id` is its current member's.
    ///
    /// # Errors
    /// `UnknownMemberId` (an instance the group does not know), `FencedInstanceId` (the
    /// instance has another member id).
    pub(super) fn check_instance(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ClassicError> {
        let Some(instance) = instance_id else {
            return Ok(());
        };
        match self.static_member_id(instance) {
            None => Err(ClassicError::UnknownMemberId),
            Some(current) if current != member_id => {
                tracing::info!(group = %self.name, member_id, instance, current,
                    "fenced: the instance has another member id");
                Err(ClassicError::FencedInstanceId)
            }
            Some(_) => Ok(()),
        }
    }

    /// A LeaveGroup of one member: by member id (with its instance id, if given, checked),
    /// or, with no member id, by instance id alone. The removal starts a rebalance.
    ///
    /// # Errors
    /// `UnknownMemberId`, `FencedInstanceId`; nothing changes.
    pub fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now_ms: u64,
    ) -> Result<ClassicMember, ClassicError> {
        let id = match (member_id, instance_id) {
            ("", Some(instance)) => self
                .static_member_id(instance)
                .ok_or(ClassicError::UnknownMemberId)?
                .to_owned(),
            ("", None) => return Err(ClassicError::UnknownMemberId),
            (id, instance) => {
                self.check_instance(id, instance)?;
                id.to_owned()
            }
        };
        self.remove(&id, now_ms, "left")
            .ok_or(ClassicError::UnknownMemberId)
    }

    /// A JoinGroup without a member id from a known instance: its restart (see the module
    /// docs). `None` when the request names no instance the group knows.
    pub(super) fn restart_static_member(
        &mut self,
        request: &JoinRequest,
        now_ms: u64,
    ) -> Option<Joined> {
        let instance = request.instance_id.as_deref()?;
        let replaced = self.static_member_id(instance)?.to_owned();
        let mut member = self.remove_member(&replaced)?;
        let id = self.new_member_id(instance);
        let subscription_read = request.topics.is_some();
        let topics = request.topics.clone().unwrap_or_default();
        let subscription_changed =
            member.topics != topics || member.subscription_read != subscription_read;
        member.id = id.clone();
        member.client_id = request.client_id.clone();
        member.client_host = request.client_host.clone();
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.protocols = request.protocols.clone();
        member.topics = topics;
        member.subscription_read = subscription_read;
        member.last_seen_ms = now_ms;
        member.synced = false;
        self.add_member(member);
        let led = self.leader == replaced;
        if led {
            self.leader = id.clone();
        }
        tracing::info!(group = %self.name, instance, %replaced, member_id = %id,
            state = self.state.kafka_name(), "a static member restarted");
        let unchanged = self.choose_protocol().as_deref() == Some(self.protocol.as_str())
            && !(self.assigning == Assigning::Broker && subscription_changed);
        if self.state == ClassicState::Stable && unchanged {
            let mut answer = self.answer_for(&id);
            if led {
                answer.leader = replaced.clone();
                answer.members.clear();
            }
            return Some(Joined {
                step: JoinStep::Answer(answer),
                fenced: Some(replaced),
            });
        }
        if let Some(member) = self.members.get_mut(&id) {
            member.awaiting_join = true;
        }
        let cause = format!("static member {instance} restarted as {id}");
        self.prepare_rebalance(now_ms, &cause);
        self.extend_deadline();
        Some(Joined {
            fenced: Some(replaced),
            ..joined(JoinStep::Wait(id))
        })
    }
}
