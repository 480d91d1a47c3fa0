//! Where produced records go: the size limits a produce request is checked against, the
//! key rule of a compacted topic, and the partition of each record (explicit, by key with
//! Kafka's murmur2 partitioner, or round-robin). Plain Rust: the topic actor and the
//! handles' direct route both call it, and the produce queue checks each partition's
//! batches against the key rule again (a Kafka client's batch with the keyless records the
//! log's check of it found: `PartitionLog::check_kafka_batch`).

use crate::config::CleanupPolicy;
use crate::error::{Error, Result};
use crate::partitioner;
use crate::storage::log::check_batch_limits;
use crate::storage::RecordBatch;

/// Where the records of a batch go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routes {
    /// Every record to this partition.
    All(u32),
    /// One partition per record.
    Each(Vec<u32>),
}

impl Routes {
    /// `All` when every record goes to the same partition (then the batch is not split, and
    /// nothing is allocated: the common case of one record, or of a one-partition topic),
    /// else `Each`. No records: `Each` of none.
    fn of(partitions: impl IntoIterator<Item = u32>) -> Routes {
        let mut partitions = partitions.into_iter();
        let Some(first) = partitions.next() else {
            return Routes::Each(Vec::new());
        };
        let mut same = 1;
        while let Some(p) = partitions.next() {
            if p != first {
                let mut each = vec![first; same];
                each.push(p);
                each.extend(partitions);
                return Routes::Each(each);
            }
            same += 1;
        }
        Routes::All(first)
    }
}

/// The sizes a produce request may have (from the builder's `max_record_bytes` and
/// `max_request_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    pub max_record_bytes: usize,
    pub max_request_bytes: usize,
}

impl RequestLimits {
    /// Checks a produce request: each record within `max_record_bytes`, and the request's
    /// frames within `max_request_bytes` (a request of one record is bounded by the record
    /// limit alone).
    ///
    /// # Errors
    /// `RecordTooLarge`, `RequestTooLarge`.
    pub fn check(&self, batch: &RecordBatch) -> Result<()> {
        check_batch_limits(batch, self.max_record_bytes)?;
        if batch.len() > 1 && batch.size_bytes() > self.max_request_bytes {
            return Err(Error::RequestTooLarge {
                size: batch.size_bytes(),
                max: self.max_request_bytes,
            });
        }
        Ok(())
    }
}

/// The partition of each record of a topic with `count` partitions: `explicit`, or by key
/// (murmur2), or round-robin by `next_keyless`. The batch's sizes are checked first, so a
/// batch spread over partitions is refused whole, before any part is written.
///
/// # Errors
/// `RecordTooLarge`, `RequestTooLarge`; `UnknownPartition` for an explicit partition the
/// topic does not have.
pub fn route(
    topic: &str,
    (count, limits): (u32, RequestLimits),
    explicit: Option<u32>,
    batch: &RecordBatch,
    next_keyless: impl FnMut() -> u32,
) -> Result<Routes> {
    limits.check(batch)?;
    match explicit {
        Some(p) if p >= count => Err(Error::UnknownPartition {
            topic: topic.to_owned(),
            partition: p,
        }),
        Some(p) => Ok(Routes::All(p)),
        None => {
            let keys = batch.records().map(|r| r.key);
            Ok(Routes::of(partitioner::assign(keys, count, next_keyless)))
        }
    }
}

/// Checks the key rule of a topic under `policy`: a compacted topic refuses a batch with any
/// record without a key, whole (compaction keeps the latest record of each key; a keyless
/// record has none, as Kafka's broker rules). Called before the batch is split over
/// partitions, so that nothing of it is written; `partition` is the explicit one, if any.
///
/// # Errors
/// `KeyRequired`, listing every keyless record's index in `batch`.
pub fn check_keys(
    (topic, partition): (&str, Option<u32>),
    policy: CleanupPolicy,
    batch: &RecordBatch,
) -> Result<()> {
    if !policy.compacts() {
        return Ok(());
    }
    key_required((topic, partition), keyless(batch))
}

/// `Err(KeyRequired)` when `indexes` (keyless records of a batch to a compacted topic) is
/// not empty.
///
/// # Errors
/// `KeyRequired`.
pub fn key_required((topic, partition): (&str, Option<u32>), indexes: Vec<u32>) -> Result<()> {
    match indexes.is_empty() {
        true => Ok(()),
        false => Err(Error::KeyRequired {
            topic: topic.to_owned(),
            partition,
            indexes,
        }),
    }
}

