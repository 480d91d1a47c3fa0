//! The topic actor's side of the Kafka listener's data path: each message goes to its
//! partition's actor.

use actix::prelude::*;

use super::TopicActor;
use crate::actors::partition::{FindKafkaOffset, GetProducers, ReadBatches, WaitForAppend};
use crate::actors::supervise::guarded_future;
use crate::error::Result;
use crate::messages::{
    BatchRead, DescribeProducers, FetchKafkaBatches, ListKafkaOffset, ListedOffset,
    WaitForKafkaAppend,
};
use crate::storage::producer_state::ActiveProducer;

impl Handler<FetchKafkaBatches> for TopicActor {
    type Result = ResponseFuture<Result<BatchRead>>;

    fn handle(&mut self, msg: FetchKafkaBatches, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "FetchKafkaBatches").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.partition(msg.partition) {
                Ok(addr) => Box::pin(addr.ask(ReadBatches {
                    offset: msg.offset,
                    max_bytes: msg.max_bytes,
                    min_one: msg.min_one,
                })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<WaitForKafkaAppend> for TopicActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: WaitForKafkaAppend, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "WaitForKafkaAppend").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.partition(msg.partition) {
                Ok(addr) => Box::pin(addr.ask(WaitForAppend {
                    offset: msg.offset,
                    wait: msg.wait,
                })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<ListKafkaOffset> for TopicActor {
    type Result = ResponseFuture<Result<Option<ListedOffset>>>;

    fn handle(&mut self, msg: ListKafkaOffset, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ListKafkaOffset").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.partition(msg.partition) {
                Ok(addr) => Box::pin(addr.ask(FindKafkaOffset { spec: msg.spec })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<DescribeProducers> for TopicActor {
    type Result = ResponseFuture<Result<Vec<ActiveProducer>>>;

    fn handle(&mut self, msg: DescribeProducers, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DescribeProducers").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.partition(msg.partition) {
                Ok(addr) => Box::pin(addr.ask(GetProducers)),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}
