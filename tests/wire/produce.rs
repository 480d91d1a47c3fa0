//! Produce through the listener: batches as a Kafka producer sends them, read back natively;
//! acks=0; refusals that change nothing; idempotent producers.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiVersionsRequest, InitProducerIdRequest, MetadataRequest, ProduceResponse,
};
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use nanokafka::{Backpressure, NanoKafka, TimestampType, TopicConfig};

use crate::client::{correlation_id, WireClient};
use crate::client_batch::{self, BatchOptions, ClientRecord};
use crate::common::listening_broker;
use crate::records::{batch, produce, T0};

fn log_end(broker: &NanoKafka, topic: &str, partition: usize) -> u64 {
    broker.stats().unwrap().topics[topic].partitions[partition].log_end_offset
}

/// The one partition's answer: (error code, base offset).
fn answer(response: &ProduceResponse) -> (i16, i64) {
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

#[test]
fn batches_in_every_codec_are_read_back_natively_with_keys_headers_and_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let mut client = WireClient::connect(addr);
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for (n, codec) in codecs.into_iter().enumerate() {
        let response = client.call(&produce("t", 0, batch(&["a", "b"], codec, -1, 0), -1), 9);
        assert_eq!(answer(&response), (0, 2 * n as i64), "{codec:?}");
        let p = &response.responses[0].partition_responses[0];
        assert_eq!((p.log_append_time_ms, p.log_start_offset), (-1, 0));
    }
    broker.join_group("t", "g", "m").unwrap();
    let records = broker
        .poll_batch_raw("t", "g", "m", 100, Duration::from_secs(5))
        .unwrap();
    assert_eq!(records.len(), 10);
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record.offset, i as u64);
        assert_eq!(record.value, if i % 2 == 0 { b"a" } else { b"b" });
        assert_eq!(
            record.key.as_deref(),
            Some(format!("key-{}", i % 2).as_bytes())
        );
        assert_eq!(record.timestamp_ms, (T0 + (i % 2) as i64) as u64);
        assert_eq!(record.headers.len(), 1);
        assert_eq!(record.headers[0].key, "h");
        assert_eq!(
            record.headers[0].value.as_deref(),
            Some((i % 2).to_string().as_bytes())
        );
    }
}

#[test]
fn acks_0_gets_no_response_and_the_records_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let mut client = WireClient::connect(addr);
    client.send(
        &produce("t", 0, batch(&["x"], Compression::None, -1, 0), 0),
        9,
    );
    // The next response on the connection is the ApiVersions one: none came for the produce.
    let id = client.send(&ApiVersionsRequest::default(), 3);
    let frame = client.read_frame().unwrap();
    assert_eq!(correlation_id(&frame), id);
    assert_eq!(log_end(&broker, "t", 0), 1);
}

#[test]
fn an_acks_0_produce_that_fails_closes_its_connection_so_the_producer_notices() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let good = || batch(&["x"], Compression::None, -1, 0);
    let mut bad_crc = good().to_vec();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;
    let failing = [
        ("unknown partition", produce("t", 7, good(), 0)),
        ("unknown topic", produce("nope", 0, good(), 0)),
        ("corrupt batch", produce("t", 0, Bytes::from(bad_crc), 0)),
    ];
    for (what, request) in failing {
        let mut client = WireClient::connect(addr);
        client.send(&request, 9);
        // Had the connection stayed open, this would be answered.
        client.send(&ApiVersionsRequest::default(), 3);
        assert!(
            client.read_frame().is_none(),
            "{what}: the connection closes"
        );
    }
    assert_eq!(log_end(&broker, "t", 0), 0, "nothing was written");
    // A good acks=0 produce still gets no answer, and the connection serves on.
    let mut client = WireClient::connect(addr);
    client.send(&produce("t", 0, good(), 0), 9);
    let id = client.send(&ApiVersionsRequest::default(), 3);
    assert_eq!(correlation_id(&client.read_frame().unwrap()), id);
    assert_eq!(log_end(&broker, "t", 0), 1);
}

