//! The consumer protocol's embedded formats (Kafka's `ConsumerProtocolSubscription` and
//! `ConsumerProtocolAssignment`): a big-endian `i16` version, then the struct in that
//! version, carried as opaque bytes in JoinGroup metadata and SyncGroup assignments.

use std::collections::BTreeSet;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The newest subscription version the codec reads; a newer one only appends fields, so it
/// is read as this one.
const SUBSCRIPTION_MAX_VERSION: i16 = 3;

/// The topics of a member's subscription, `None` when the bytes are not one.
pub fn subscribed_topics(metadata: &[u8]) -> Option<BTreeSet<String>> {
    let (version, mut buf) = versioned(metadata)?;
    let subscription =
        ConsumerProtocolSubscription::decode(&mut buf, version.min(SUBSCRIPTION_MAX_VERSION))
            .ok()?;
    Some(
        subscription
            .topics
            .into_iter()
            .map(|t| t.to_string())
            .collect(),
    )
}

/// A subscription to `topics` (version 0), as DescribeGroups shows a native member's.
pub fn encode_subscription<'a>(topics: impl IntoIterator<Item = &'a str>) -> Vec<u8> {
    let subscription = ConsumerProtocolSubscription::default().with_topics(
        topics
            .into_iter()
            .map(|t| StrBytes::from_string(t.to_owned()))
            .collect(),
    );
    encode(0, &subscription)
}

/// An assignment of these partitions, version 0: the layout every version up to 3 shares,
/// which every client reads.
pub fn encode_assignment<'a>(partitions: impl IntoIterator<Item = (&'a str, Vec<u32>)>) -> Vec<u8> {
    let assigned = partitions
        .into_iter()
        .map(|(topic, ps)| {
            TopicPartition::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(ps.into_iter().map(|p| p as i32).collect())
        })
        .collect();
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(assigned);
    encode(0, &assignment)
}

/// The partitions of an assignment (any version: the layout every version up to 3 shares),
/// `None` when the bytes are not one.
#[cfg(feature = "console")]
pub fn assigned_partitions(assignment: &[u8]) -> Option<Vec<(String, u32)>> {
    let (version, mut buf) = versioned(assignment)?;
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version.min(3)).ok()?;
    let mut partitions = Vec::new();
    for topic in assignment.assigned_partitions {
        for p in topic.partitions {
            partitions.push((topic.topic.to_string(), u32::try_from(p).ok()?));
        }
    }
    Some(partitions)
}

/// The version before an embedded message, and the message's bytes after it.
fn versioned(bytes: &[u8]) -> Option<(i16, Bytes)> {
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16();
    (version >= 0).then_some((version, buf))
}

fn encode(version: i16, message: &impl Encodable) -> Vec<u8> {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    // A version-0 message of strings and integers always encodes.
    let _ = message.encode(&mut buf, version);
    buf.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_round_trip_and_garbage_is_none() {
        let bytes = encode_subscription(["a", "b"]);
        let topics = subscribed_topics(&bytes).unwrap();
        assert_eq!(topics, BTreeSet::from(["a".to_owned(), "b".to_owned()]));
        assert_eq!(subscribed_topics(&[0]), None);
        assert_eq!(subscribed_topics(&[0, 0, 0, 0, 0, 9]), None);
        assert_eq!(subscribed_topics(&[0xff, 0xff]), None);
    }

    #[cfg(feature = "console")]
    #[test]
    fn assignments_round_trip_and_garbage_is_none() {
        let bytes = encode_assignment([("a", vec![0, 2]), ("b", vec![1])]);
        let partitions = assigned_partitions(&bytes).unwrap();
        assert_eq!(
            partitions,
            [
                ("a".to_owned(), 0),
                ("a".to_owned(), 2),
                ("b".to_owned(), 1)
            ]
        );
        assert_eq!(assigned_partitions(&[0]), None);
        assert_eq!(assigned_partitions(&[0xff, 0xff]), None);
    }
}
