//! A partition's committed offsets as Kafka clients see them: set to an exact offset (the
//! next offset to read), and read back one group at a time.

use actix::prelude::*;

use super::PartitionActor;
use crate::actors::supervise::{guarded, guarded_reply};
use crate::error::{Error, Result};

/// Set `group`'s committed offset to `offset` exactly (the next offset to read, Kafka's
/// meaning; backwards too). Sent by `TopicActor` for a Kafka client's OffsetCommit.
/// Errors: `OffsetOutOfRange` (past the log end), `Io`, `PartitionRestarted`,
/// `PartitionFailed`.
#[derive(Debug)]
pub struct SetCommitted {
    pub group: String,
    pub offset: u64,
}
impl Message for SetCommitted {
    type Result = Result<()>;
}

/// `group`'s committed offset, `None` when it has none here. Sent by `TopicActor` for a Kafka
/// client's OffsetFetch. Errors: `PartitionRestarted`, `PartitionFailed`.
#[derive(Debug)]
pub struct GetCommitted {
    pub group: String,
}
impl Message for GetCommitted {
    type Result = Result<Option<u64>>;
}

impl Handler<SetCommitted> for PartitionActor {
    type Result = Result<()>;

    fn handle(&mut self, msg: SetCommitted, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "SetCommitted").entered();
        let name = self.name();
        guarded(self, ctx, &name, |act, ctx| {
            let result = act.open_partition()?.set_committed(&msg.group, msg.offset);
            if matches!(result, Err(Error::Io { .. })) {
                ctx.stop();
            }
            result?;
            // As after a native commit: the group now counts from its commit, and a
            // commit that moved forward may free room for parked produces.
            act.registered.remove(&msg.group);
            act.admit_parked(ctx);
            Ok(())
        })
        .unwrap_or_else(|| Err(self.restarted()))
    }
}

impl Handler<GetCommitted> for PartitionActor {
    type Result = Result<Option<u64>>;

    fn handle(&mut self, msg: GetCommitted, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "GetCommitted").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            Ok(act.open_partition()?.committed(&msg.group))
        })
    }
}
