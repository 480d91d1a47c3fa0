//! `AddPartitions`: the coordinator's part of a topic alter that adds partitions.

use actix::prelude::*;

use super::GroupCoordinatorActor;
use crate::actors::partition::PartitionRef;

/// The topic grew: `partitions` is every partition now (the old ones first, unchanged).
/// The members rebalance over them all; parked long polls re-plan at once, so a member's
/// new partitions are served without waiting out the poll. Sent by the `TopicActor`, which
/// has registered the group with the new partitions already. Never fails.
#[derive(Debug)]
pub struct AddPartitions {
    pub partitions: Vec<PartitionRef>,
}
impl Message for AddPartitions {
    type Result = ();
}

impl Handler<AddPartitions> for GroupCoordinatorActor {
    type Result = ();

    fn handle(&mut self, msg: AddPartitions, _: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "AddPartitions").entered();
        if msg.partitions.len() <= self.partitions.len() {
            return;
        }
        let count = msg.partitions.len() as u32;
        self.partitions = msg.partitions.into();
        self.with_state(|state, _| state.grow(count));
    }
}