/// The index of each record of `batch` that has no key.
pub fn keyless(batch: &RecordBatch) -> Vec<u32> {
    (0u32..)
        .zip(batch.records())
        .filter_map(|(i, record)| record.key.is_none().then_some(i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: RequestLimits = RequestLimits {
        max_record_bytes: 100,
        max_request_bytes: 300,
    };

    fn batch(keys: &[Option<&[u8]>], value_len: usize) -> RecordBatch {
        let mut batch = RecordBatch::new();
        for key in keys {
            batch.push_raw(*key, &vec![0; value_len]);
        }
        batch
    }

    #[test]
    fn keyed_records_follow_the_partitioner_and_keyless_ones_the_counter() {
        let b = batch(&[Some(b"21"), None, None], 1);
        let mut next = 5u32;
        let routes = route("t", (4, LIMITS), None, &b, || {
            next += 1;
            next - 1
        })
        .unwrap();
        let by_key = partitioner::partition_for_key(b"21", 4);
        assert_eq!(routes, Routes::Each(vec![by_key, 5 % 4, 6 % 4]));
    }

    #[test]
    fn records_that_all_go_to_one_partition_route_as_one() {
        let none = || 0;
        // One record, records of one key, and a topic of one partition.
        let one = route("t", (4, LIMITS), None, &batch(&[Some(b"21")], 1), none).unwrap();
        let by_key = partitioner::partition_for_key(b"21", 4);
        assert_eq!(one, Routes::All(by_key));
        let same_key = batch(&[Some(b"21"), Some(b"21"), Some(b"21")], 1);
        assert_eq!(
            route("t", (4, LIMITS), None, &same_key, none).unwrap(),
            Routes::All(by_key)
        );
        let keyless = batch(&[None, None], 1);
        assert_eq!(
            route("t", (1, LIMITS), None, &keyless, || 7).unwrap(),
            Routes::All(0)
        );
        // The first record that differs starts one route per record, earlier ones included.
        let mut dealt = [2, 2, 1].into_iter();
        let mut deal = || dealt.next().expect("three keyless records, three turns");
        let turns = route("t", (3, LIMITS), None, &batch(&[None; 3], 1), &mut deal).unwrap();
        assert_eq!(turns, Routes::Each(vec![2, 2, 1]));
        assert_eq!(
            route("t", (3, LIMITS), None, &RecordBatch::new(), none).unwrap(),
            Routes::Each(Vec::new())
        );
    }

    #[test]
    fn a_request_over_a_limit_or_to_a_missing_partition_is_refused_whole() {
        let none = || 0;
        assert!(matches!(
            route("t", (2, LIMITS), Some(0), &batch(&[None], 101), none),
            Err(Error::RecordTooLarge { size: 101, .. })
        ));
        assert!(matches!(
            route("t", (2, LIMITS), Some(0), &batch(&[None; 4], 90), none),
            Err(Error::RequestTooLarge { max: 300, .. })
        ));
        assert!(matches!(
            route("t", (2, LIMITS), Some(2), &batch(&[None], 1), none),
            Err(Error::UnknownPartition { partition: 2, .. })
        ));
        // One record is bounded by the record limit alone.
        let tight = RequestLimits {
            max_record_bytes: 100,
            max_request_bytes: 100,
        };
        assert!(route("t", (1, tight), None, &batch(&[None], 100), none).is_ok());
    }

    #[test]
    fn a_compacted_topic_refuses_a_batch_with_any_keyless_record_naming_each() {
        let mixed = batch(&[Some(b"k"), None, Some(b"k"), None], 1);
        for policy in [CleanupPolicy::Compact, CleanupPolicy::CompactDelete] {
            match check_keys(("t", None), policy, &mixed) {
                Err(Error::KeyRequired {
                    topic,
                    partition: None,
                    indexes,
                }) => assert_eq!((topic.as_str(), indexes), ("t", vec![1, 3])),
                other => panic!("expected KeyRequired, got {other:?}"),
            }
        }
        assert!(check_keys(("t", None), CleanupPolicy::Delete, &mixed).is_ok());
        let keyed = batch(&[Some(b"a"), Some(b"")], 1);
        assert!(check_keys(("t", Some(0)), CleanupPolicy::Compact, &keyed).is_ok());
    }
}
