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
    /// The subscriber dead-lettered it (its reason).
    Rejected(String),
}

/// The record at `offset` of `partition`, dead-lettered after `attempts` deliveries (1 for
/// a record that does not decode) because of `reason`.
///
/// Its dead letter keeps the record's key, value bytes and headers and adds headers
/// `nanokafka.dlq.*` saying where it came from and why: the format is documented for users
/// on `SubscribeOptions::dead_letter_topic`, and [`DeadLetter::batch`] is its one writer.
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
            DeadLetterReason::Rejected(reason) => ("rejected", Some(reason.as_str())),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn headers_of(batch: &RecordBatch) -> Vec<(String, Option<String>)> {
        let view = batch.views().next().expect("one record");
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        view.headers
            .iter()
            .map(|(k, v)| (text(k), v.map(text)))
            .collect()
    }

    fn pairs(of: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        of.iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn a_record_that_does_not_decode_keeps_its_bytes_and_says_why() {
        let letter = DeadLetter {
            partition: 2,
            offset: 41,
            attempts: 1,
            reason: DeadLetterReason::Decode("bad type".into()),
        };
        let original: Vec<HeaderRef<'_>> = vec![(b"trace", Some(b"t1")), (b"empty", None)];
        let batch = letter.batch(("orders", "billing"), Some(b"k"), b"\xff\x00", original);
        let record = batch.records().next().expect("one record");
        assert_eq!(
            (record.key, record.value),
            (Some(&b"k"[..]), &b"\xff\x00"[..])
        );
        let expected = pairs(&[
            ("trace", Some("t1")),
            ("empty", None),
            ("nanokafka.dlq.topic", Some("orders")),
            ("nanokafka.dlq.partition", Some("2")),
            ("nanokafka.dlq.offset", Some("41")),
            ("nanokafka.dlq.group", Some("billing")),
            ("nanokafka.dlq.reason", Some("decode")),
            ("nanokafka.dlq.error", Some("bad type")),
            ("nanokafka.dlq.attempts", Some("1")),
        ]);
        assert_eq!(headers_of(&batch), expected);
    }

    #[test]
    fn a_record_the_subscriber_rejects_says_why_in_the_error_header() {
        let letter = DeadLetter {
            partition: 1,
            offset: 3,
            attempts: 2,
            reason: DeadLetterReason::Rejected("card declined".into()),
        };
        let batch = letter.batch(("orders", "billing"), None, b"v", []);
        let headers = headers_of(&batch);
        let reason = ("nanokafka.dlq.reason".to_string(), Some("rejected".into()));
        let error = ("nanokafka.dlq.error".into(), Some("card declined".into()));
        let attempts = ("nanokafka.dlq.attempts".into(), Some("2".into()));
        assert_eq!(headers[4..], [reason, error, attempts]);
    }

    #[test]
    fn a_record_out_of_attempts_has_no_error_header() {
        let letter = DeadLetter {
            partition: 0,
            offset: 7,
            attempts: 3,
            reason: DeadLetterReason::RetriesExhausted,
        };
        let batch = letter.batch(("orders", "billing"), None, b"v", []);
        let expected = pairs(&[
            ("nanokafka.dlq.topic", Some("orders")),
            ("nanokafka.dlq.partition", Some("0")),
            ("nanokafka.dlq.offset", Some("7")),
            ("nanokafka.dlq.group", Some("billing")),
            ("nanokafka.dlq.reason", Some("retries-exhausted")),
            ("nanokafka.dlq.attempts", Some("3")),
        ]);
        assert_eq!(headers_of(&batch), expected);
    }
}
