//! A partition's committed offsets: native commits (the last processed offset), Kafka
//! clients' commits (set to an exact offset, the next one to read), reads and lag.

use actix::prelude::*;

use super::{CommitOffset, GroupLag, PartitionActor};
use crate::actors::supervise::guarded_reply;
use crate::error::Result;
use crate::storage::Committed;

/// Set `group`'s committed offset to `offset` exactly, with `metadata` (the next offset to
/// read, Kafka's meaning; any offset, backwards and past the log end too; no member
/// needed). Sent by `TopicActor` for a `SetCommittedOffset` (a Kafka client's
/// OffsetCommit, or a `ResetOffset`). Errors: `OffsetMetadataTooLarge`, `Io`,
/// `PartitionRestarted`, `PartitionFailed`.
#[derive(Debug)]
pub struct SetCommitted {
    pub group: String,
    pub offset: u64,
    pub metadata: String,
}
impl Message for SetCommitted {
    type Result = Result<()>;
}

/// `group`'s committed offset and its metadata, `None` when it has none here. Sent by `TopicActor` to every
/// partition for a `CommittedOffsets` (a Kafka client's OffsetFetch): a read of one number,
/// no stats walk. Errors: `PartitionRestarted`, `PartitionFailed`.
#[derive(Debug)]
pub struct GetCommitted {
    pub group: String,
}
impl Message for GetCommitted {
    type Result = Result<Option<Committed>>;
}

impl Handler<SetCommitted> for PartitionActor {
    type Result = Result<()>;

    fn handle(&mut self, msg: SetCommitted, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "SetCommitted").entered();
        self.store_commit(ctx, &msg.group, |p| {
            p.set_committed(&msg.group, msg.offset, &msg.metadata)
        })
    }
}

impl Handler<GetCommitted> for PartitionActor {
    type Result = Result<Option<Committed>>;

    fn handle(&mut self, msg: GetCommitted, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "GetCommitted").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            Ok(act.open_partition()?.committed_with_metadata(&msg.group))
        })
    }
}

impl Handler<CommitOffset> for PartitionActor {
    type Result = Result<()>;

    fn handle(&mut self, msg: CommitOffset, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CommitOffset").entered();
        self.store_commit(ctx, &msg.group, |p| p.commit(&msg.group, msg.offset))
    }
}

impl Handler<GroupLag> for PartitionActor {
    type Result = Result<Option<u64>>;

    fn handle(&mut self, msg: GroupLag, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "GroupLag").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            Ok(act.open_partition()?.lag(&msg.group, msg.group_exists))
        })
    }
}
