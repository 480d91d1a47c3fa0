//! Static members of a consumer-protocol group (an `InstanceId`), as Kafka keeps them: one
//! leaving with epoch -2 stays, with its partitions and no rebalance, until its session
//! timeout (counted from its last heartbeat); a join with its instance id within it takes its
//! place under the new member id, at epoch 0 with its assignment. Its native memberships keep
//! the first member's id, so the native groups see no change. A join with an instance id
//! whose member has not left is `UnreleasedInstanceId`; any other request naming an instance
//! id must come from the member that has it (`FencedInstanceId`; `UnknownMemberId` if none
//! has it).

use std::collections::BTreeSet;

use super::{ConsumerError, ConsumerGroup, HeartbeatStep, Partitions, STATIC_LEAVE_EPOCH};

impl ConsumerGroup {
    /// Kafka's checks of a request naming static member `instance`: a join while another
    /// member has it and has not left for a while is `UnreleasedInstanceId` (the same member
    /// id joining again is not: it starts over); any other request must come from the member
    /// that has it. `Some`: the join takes the place of this member, gone for a while.
    pub(super) fn check_instance(
        &self,
        member_id: &str,
        instance: &str,
        epoch: i32,
    ) -> Result<Option<String>, ConsumerError> {
        let holder = self
            .members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance));
        match holder {
            Some(m) if epoch == 0 && m.id == member_id => Ok(None),
            Some(m) if epoch == 0 && m.member_epoch == STATIC_LEAVE_EPOCH => Ok(Some(m.id.clone())),
            Some(m) if epoch == 0 => Err(ConsumerError::UnreleasedInstanceId(format!(
                "Static member {member_id} with instance id {instance} cannot join the group \
                 because the instance id is owned by {} member.",
                m.id
            ))),
            None if epoch == 0 => Ok(None),
            None => Err(ConsumerError::UnknownMemberId),
            Some(m) if m.id != member_id => Err(ConsumerError::FencedInstanceId(format!(
                "Static member {member_id} with instance id {instance} was fenced by member {}.",
                m.id
            ))),
            Some(_) => Ok(None),
        }
    }

    /// A static member's leave with epoch -2: it stays, with its partitions, for its
    /// instance's next member to take over within its session timeout; no rebalance.
    pub(super) fn leave_for_a_while(
        &mut self,
        member_id: &str,
    ) -> Result<HeartbeatStep, ConsumerError> {
        let member = self
            .members
            .get_mut(member_id)
            .ok_or(ConsumerError::UnknownMemberId)?;
        member.member_epoch = STATIC_LEAVE_EPOCH;
        member.revoking = None;
        tracing::info!(group = %self.name, member = member_id, "static member left for a while");
        Ok(HeartbeatStep::Left {
            member_id: member_id.to_owned(),
            native: member.native_id.clone(),
            epoch: STATIC_LEAVE_EPOCH,
            topics: BTreeSet::new(),
        })
    }

    /// Member `member_id` joins as the next member of `previous`'s instance: it is
    /// `previous` under a new id, at epoch 0, with its assignment and native memberships.
    pub(super) fn take_over(&mut self, previous: &str, member_id: &str, now_ms: u64) {
        let Some(mut member) = self.members.remove(previous) else {
            return;
        };
        member.id = member_id.to_owned();
        (member.member_epoch, member.previous_epoch) = (0, 0);
        member.owned = Partitions::new();
        member.last_seen_ms = now_ms;
        tracing::info!(group = %self.name, member = member_id, replaced = previous,
            "static member joined again");
        self.members.insert(member_id.to_owned(), member);
    }
}
