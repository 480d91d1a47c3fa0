//! [`DeadLetter`]: a record a push subscription gives up on, and the record it becomes in
//! the dead-letter topic. Plain Rust, so the embedded and the Kafka subscription actors
//! write dead letters in one format.

use crate::storage::batch::HeaderRef;
use crate::storage::RecordBatch;

/// Why a record is dead-lettered (the `nanokafka.dlq.reason` header and its details).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadLetterReason {
    /// It does not decode as the subscriber's type (the decode error's text).
    Decode(String),
    /// It had its last attempt.
    RetriesExhausted,
}

/// The record at `offset` of `partition`, dead-lettered after `attempts` deliveries (1 for
/// a record that does not decode) because of `reason`.
///
/// Its dead letter keeps the record's key, value bytes and headers and adds headers
/// `nanokafka.dlq.*` saying where it came from and why: the format is documented for users
/// in `actors::subscription` (public), and [`DeadLetter::batch`] is its one writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub partition: u32,
    pub offset: u64,
    pub attempts: u32,
    pub reason: DeadLetterReason,
}

impl DeadLetter {
    /// The dead letter of the record with `key`, `value` and
    /// `headers`, read from `topic` by `group`.
    pub fn batch<'a>(
        &self,
        (topic, group): (&str, &str),
        key: Option<&[u8]>,
        value: &[u8],
        headers: impl IntoIterator<Item = HeaderRef<'a>>,
    ) -> RecordBatch {
        let (why, error) = match &self.reason {
            DeadLetterReason::Decode(error) => ("decode", Some(error.as_str())),
            DeadLetterReason::RetriesExhausted => ("retries-exhausted", None),
        };
        let (partition, offset, attempts) = (
            self.partition.to_string(),
            self.offset.to_string(),
            self.attempts.to_string(),
        );
        let mut about: Vec<(&str, &str)> = vec![
            ("nanokafka.dlq.topic", topic),
            ("nanokafka.dlq.partition", &partition),
            ("nanokafka.dlq.offset", &offset),
            ("nanokafka.dlq.group", group),
            ("nanokafka.dlq.reason", why),
        ];
        if let Some(error) = error {
            about.push(("nanokafka.dlq.error", error));
        }
        about.push(("nanokafka.dlq.attempts", &attempts));
        let mut all: Vec<HeaderRef<'_>> = Vec::new();
        for header in headers {
            all.push(header);
        }
        all.extend(
            about
                .iter()
                .map(|(k, v)| (k.as_bytes(), Some(v.as_bytes()))),
        );
        let mut batch = RecordBatch::new();
        batch.push_header_refs(key, value, &all);
        batch
    }
}
