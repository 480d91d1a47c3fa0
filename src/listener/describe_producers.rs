//! DescribeProducers: each partition's idempotent producers (id, epoch, last sequence, last
//! write), as the storage keeps them to recognise retries. No transactions: no coordinator
//! epoch, no open transaction (-1 for both).

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::errors::to_kafka;
use super::request::RequestContext;
use crate::security::acl::Operation;

pub async fn handle(
    ctx: &RequestContext<'_>,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
        for index in topic.partition_indexes {
            let answer = PartitionResponse::default().with_partition_index(index);
            partitions.push(match producers(ctx, &name, index).await {
                Ok(active) => answer.with_active_producers(active),
                Err(e) => answer.with_error_code(e.code()),
            });
        }
        topics.push(
            TopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DescribeProducersResponse::default().with_topics(topics)
}

async fn producers(
    ctx: &RequestContext<'_>,
    topic: &str,
    partition: i32,
) -> Result<Vec<ProducerState>, ResponseError> {
    ctx.check_topic(Operation::Read, topic)?;
    let partition = u32::try_from(partition).map_err(|_| ResponseError::UnknownTopicOrPartition)?;
    let active = ctx
        .broker
        .describe_producers(topic, partition)
        .await
        .map_err(|e| to_kafka(&e))?;
    Ok(active
        .into_iter()
        .map(|p| {
            ProducerState::default()
                .with_producer_id(ProducerId(p.producer_id))
                .with_producer_epoch(i32::from(p.epoch))
                .with_last_sequence(p.last_sequence)
                .with_last_timestamp(p.last_timestamp_ms)
                .with_coordinator_epoch(-1)
                .with_current_txn_start_offset(-1)
        })
        .collect())
}
