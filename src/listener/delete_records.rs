//! DeleteRecords: moves each partition's log start (Kafka's low watermark) up to the offset
//! asked for, -1 meaning the high watermark (everything). Each partition is answered on its
//! own, with its low watermark after or its error.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::ResponseError;

use super::errors::to_kafka;
use super::request::RequestContext;
use crate::messages::OffsetSpec;
use crate::security::acl::Operation;

/// Kafka's "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub async fn handle(
    ctx: &RequestContext<'_>,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let result = DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1);
            let outcome = delete(ctx, &name, p.partition_index, p.offset).await;
            partitions.push(match outcome {
                Ok(low) => result.with_low_watermark(i64::try_from(low).unwrap_or(i64::MAX)),
                Err(e) => result.with_error_code(e.code()),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// Deletes the records of `topic`/`partition` below `offset`; the low watermark after.
async fn delete(
    ctx: &RequestContext<'_>,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<u64, ResponseError> {
    ctx.check_topic(Operation::Delete, topic)?;
    let partition = u32::try_from(partition).map_err(|_| ResponseError::UnknownTopicOrPartition)?;
    let before = match offset {
        HIGH_WATERMARK => {
            let end = ctx
                .broker
                .list_kafka_offset(topic, partition, OffsetSpec::Latest)
                .await
                .map_err(|e| to_kafka(&e))?;
            end.map_or(0, |l| l.offset)
        }
        offset => u64::try_from(offset).map_err(|_| ResponseError::OffsetOutOfRange)?,
    };
    let deleted = ctx.broker.delete_records(topic, partition, before).await;
    if let Ok(low) = deleted {
        tracing::info!(
            topic,
            partition,
            low_watermark = low,
            client_id = ctx.client_id,
            "records deleted on a DeleteRecords request"
        );
    }
    deleted.map_err(|e| to_kafka(&e))
}
