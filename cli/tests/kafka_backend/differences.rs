//! Where the backends differ by design: each `difference_*` test asserts both sides, the
//! embedded broker's behaviour and the Kafka backend's, so that the list of differences in
//! `docs/kafka-backend.md` points at a test that keeps it true (the calls only the embedded
//! broker serves are in `embedded_only.rs`).

use std::time::Duration;

use actix::System;
use nanokafka::{Backpressure, Error, TopicConfig};

use crate::target::{on_every_target, Target};
use crate::wait::{self, STEP};

/// The flat `poll`: on the embedded broker it reads at the group's committed offset, so it
/// returns the same record until a commit; on Kafka the member's position advances with
/// every poll, and an uncommitted record comes back only after the member rejoins. On both,
/// a rejoin resumes at the commit, and a commit moves past the record.
fn difference_flat_poll(t: &Target) {
    let broker = t.broker();
    let topic = t.new_topic("redelivery", 1);
    broker.join_group(&topic, "g", "m").unwrap();
    for v in 0..3u64 {
        broker.produce(&topic, &v).unwrap();
    }
    let poll = || {
        wait::until("a record", || {
            broker.poll_timeout::<u64>(&topic, "g", "m", STEP).unwrap()
        })
    };
    assert_eq!(poll().offset, 0);
    let again = poll().offset;
    match t.is_kafka() {
        false => assert_eq!(again, 0, "embedded: the same record until a commit"),
        true => assert_eq!(again, 1, "Kafka: the member's position moved on"),
    }
    broker.leave_group(&topic, "g", "m").unwrap();
    broker.join_group(&topic, "g", "m").unwrap();
    assert_eq!(
        poll().offset,
        0,
        "after a rejoin: from the commit (none yet)"
    );
    broker.commit(&topic, "g", 0, 0).unwrap();
    assert_eq!(poll().offset, 1, "after the commit: the next record");
}

/// Records without a key: round-robin over the partitions on the embedded broker; on Kafka
/// a random partition per record (librdkafka's `murmur2_random`), only ever one of the
/// topic's.
fn difference_keyless_spread(t: &Target) {
    let topic = t.new_topic("keyless", 3);
    let partitions: Vec<u32> = (0..12u64)
        .map(|v| t.broker().produce(&topic, &v).unwrap().partition)
        .collect();
    assert!(partitions.iter().all(|&p| p < 3), "{partitions:?}");
    if !t.is_kafka() {
        let round_robin = partitions.windows(2).all(|w| w[1] == (w[0] + 1) % 3);
        assert!(
            round_robin,
            "embedded: each partition in turn: {partitions:?}"
        );
    }
}

/// `retention_size` (a record count) has no Kafka equivalent: the embedded broker keeps the
/// last N records, Kafka creates the topic (with a warning) and keeps everything.
fn difference_retention_size(t: &Target) {
    let topic = t.topic("retention-count");
    let config = TopicConfig::default().retention_size(3);
    t.broker().create_topic(&topic, config).unwrap();
    for v in 0..10u64 {
        t.broker().produce(&topic, &v).unwrap();
    }
    let kept = match t.is_kafka() {
        false => 7..10,
        true => 0..10,
    };
    let mut consumer = t.broker().consumer::<u64>(&topic, "g", "m").unwrap();
    let read: Vec<u64> = wait::read(&mut consumer, kept.clone().count())
        .iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(read, kept.collect::<Vec<_>>());
}

/// `max_size` (backpressure at a backlog of N records) has no Kafka equivalent either: the
/// embedded broker refuses the produce past it under `Backpressure::Reject`; Kafka creates
/// the topic (with a warning) and accepts every record.
fn difference_max_size(t: &Target) {
    let topic = t.topic("max-size");
    let config = TopicConfig::default()
        .max_size(2)
        .backpressure(Backpressure::Reject);
    t.broker().create_topic(&topic, config).unwrap();
    for v in 0..2u64 {
        t.broker().produce(&topic, &v).unwrap();
    }
    let third = t.broker().produce(&topic, &2u64);
    match t.is_kafka() {
        false => assert!(
            matches!(third, Err(Error::PartitionFull { .. })),
            "embedded: {third:?}"
        ),
        true => assert_eq!(third.unwrap().offset, 2, "Kafka: no record-count limit"),
    }
}

