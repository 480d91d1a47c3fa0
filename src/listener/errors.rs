//! The broker's errors as Kafka error codes, for the data path's responses.

use kafka_protocol::ResponseError;

use crate::error::Error;

/// The Kafka error for a failed produce, fetch or offset lookup of one partition.
///
/// A full partition under `Backpressure::Reject` is `NOT_ENOUGH_REPLICAS`: of Kafka's
/// produce errors it is the one every client (the Java producer, librdkafka, kafkajs)
/// retries and knows was not written; the response's error message says the partition is
/// full. A produce that waited `block_timeout` under `Block` is `REQUEST_TIMED_OUT`, also
/// retried.
pub fn to_kafka(e: &Error) -> ResponseError {
    match e {
        Error::UnknownTopic { .. } | Error::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition
        }
        Error::InvalidBatch { .. } => ResponseError::CorruptMessage,
        // As Kafka's broker answers a keyless record on a compacted topic: not retriable.
        Error::KeyRequired { .. } => ResponseError::InvalidRecord,
        Error::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
        Error::RecordTooLarge { .. } | Error::RequestTooLarge { .. } => {
            ResponseError::MessageTooLarge
        }
        Error::ProducerFenced { .. } => ResponseError::InvalidProducerEpoch,
        Error::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        Error::PartitionFull { .. } => ResponseError::NotEnoughReplicas,
        Error::Timeout { .. } => ResponseError::RequestTimedOut,
        Error::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        // The partition reopens at once: the client refreshes its metadata and retries.
        Error::PartitionRestarted { .. } => ResponseError::NotLeaderOrFollower,
        Error::PartitionFailed { .. } | Error::Io { .. } | Error::Corrupt { .. } => {
            ResponseError::KafkaStorageError
        }
        Error::BrokerStopped => ResponseError::NotLeaderOrFollower,
        _ => ResponseError::UnknownServerError,
    }
}
