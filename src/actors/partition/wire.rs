//! The partition actor's side of the Kafka listener's data path: raw batch reads, the long
//! poll of a Fetch (parked on the append path, woken by the group commit that writes), and
//! offsets by spec.

use std::time::Duration;

use actix::prelude::*;
use futures::channel::oneshot;

use super::{PartitionActor, Slot, Waiter};
use crate::actors::supervise::{guarded_future, guarded_reply};
use crate::error::Result;
use crate::messages::{ListedOffset, OffsetSpec};
use crate::storage::producer_state::ActiveProducer;
use crate::storage::BatchRead;

/// Whole batches from `offset`; see `messages::FetchKafkaBatches`. Sent by `TopicActor`. The
/// segment is read straight into the buffer the listener sends.
/// Errors: `OffsetOutOfRange`, `Corrupt`, `Io`, `PartitionRestarted`, `PartitionFailed`.
#[derive(Debug)]
pub struct ReadBatches {
    pub offset: u64,
    pub max_bytes: usize,
    pub min_one: bool,
}
impl Message for ReadBatches {
    type Result = Result<BatchRead>;
}

/// Resolves once the log end is past `offset`, or after `wait`, or on a restart or close
/// (all answer `Ok`: the fetch that follows reads and meets any error). Sent by `TopicActor`
/// for a Kafka Fetch's long poll (`WaitForKafkaAppend`); parked with the group polls' waits
/// and woken by the same write. A partition that is not open answers at once. Never fails
/// while the actor runs.
#[derive(Debug)]
pub struct WaitForAppend {
    pub offset: u64,
    pub wait: Duration,
}
impl Message for WaitForAppend {
    type Result = Result<()>;
}

/// An offset by [`OffsetSpec`]; see `messages::ListKafkaOffset`. Sent by `TopicActor` (also
/// for the bounds a `ResetOffset` checks). Errors: `Corrupt`, `Io`, `PartitionRestarted`,
/// `PartitionFailed`.
#[derive(Debug)]
pub struct FindKafkaOffset {
    pub spec: OffsetSpec,
}
impl Message for FindKafkaOffset {
    type Result = Result<Option<ListedOffset>>;
}

/// The idempotent producers the partition remembers; see `messages::DescribeProducers`.
/// Sent by `TopicActor`. Errors: `PartitionRestarted`, `PartitionFailed`.
#[derive(Debug)]
pub struct GetProducers;
impl Message for GetProducers {
    type Result = Result<Vec<ActiveProducer>>;
}

impl Handler<GetProducers> for PartitionActor {
    type Result = Result<Vec<ActiveProducer>>;

    fn handle(&mut self, _: GetProducers, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "GetProducers").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            Ok(act.open_partition()?.active_producers())
        })
    }
}

impl Handler<ReadBatches> for PartitionActor {
    type Result = Result<BatchRead>;

    fn handle(&mut self, msg: ReadBatches, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ReadBatches").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            let read =
                act.open_partition()?
                    .read_batches(msg.offset, msg.max_bytes, msg.min_one)?;
            act.metrics.fetched(records_in(&read), read.bytes.len());
            Ok(read)
        })
    }
}

impl Handler<WaitForAppend> for PartitionActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: WaitForAppend, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "WaitForAppend").entered();
        let name = self.name();
        guarded_future(self, ctx, &name, |act, _| {
            let ready = match &act.slot {
                Slot::Open(p) => p.log_end_offset() > msg.offset,
                _ => true, // the fetch reads now and meets the error
            };
            if ready || msg.wait.is_zero() {
                return Box::pin(async { Ok(()) });
            }
            // The same waiters as the group polls: every write of the group commit wakes
            // them all, a restart or a close too (a fetch then reads and reports).
            act.waiters.retain(|w| !w.is_canceled());
            let (tx, rx) = oneshot::channel();
            act.waiters.push(Waiter::Append(tx));
            Box::pin(async move {
                let _ = actix_rt::time::timeout(msg.wait, rx).await;
                Ok(())
            })
        })
    }
}

impl Handler<FindKafkaOffset> for PartitionActor {
    type Result = Result<Option<ListedOffset>>;

    fn handle(&mut self, msg: FindKafkaOffset, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "FindKafkaOffset").entered();
        let name = self.name();
        guarded_reply(self, ctx, &name, |act, _| {
            let p = act.open_partition()?;
            let bound = |offset| {
                Some(ListedOffset {
                    offset,
                    timestamp_ms: None,
                })
            };
            let by_time = |(offset, timestamp_ms)| ListedOffset {
                offset,
                timestamp_ms: Some(timestamp_ms),
            };
            Ok(match msg.spec {
                OffsetSpec::Earliest => bound(p.log_start_offset()),
                OffsetSpec::Latest => bound(p.log_end_offset()),
                OffsetSpec::Timestamp(t) => p.record_for_timestamp(t)?.map(by_time),
                OffsetSpec::MaxTimestamp => p.record_with_max_timestamp()?.map(by_time),
            })
        })
    }
}

/// The records in a read's whole batches: from the first batch's base offset (its first 8
/// bytes) to the offset after the last; 0 for an empty read.
fn records_in(read: &BatchRead) -> u64 {
    match read.bytes.first_chunk::<8>() {
        Some(base) => read.next_offset.saturating_sub(u64::from_be_bytes(*base)),
        None => 0,
    }
}
