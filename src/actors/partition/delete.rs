//! `DeletePartition`: the partition's part of a topic delete.

use actix::prelude::*;

use super::{PartitionActor, Slot};
use crate::actors::supervise::guarded_reply;
use crate::error::{Error, Result};

/// Close for a topic delete: produces accepted before it are written and acknowledged, then
/// the files are closed and every parked produce and long poll is answered `UnknownTopic`, as is every later request. The
/// timers stop, so the actor ends once the last address to it is dropped. Until then its
/// slot stays `Deleted`: every later request (an `Append` from a handle's stale lane, say)
/// gets `UnknownTopic`, and a restart does not reopen the files. Sent by the `TopicActor`
/// (`DeleteTopicActors`). Errors: never (a failed close is logged: the files are deleted
/// anyway).
#[derive(Debug)]
pub struct DeletePartition;
impl Message for DeletePartition {
    type Result = Result<()>;
}

impl Handler<DeletePartition> for PartitionActor {
    type Result = Result<()>;

    fn handle(&mut self, _: DeletePartition, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DeletePartition").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, ctx| {
            act.flush(ctx);
            let topic = act.topic.clone();
            let gone = || Error::UnknownTopic {
                topic: topic.clone(),
            };
            act.produces.fail_all(gone);
            for waiter in act.take_waiters() {
                waiter.fail(gone());
            }
            for timer in act.timers.drain(..) {
                ctx.cancel_future(timer);
            }
            if let Slot::Open(p) = std::mem::replace(&mut act.slot, Slot::Deleted) {
                if let Err(e) = p.close() {
                    tracing::warn!(partition = %act.name(), error = %e, "close before delete failed");
                }
            }
            Ok(())
        })
    }
}
