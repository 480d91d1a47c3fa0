//! Deleting on request what a partition keeps: its oldest records (Kafka's DeleteRecords:
//! the log start moves, the groups' lag shrinks with it) or a group's committed offset
//! (OffsetDelete, DeleteGroups); parked produces get the room either frees.

use actix::prelude::*;

use super::{PartitionActor, Slot};
use crate::actors::supervise::guarded;
use crate::error::{Error, Result};

/// Move the log start up to `before`. Reply: the log start after. Sent by `TopicActor` for
/// a [`crate::messages::DeleteRecords`]. Errors: `OffsetOutOfRange` (past the log end), `Io`
/// (the actor restarts), `PartitionRestarted`, `PartitionFailed`.
#[derive(Debug)]
pub struct DeleteRecordsBefore {
    pub before: u64,
}
impl Message for DeleteRecordsBefore {
    type Result = Result<u64>;
}

impl Handler<DeleteRecordsBefore> for PartitionActor {
    type Result = Result<u64>;

    fn handle(&mut self, msg: DeleteRecordsBefore, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DeleteRecordsBefore").entered();
        let name = self.name();
        guarded(self, ctx, &name, |act, ctx| {
            let moved = act.open_partition()?.delete_records_before(msg.before);
            if matches!(moved, Err(Error::Io { .. })) {
                ctx.stop();
            }
            let start = moved?;
            if let Slot::Open(p) = &act.slot {
                act.lag.update_lags(|group| p.lag(group, true));
            }
            act.admit_parked(ctx);
            Ok(start)
        })
        .unwrap_or_else(|| Err(self.restarted()))
    }
}

/// Forget `group` here: its committed offset and its registration (backpressure stops
/// waiting for it). Reply: whether it had either. Sent by `TopicActor` for a
/// `ForgetGroup`. Errors: `Io` (the journal could not be rewritten; nothing forgotten),
/// `PartitionRestarted`, `PartitionFailed`.
#[derive(Debug)]
pub struct ForgetPartitionGroup {
    pub group: String,
}
impl Message for ForgetPartitionGroup {
    type Result = Result<bool>;
}

impl Handler<ForgetPartitionGroup> for PartitionActor {
    type Result = Result<bool>;

    fn handle(&mut self, msg: ForgetPartitionGroup, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ForgetPartitionGroup").entered();
        let name = self.name();
        guarded(self, ctx, &name, |act, ctx| {
            let forgot = act.open_partition()?.forget_group(&msg.group)?;
            act.registered.remove(&msg.group);
            act.lag.forget(&msg.group);
            act.admit_parked(ctx);
            Ok(forgot)
        })
        .unwrap_or_else(|| Err(self.restarted()))
    }
}
