//! A Kafka producer's record batch (format v2) built by an encoder that shares no code with
//! the crate, kafka-protocol's `RecordBatchEncoder`: what a client sends in a Produce request
//! and what `produce_kafka_batch` takes.
//!
//! The records say what each test varies (timestamp, key, value, headers); [`BatchOptions`]
//! says how the batch is sent (compression, an idempotent producer).

#![allow(dead_code)] // each test binary uses the part it needs

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// One record of a client batch.
#[derive(Debug, Clone, Default)]
pub struct ClientRecord {
    /// CreateTime, in ms since the epoch.
    pub timestamp: i64,
    /// `None`: a null key.
    pub key: Option<Bytes>,
    /// `None`: a null value (a tombstone).
    pub value: Option<Bytes>,
    /// In order, a `None` value a null header value. Keys are distinct: the encoder keeps
    /// headers in a map.
    pub headers: Vec<(&'static str, Option<Bytes>)>,
}

/// How the batch is sent.
#[derive(Debug, Clone, Copy)]
pub struct BatchOptions {
    pub compression: Compression,
    /// `None`: a producer without idempotence (producer id, epoch and base sequence -1).
    pub producer: Option<Idempotent>,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            compression: Compression::None,
            producer: None,
        }
    }
}

impl BatchOptions {
    /// `compression`, from producer `producer_id` (epoch 0, its first record at
    /// `base_sequence`) when it is 0 or more, else (Kafka's -1) from a plain producer.
    pub fn producer_id(compression: Compression, producer_id: i64, base_sequence: i32) -> Self {
        let producer = (producer_id >= 0).then_some(Idempotent {
            producer_id,
            producer_epoch: 0,
            base_sequence,
        });
        BatchOptions {
            compression,
            producer,
        }
    }
}

/// An idempotent producer's identity and the sequence of the batch's first record.
#[derive(Debug, Clone, Copy)]
pub struct Idempotent {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

/// `records` as one batch, offsets from 0.
///
/// # Panics
/// When the encoder refuses them.
pub fn encode(records: &[ClientRecord], options: BatchOptions) -> Bytes {
    let (producer_id, producer_epoch, base_sequence) = match options.producer {
        Some(p) => (p.producer_id, p.producer_epoch, p.base_sequence),
        None => (-1, -1, -1),
    };
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch wherever `offset - sequence` changes, so the
            // sequences count up with the offsets even without a producer id (the batch's
            // base sequence is then -1).
            sequence: base_sequence + i as i32,
            timestamp: r.timestamp,
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (StrBytes::from_static_str(k), v.clone()))
                .collect::<IndexMap<_, _>>(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let encode = RecordEncodeOptions {
        version: 2,
        compression: options.compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &encode).unwrap();
    buf.freeze()
}