/// A member's join: on the embedded broker it returns at once with the member's share, and
/// the other members learn of the new generation on their next poll. On Kafka it returns
/// once the group has rebalanced, which needs every other member to rejoin, and a librdkafka
/// member rejoins only while it is polled (as a consumer on its own thread is): while the
/// first member sits idle, a second member's join is refused after `block_timeout`; while
/// the first polls, it completes.
fn difference_join_waits_for_the_group(t: &Target) {
    let topic = t.new_topic("join-wait", 2);
    let mut first = t.broker().consumer::<u64>(&topic, "g", "first").unwrap();
    let impatient = t.another_client_with(|b| b.block_timeout(Duration::from_secs(3)));
    let impatient = impatient.unwrap();
    let second = impatient.consumer::<u64>(&topic, "g", "second");
    match t.is_kafka() {
        false => assert_eq!(second.unwrap().assignment().partitions.len(), 1),
        true => assert!(
            second.is_err(),
            "Kafka: joined beside an idle member: {second:?}"
        ),
    }
    let mut joined =
        wait::join_while_polling(t.broker(), (&topic, "g", "third"), &mut [&mut first]);
    let shares = wait::settle(&mut [&mut first, &mut joined], "one partition each", |s| {
        wait::each_partition_once(s, 2) && s.iter().all(|p| p.len() == 1)
    });
    assert_eq!(shares.len(), 2);
}

/// `Assignment::generation`: the group's generation on the embedded broker, the same for
/// every member; on Kafka the number of assignments this member received (librdkafka does
/// not expose the group's), so a member that joined later counts from 1.
fn difference_generation(t: &Target) {
    let topic = t.new_topic("generation", 2);
    let mut first = t.broker().consumer::<u64>(&topic, "g", "first").unwrap();
    assert_eq!(first.assignment().generation, 1);
    let mut second =
        wait::join_while_polling(t.broker(), (&topic, "g", "second"), &mut [&mut first]);
    wait::settle(&mut [&mut first, &mut second], "one partition each", |s| {
        wait::each_partition_once(s, 2) && s.iter().all(|p| p.len() == 1)
    });
    let (first, second) = (
        first.assignment().generation,
        second.assignment().generation,
    );
    match t.is_kafka() {
        false => assert_eq!((first, second), (2, 2), "embedded: the group's generation"),
        true => {
            assert_eq!(second, 1, "Kafka: the later member's first assignment");
            assert!(
                first >= 2,
                "Kafka: the first member was assigned again: {first}"
            );
        }
    }
}

/// A flat `commit` from a handle with no member in the group: the embedded broker refuses it
/// (`UnknownGroup`) until a member has joined since it started, then takes it; Kafka takes
/// a commit from outside the group only while the group has no members, and refuses it
/// (changing nothing) while it has one.
fn difference_flat_commit(t: &Target) {
    let topic = t.new_topic("outside-commit", 1);
    for v in 0..3u64 {
        t.broker().produce(&topic, &v).unwrap();
    }
    let before_any_member = t.broker().commit(&topic, "g", 0, 0);
    match t.is_kafka() {
        false => assert!(
            matches!(before_any_member, Err(Error::UnknownGroup { .. })),
            "embedded: {before_any_member:?}"
        ),
        true => {
            before_any_member.unwrap();
            assert_eq!(t.broker().lag(&topic, "g").unwrap()[&0], 2);
        }
    }
    let other = t.another_client();
    let _member = other.consumer::<u64>(&topic, "g", "member").unwrap();
    let beside_a_member = t.broker().commit(&topic, "g", 0, 1);
    match t.is_kafka() {
        false => {
            beside_a_member.unwrap();
            assert_eq!(t.broker().lag(&topic, "g").unwrap()[&0], 1);
        }
        true => {
            assert!(beside_a_member.is_err(), "Kafka: {beside_a_member:?}");
            assert_eq!(
                t.broker().lag(&topic, "g").unwrap()[&0],
                2,
                "nothing changed"
            );
        }
    }
}