#[test]
fn refused_batches_change_nothing_and_get_kafkas_error_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let mut client = WireClient::connect(addr);
    let good = batch(&["a"], Compression::None, -1, 0);
    let mut bad_crc = good.to_vec();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;
    let mut magic_1 = good.to_vec();
    magic_1[16] = 1;
    let mut transactional = good.to_vec();
    transactional[22] |= 0x10;
    let cases = [
        (Bytes::from(bad_crc), ResponseError::CorruptMessage),
        (Bytes::from(magic_1), ResponseError::InvalidRecord),
        (
            Bytes::from(transactional),
            ResponseError::TransactionalIdAuthorizationFailed,
        ),
        (good.slice(..good.len() - 3), ResponseError::CorruptMessage),
        (Bytes::new(), ResponseError::InvalidRecord),
    ];
    for (records, error) in cases {
        let response = client.call(&produce("t", 0, records, -1), 9);
        assert_eq!(answer(&response), (error.code(), -1), "{error:?}");
        let message = &response.responses[0].partition_responses[0].error_message;
        assert!(message.is_some(), "v8+ says why");
    }
    // zstd needs v7.
    let zstd = batch(&["z"], Compression::Zstd, -1, 0);
    let response = client.call(&produce("t", 0, zstd, -1), 6);
    assert_eq!(
        answer(&response).0,
        ResponseError::UnsupportedCompressionType.code()
    );
    // A producer clock more than an hour ahead.
    let future = {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let record = ClientRecord {
            timestamp: now + 2 * 3_600_000,
            value: Some(Bytes::from_static(b"v")),
            ..ClientRecord::default()
        };
        client_batch::encode(&[record], BatchOptions::default())
    };
    let response = client.call(&produce("t", 0, future, -1), 9);
    assert_eq!(answer(&response).0, ResponseError::InvalidTimestamp.code());
    // An invalid acks value.
    let response = client.call(&produce("t", 0, good.clone(), 2), 9);
    assert_eq!(
        answer(&response).0,
        ResponseError::InvalidRequiredAcks.code()
    );
    assert_eq!(log_end(&broker, "t", 0), 0, "nothing was written");
    // The connection still serves.
    assert_eq!(answer(&client.call(&produce("t", 0, good, -1), 9)), (0, 0));
}

#[test]
fn an_unknown_topic_or_partition_is_refused_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let mut client = WireClient::connect(addr);
    let records = batch(&["a"], Compression::None, -1, 0);
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let response = client.call(&produce("nope", 0, records.clone(), -1), 9);
    assert_eq!(answer(&response).0, unknown);
    let response = client.call(&produce("t", 7, records, -1), 9);
    assert_eq!(answer(&response).0, unknown);
    let metadata = client.call(&MetadataRequest::default().with_topics(None), 12);
    assert_eq!(metadata.topics.len(), 1, "only t exists");
}

#[test]
fn a_full_partition_under_reject_is_a_retriable_error_that_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let config = TopicConfig::default()
        .max_size(1)
        .backpressure(Backpressure::Reject);
    broker.create_topic("t", config).unwrap();
    let mut client = WireClient::connect(addr);
    let records = || batch(&["a"], Compression::None, -1, 0);
    assert_eq!(
        answer(&client.call(&produce("t", 0, records(), -1), 9)),
        (0, 0)
    );
    let response = client.call(&produce("t", 0, records(), -1), 9);
    let error = ResponseError::try_from_code(answer(&response).0).unwrap();
    assert_eq!(error, ResponseError::NotEnoughReplicas);
    assert!(error.is_retriable());
    let message = response.responses[0].partition_responses[0]
        .error_message
        .as_ref()
        .unwrap();
    assert!(message.contains("full"), "{message}");
    assert_eq!(log_end(&broker, "t", 0), 1);
}

#[test]
fn an_idempotent_retry_gets_its_original_offsets_also_after_a_restart_and_a_gap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let mut client = WireClient::connect(addr);
    let init = client.call(
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1),
        4,
    );
    assert_eq!(init.error_code, 0);
    assert_eq!(init.producer_epoch, 0);
    let pid = init.producer_id.0;
    let first = batch(&["a", "b"], Compression::None, pid, 0);
    let second = batch(&["c"], Compression::Gzip, pid, 2);
    assert_eq!(
        answer(&client.call(&produce("t", 0, first.clone(), -1), 9)),
        (0, 0)
    );
    assert_eq!(
        answer(&client.call(&produce("t", 0, second.clone(), -1), 9)),
        (0, 2)
    );
    assert_eq!(
        answer(&client.call(&produce("t", 0, first.clone(), -1), 9)),
        (0, 0)
    );
    let gap = batch(&["z"], Compression::None, pid, 9);
    let response = client.call(&produce("t", 0, gap, -1), 9);
    assert_eq!(
        answer(&response),
        (ResponseError::OutOfOrderSequenceNumber.code(), -1)
    );
    assert_eq!(log_end(&broker, "t", 0), 3);
    drop(client);
    broker.shutdown().unwrap();

    let (broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    assert_eq!(
        answer(&client.call(&produce("t", 0, second, -1), 9)),
        (0, 2)
    );
    assert_eq!(log_end(&broker, "t", 0), 3, "the retry wrote nothing");
    // A new producer never gets an id handed out before the restart.
    let init = client.call(
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1),
        4,
    );
    assert_ne!(init.producer_id.0, pid);
    assert!(init.producer_id.0 > pid);
}

