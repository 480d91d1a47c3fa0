//! The commits that carry a push subscription's retry counts
//! ([`AttemptNote`](crate::group::delivery::AttemptNote), in the commit's metadata):
//! [`CommitAttempt`] writes one, fenced as a member's commit; [`CommittedAttempts`] reads
//! them back for the partitions a member was just given.

use actix::prelude::*;
use futures::future::join_all;

use super::GroupCoordinatorActor;
use crate::actors::partition::{GetCommitted, SetCommitted};
use crate::actors::supervise::guarded_future;
use crate::error::{Error, Result};
use crate::group::delivery::AttemptNote;

/// A retry's commit: `partition`'s committed offset becomes `offset` (the retried record,
/// the next to read; the records before it are processed) with `note`, fenced by
/// generation and ownership as [`CommitAsMember`](super::CommitAsMember). Sent straight by
/// a push subscription. Errors: as `CommitAsMember`.
#[derive(Debug)]
pub struct CommitAttempt {
    pub member: String,
    pub generation: u64,
    pub partition: u32,
    pub offset: u64,
    pub note: AttemptNote,
}
impl Message for CommitAttempt {
    type Result = Result<()>;
}

/// The group's commit of each of `partitions` with its note, when it has both: (partition,
/// committed offset and note). Sent by a push subscription when it enters a generation; a
/// partition that cannot answer, or is unknown, has none. Never fails.
#[derive(Debug)]
pub struct CommittedAttempts {
    pub partitions: Vec<u32>,
}
impl Message for CommittedAttempts {
    type Result = Result<Vec<(u32, Option<(u64, AttemptNote)>)>>;
}

impl Handler<CommitAttempt> for GroupCoordinatorActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: CommitAttempt, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CommitAttempt").entered();
        let name = self.name();
        guarded_future(self, ctx, &name, |act, _| {
            let fenced = act.with_state(|state, now| {
                state.check_fenced(&msg.member, msg.generation, Some(msg.partition), now)
            });
            if let Err(e) = fenced {
                return Box::pin(async { Err(e) });
            }
            let commit = SetCommitted {
                group: act.group.to_string(),
                offset: msg.offset,
                metadata: msg.note.metadata(),
            };
            Box::pin(act.partitions[msg.partition as usize].ask(commit))
        })
    }
}

impl Handler<CommittedAttempts> for GroupCoordinatorActor {
    type Result = ResponseFuture<Result<Vec<(u32, Option<(u64, AttemptNote)>)>>>;

    fn handle(&mut self, msg: CommittedAttempts, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CommittedAttempts").entered();
        let (partitions, group) = (self.partitions.clone(), self.group.to_string());
        let reads = msg.partitions.into_iter().map(move |partition| {
            let read = partitions.get(partition as usize).map(|p| {
                p.ask(GetCommitted {
                    group: group.clone(),
                })
            });
            async move {
                let committed = match read {
                    Some(read) => read.await.ok().flatten(),
                    None => None,
                };
                let note =
                    committed.and_then(|c| Some((c.offset, AttemptNote::parse(&c.metadata)?)));
                Ok::<_, Error>((partition, note))
            }
        });
        let reads: Vec<_> = reads.collect();
        Box::pin(async move { join_all(reads).await.into_iter().collect() })
    }
}