/// `list_topics`: every field of each topic's config on the embedded broker; on Kafka the
/// partition count, with `TopicConfig`'s defaults for the rest.
fn difference_list_topics(t: &Target) {
    let topic = t.topic("listed");
    let config = TopicConfig::default()
        .partitions(3)
        .retention_ms(3_600_000)
        .segment_bytes(1 << 20);
    t.broker().create_topic(&topic, config.clone()).unwrap();
    let listed = t.broker().list_topics().unwrap();
    let expected = match t.is_kafka() {
        false => config,
        true => TopicConfig::default().partitions(3),
    };
    assert_eq!(listed.get(&topic), Some(&expected));
}

/// A produce to a topic that does not exist: `UnknownTopic` on the embedded broker; on Kafka
/// the cluster's `auto.create.topics.enable` decides (on for Kafka by default, and for
/// `nanokafka serve` and tansu here): the topic is created and the record lands.
fn difference_produce_to_a_missing_topic(t: &Target) {
    let topic = t.topic("never-created");
    let produced = t.broker().produce(&topic, &1u64);
    match t.is_kafka() {
        false => assert!(
            matches!(&produced, Err(Error::UnknownTopic { topic: named }) if *named == topic),
            "{produced:?}"
        ),
        true => {
            assert_eq!(produced.unwrap().offset, 0);
            assert!(t.broker().list_topics().unwrap().contains_key(&topic));
        }
    }
}

/// A typed topic's payload type: the embedded broker records it with the topic and refuses
/// a subscriber of another type; Kafka keeps nothing of the kind with a topic (its configs
/// are a fixed set of keys), so the Kafka backend records nothing and checks nothing.
fn difference_payload_type(t: &Target) {
    /// A type the topic's records are not.
    #[derive(serde::Deserialize)]
    struct Other {
        _name: String,
    }
    let topic = t.topic("typed");
    let bus = t.broker().async_handle();
    System::new().block_on(async {
        let typed = bus.topic::<u64>(&topic);
        typed.create(TopicConfig::default()).await.unwrap();
        let recorded = bus.describe_topic(&topic).await.unwrap().payload_type;
        let other = bus.topic::<Other>(&topic).check_payload_type().await;
        match t.is_kafka() {
            false => {
                assert_eq!(recorded.as_deref(), Some("u64"));
                assert!(
                    matches!(&other, Err(Error::PayloadTypeMismatch { .. })),
                    "{other:?}"
                );
            }
            true => {
                assert_eq!(recorded, None);
                other.unwrap();
            }
        }
    });
}

/// `RecordStream::seek` moves the stream's position on the embedded broker; on Kafka it is
/// `Unsupported` (the librdkafka member's seek would wait for the poll in flight).
fn difference_stream_seek(t: &Target) {
    let topic = t.new_topic("stream-seek", 1);
    t.broker().produce(&topic, &1u64).unwrap();
    let bus = t.broker().async_handle();
    System::new().block_on(async {
        let mut stream = bus.stream::<u64>(&topic, "g", "m").await.unwrap();
        let sought = stream.seek(0, 0);
        match t.is_kafka() {
            false => sought.unwrap(),
            true => assert!(
                matches!(sought, Err(Error::Unsupported { .. })),
                "{sought:?}"
            ),
        }
        stream.leave().await.unwrap();
    });
}

on_every_target!(
    difference_payload_type,
    difference_stream_seek,
    difference_produce_to_a_missing_topic,
    difference_flat_poll,
    difference_keyless_spread,
    difference_retention_size,
    difference_max_size,
    difference_join_waits_for_the_group,
    difference_generation,
    difference_flat_commit,
    difference_list_topics,
);
