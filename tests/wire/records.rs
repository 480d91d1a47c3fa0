//! Record batches as a Kafka producer sends them (kafka-protocol's encoder), and the
//! requests of the data path.

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};

use crate::client_batch::{self, BatchOptions, ClientRecord};

/// A fixed CreateTime in the past (2023-11-14), so records are never "in the future".
pub const T0: i64 = 1_700_000_000_000;

pub fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// One batch of `values` (keys `key-i`, a header `h: i`, timestamps `T0 + i`), from producer
/// `producer_id` (-1: none) starting at `sequence`.
pub fn batch(values: &[&str], compression: Compression, producer_id: i64, sequence: i32) -> Bytes {
    let records: Vec<ClientRecord> = values
        .iter()
        .enumerate()
        .map(|(i, v)| ClientRecord {
            timestamp: T0 + i as i64,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(v.to_string())),
            headers: vec![("h", Some(Bytes::from(i.to_string())))],
        })
        .collect();
    let options = BatchOptions::producer_id(compression, producer_id, sequence);
    client_batch::encode(&records, options)
}

/// A produce of `records` to `topic`/`partition` with `acks`.
pub fn produce(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

/// A sessionless fetch of `(partition, offset)`s of `topic`.
pub fn fetch(topic: &str, partitions: &[(i32, i64)], max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(fetch_partitions(partitions))])
}

/// The `(partition, offset)`s of a fetch's topic, up to 1 MiB each.
pub fn fetch_partitions(partitions: &[(i32, i64)]) -> Vec<FetchPartition> {
    partitions
        .iter()
        .map(|&(p, offset)| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)
        })
        .collect()
}

/// A fetch response read from its frame (what `WireClient::read_frame` returns).
pub fn decode_fetch(mut frame: Bytes, version: i16) -> kafka_protocol::messages::FetchResponse {
    use kafka_protocol::messages::{FetchResponse, ResponseHeader};
    use kafka_protocol::protocol::{Decodable, HeaderVersion};
    ResponseHeader::decode(&mut frame, FetchResponse::header_version(version)).unwrap();
    FetchResponse::decode(&mut frame, version).unwrap()
}

/// One record of `value` produced natively to `topic`'s `partition`.
pub fn produce_to(broker: &nanokafka::NanoKafka, topic: &str, partition: u32, value: &[u8]) {
    let record = nanokafka::ProduceRecord {
        key: None,
        value: value.to_vec(),
    };
    broker
        .produce_batch_raw(topic, Some(partition), vec![record])
        .unwrap();
}

/// The records of a fetch's record bytes, in order.
pub fn decode(records: &Bytes) -> Vec<Record> {
    let mut buf = records.clone();
    RecordBatchDecoder::decode_all(&mut buf)
        .unwrap()
        .into_iter()
        .flat_map(|set| set.records)
        .collect()
}
