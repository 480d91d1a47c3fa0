//! `ReconfigurePartition`: the partition's part of a topic alter.

use actix::prelude::*;

use super::{PartitionActor, Slot};
use crate::actors::supervise::guarded;
use crate::config::TopicConfig;

/// The topic's settings changed (retention, `max_size`, backpressure, timestamp type,
/// segment size: the next append rolls by it; cleanup policy: the next produce follows its
/// key rule): take them at once. A lowered retention drops the records beyond it now (not at
/// the next append), and a raised `max_size` admits parked produces that now fit. Parked
/// produces follow the new rules too: one without a key under a compacting policy is
/// answered `KeyRequired`, and under `Reject` those that still do not fit `PartitionFull`.
/// The time retention timer restarts with the new period. A partition that is not open takes
/// the settings at its next open. Sent by the `TopicActor`. Never fails (a retention that
/// cannot run is logged and retried, as after an append).
#[derive(Debug)]
pub struct ReconfigurePartition {
    pub config: TopicConfig,
}
impl Message for ReconfigurePartition {
    type Result = ();
}

impl Handler<ReconfigurePartition> for PartitionActor {
    type Result = ();

    fn handle(&mut self, msg: ReconfigurePartition, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "ReconfigurePartition").entered();
        let name = self.name();
        guarded(self, ctx, &name, |act, ctx| {
            let config = msg.config;
            act.log_config = config.log_config(act.settings.fsync, act.settings.max_record_bytes);
            act.max_size = config.max_size;
            act.retention_ms = act.log_config.retention.ms;
            act.cleaning = crate::partition::CleaningPlan::for_topic(
                &config,
                act.settings.cleaner_key_map_bytes,
            );
            act.produces.set_backpressure(config.backpressure);
            act.produces.set_cleanup_policy(config.cleanup_policy);
            let now = act.settings.clock.now_ms();
            let Slot::Open(p) = &mut act.slot else {
                return;
            };
            act.produces.recheck_parked(p);
            if let Err(e) = p.reconfigure(&act.log_config, act.max_size, now) {
                tracing::warn!(partition = %act.name(), error = %e, "retention after alter failed; will retry");
            }
            for timer in act.timers.drain(..) {
                ctx.cancel_future(timer);
            }
            act.start_timers(ctx);
            act.admit_parked(ctx);
        });
    }
}
