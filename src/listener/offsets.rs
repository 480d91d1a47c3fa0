//! ListOffsets (v1 to v7) and OffsetForLeaderEpoch (v2 to v4).
//!
//! ListOffsets: -2 is the log start, -1 the log end (the high watermark; also under
//! read_committed, as there are no transactions), -3 (v7, Kafka's max timestamp) the first
//! record with the largest timestamp, a timestamp `t >= 0` the first record whose timestamp
//! is at least `t`, answered with that record's timestamp, or offset and timestamp -1 when
//! no record is that recent. Leader epoch 0.
//!
//! Both need DESCRIBE on each topic (ACLs): `TOPIC_AUTHORIZATION_FAILED` for each partition
//! of a topic the principal may not describe.
//!
//! OffsetForLeaderEpoch: every batch is of leader epoch 0, so epoch 0 ends at the log end;
//! a larger epoch, or -1, is unknown: epoch and end offset -1 (no error), as Kafka answers for
//! an epoch it has no entry at or after. A `current_leader_epoch` above 0 is
//! `UNKNOWN_LEADER_EPOCH` (the client knows a leader this broker does not).

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
};
use kafka_protocol::ResponseError;

use super::errors::to_kafka;
use super::request::RequestContext;
use crate::messages::OffsetSpec;
use crate::security::acl::Operation;

/// The only leader epoch there is.
const EPOCH: i32 = 0;

pub async fn list_offsets(
    ctx: &RequestContext<'_>,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let answer = list_one(ctx, topic.name.0.as_str(), p.partition_index, p.timestamp).await;
            let response =
                ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            let (error, offset, timestamp, epoch) = match answer {
                Ok(Some((offset, timestamp))) => (0, offset, timestamp, EPOCH),
                Ok(None) => (0, -1, -1, -1),
                Err(e) => (e.code(), -1, -1, -1),
            };
            let response = response
                .with_error_code(error)
                .with_offset(offset)
                .with_timestamp(timestamp);
            // The field exists from v4 on; a set field an older version lacks does not encode.
            let response = match ctx.version >= 4 {
                true => response.with_leader_epoch(epoch),
                false => response,
            };
            partitions.push(response);
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

/// `(offset, timestamp)` for one partition, `None` when no record matches.
async fn list_one(
    ctx: &RequestContext<'_>,
    topic: &str,
    index: i32,
    timestamp: i64,
) -> Result<Option<(i64, i64)>, ResponseError> {
    let spec = match timestamp {
        -2 => OffsetSpec::Earliest,
        -1 => OffsetSpec::Latest,
        -3 if ctx.version >= 7 => OffsetSpec::MaxTimestamp,
        t if t >= 0 => OffsetSpec::Timestamp(t as u64),
        // Kafka's later specs (-4 earliest local, -5 earliest tiered) need later versions.
        _ => return Err(ResponseError::UnsupportedVersion),
    };
    ctx.check_topic(Operation::Describe, topic)?;
    let partition = u32::try_from(index).map_err(|_| ResponseError::UnknownTopicOrPartition)?;
    let listed = ctx
        .broker
        .list_kafka_offset(topic, partition, spec)
        .await
        .map_err(|e| to_kafka(&e))?;
    Ok(listed.map(|l| {
        let timestamp = l.timestamp_ms.map_or(-1, |t| t as i64);
        (l.offset as i64, timestamp)
    }))
}

pub async fn offset_for_leader_epoch(
    ctx: &RequestContext<'_>,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let answer = EpochEndOffset::default().with_partition(p.partition);
            let undefined = answer.clone().with_leader_epoch(-1).with_end_offset(-1);
            let answer = if let Err(e) = ctx.check_topic(Operation::Describe, &topic.topic) {
                undefined.with_error_code(e.code())
            } else if p.current_leader_epoch > EPOCH {
                undefined.with_error_code(ResponseError::UnknownLeaderEpoch.code())
            } else {
                let end = match u32::try_from(p.partition) {
                    Ok(partition) => ctx
                        .broker
                        .list_kafka_offset(topic.topic.0.as_str(), partition, OffsetSpec::Latest)
                        .await
                        .map_err(|e| to_kafka(&e)),
                    Err(_) => Err(ResponseError::UnknownTopicOrPartition),
                };
                match end {
                    Err(e) => undefined.with_error_code(e.code()),
                    Ok(_) if p.leader_epoch != EPOCH => undefined,
                    Ok(end) => answer
                        .with_leader_epoch(EPOCH)
                        .with_end_offset(end.map_or(-1, |l| l.offset as i64)),
                }
            };
            partitions.push(answer);
        }
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions),
        );
    }
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