/// (error code, base offset, log append time) of the one partition's answer.
fn appended(response: &ProduceResponse) -> (i16, i64, i64) {
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset, p.log_append_time_ms)
}

#[test]
fn an_idempotent_retry_on_a_log_append_time_topic_gets_the_stored_append_time() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let config = TopicConfig::default().timestamp_type(TimestampType::LogAppendTime);
    broker.create_topic("t", config).unwrap();
    let mut client = WireClient::connect(addr);
    let init = client.call(
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1),
        4,
    );
    let pid = init.producer_id.0;
    let first = batch(&["a", "b"], Compression::None, pid, 0);
    let stored = appended(&client.call(&produce("t", 0, first.clone(), -1), 9));
    assert_eq!(stored.0, 0);
    assert!(
        stored.2 > 0,
        "a LogAppendTime append answers its time: {stored:?}"
    );
    let retried = appended(&client.call(&produce("t", 0, first.clone(), -1), 9));
    assert_eq!(retried, stored);
    drop(client);
    broker.shutdown().unwrap();

    let (broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let retried = appended(&client.call(&produce("t", 0, first, -1), 9));
    assert_eq!(retried, stored, "after a restart");
    assert_eq!(log_end(&broker, "t", 0), 2, "the retries wrote nothing");
}

#[test]
fn a_transactional_producer_is_refused_at_init() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(kafka_protocol::messages::TransactionalId(
            kafka_protocol::protocol::StrBytes::from_static_str("tx"),
        )))
        .with_transaction_timeout_ms(60_000);
    for version in 0..=4 {
        let response = client.call(&request, version);
        assert_eq!(
            response.error_code,
            ResponseError::TransactionalIdAuthorizationFailed.code()
        );
        assert_eq!(response.producer_id.0, -1);
    }
}

/// A topic created with Kafka's `compression.type` and `max.message.bytes`: batches are stored
/// with its codec whatever the producer's, fetched and read back as produced; a batch over
/// its limit is MESSAGE_TOO_LARGE and writes nothing.
#[test]
fn a_topics_compression_type_and_max_message_bytes_apply_to_produced_batches() {
    use crate::admin::{creatable, create, with_config};
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let topic = with_config(
        with_config(creatable("zstd", 1), "compression.type", "zstd"),
        "max.message.bytes",
        "1000",
    );
    let created = client.call(&create(vec![topic]), 5);
    let result = &created.topics[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    let described: Vec<(&str, Option<&str>)> = result
        .configs
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.name.as_str(), c.value.as_deref()))
        .filter(|(name, _)| ["compression.type", "max.message.bytes"].contains(name))
        .collect();
    assert_eq!(
        described,
        [
            ("compression.type", Some("zstd")),
            ("max.message.bytes", Some("1000"))
        ]
    );
    let values: Vec<String> = (0..5).map(|i| format!("{i}").repeat(40)).collect();
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    for codec in [Compression::None, Compression::Gzip] {
        let response = client.call(&produce("zstd", 0, batch(&values, codec, -1, 0), -1), 9);
        assert_eq!(answer(&response).0, 0, "{codec:?}");
    }
    let large: Vec<String> = (0..30).map(|i| format!("{i:02}").repeat(20)).collect();
    let large: Vec<&str> = large.iter().map(String::as_str).collect();
    let refused = batch(&large, Compression::None, -1, 0);
    assert!(refused.len() > 1000);
    let response = client.call(&produce("zstd", 0, refused, -1), 9);
    assert_eq!(
        answer(&response),
        (ResponseError::MessageTooLarge.code(), -1)
    );
    assert_eq!(log_end(&broker, "zstd", 0), 10, "nothing of it was written");

    let fetched = client.call(&crate::records::fetch("zstd", &[(0, 0)], 0), 12);
    let bytes = fetched.responses[0].partitions[0].records.clone().unwrap();
    // Attributes bits 0-2 of each batch; the second starts after the first's length field.
    let codec_at =
        |at: usize| i16::from_be_bytes(bytes[at + 21..at + 23].try_into().unwrap()) & 0b111;
    let second = 12 + i32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let codecs = [codec_at(0), codec_at(second)];
    assert_eq!(codecs, [4, 4], "both batches stored as zstd");
    let read: Vec<Bytes> = crate::records::decode(&bytes)
        .into_iter()
        .map(|r| r.value.unwrap())
        .collect();
    let expected: Vec<Bytes> = values
        .iter()
        .chain(values.iter())
        .map(|v| Bytes::from(v.to_string()))
        .collect();
    assert_eq!(read, expected);
}
