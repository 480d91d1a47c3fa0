//! `DeleteGroup`: the coordinator's part of a topic delete.

use std::sync::atomic::Ordering;

use actix::prelude::*;

use super::GroupCoordinatorActor;

/// The topic is being deleted: stop the eviction timer and wake every parked long poll,
/// whose re-plan is then answered `UnknownTopic` (so is every later one). Memberships are
/// dropped with the actor, which ends once the topic and the polls in flight let go of its
/// address. Sent by the `TopicActor`. Never fails.
#[derive(Debug)]
pub struct DeleteGroup;
impl Message for DeleteGroup {
    type Result = ();
}

impl Handler<DeleteGroup> for GroupCoordinatorActor {
    type Result = ();

    fn handle(&mut self, _: DeleteGroup, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "DeleteGroup").entered();
        self.deleted = true;
        if let Some(timer) = self.evict_timer.take() {
            ctx.cancel_future(timer);
        }
        self.announced_generation.store(u64::MAX, Ordering::Release);
        self.kept_waits.clear();
        for waiter in self.rebalance_waiters.drain(..) {
            let _ = waiter.send(());
        }
    }
}
