//! Topic administration: `create_topic` makes the partitions asked for and keeps the
//! settings asked for, and a second create of the name is `TopicExists`, changing nothing.

use std::collections::BTreeMap;

use nanokafka::{
    partition_for_key, CleanupPolicy, Error, TimestampType, TopicChanges, TopicConfig,
};
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

use crate::target::{on_every_target, Target};
use crate::wait::{self, PATIENCE};

/// A key that `partition_for_key` sends to `partition` of `partitions`.
fn key_for(partition: u32, partitions: u32) -> String {
    (0..)
        .map(|i| format!("key-{i}"))
        .find(|k| partition_for_key(k.as_bytes(), partitions) == partition)
        .expect("some key lands on every partition")
}

/// A created topic has exactly the partitions asked for: records go to the last one, not
/// past it; creating it again is `TopicExists` and leaves its records and partitions alone.
fn create_topic_makes_the_partitions_and_refuses_a_second_create(t: &Target) {
    let broker = t.broker();
    let topic = t.topic("created");
    broker
        .create_topic(&topic, TopicConfig::default().partitions(3))
        .unwrap();
    let d = broker.produce_keyed(&topic, key_for(2, 3), &1u64).unwrap();
    assert_eq!((d.partition, d.offset), (2, 0));
    let mut batch = nanokafka::RecordBatch::new();
    batch.push(&2u64).unwrap();
    let refused = broker.produce_batch(&topic, Some(3), batch);
    assert!(
        matches!(refused, Err(Error::UnknownPartition { partition: 3, .. })),
        "{refused:?}"
    );

    let again = broker.create_topic(&topic, TopicConfig::default().partitions(5));
    match again {
        Err(Error::TopicExists { topic: named }) => assert_eq!(named, topic),
        other => panic!("a second create gave {other:?}"),
    }
    // Still three partitions, the record still there.
    let d = broker.produce_keyed(&topic, key_for(2, 3), &3u64).unwrap();
    assert_eq!((d.partition, d.offset), (2, 1));
    let mut consumer = broker.consumer::<u64>(&topic, "g", "m").unwrap();
    let values: Vec<u64> = wait::read(&mut consumer, 2)
        .iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(values, [1, 3]);
}

/// The configs the cluster at `bootstrap` reports for `topic` (DescribeConfigs, through a
/// librdkafka admin client of the test's own).
fn described(bootstrap: &str, topic: &str) -> BTreeMap<String, String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("an admin client");
    let options = AdminOptions::new().request_timeout(Some(PATIENCE));
    let resource = ResourceSpecifier::Topic(topic);
    let answer = futures::executor::block_on(admin.describe_configs([&resource], &options));
    let result = answer.expect("DescribeConfigs").into_iter().next();
    let resource = result.expect("one resource").expect("the topic's configs");
    resource
        .entries
        .into_iter()
        .filter_map(|e| Some((e.name, e.value?)))
        .collect()
}

/// A topic keeps the settings it was created with, and a default topic keeps everything: on
/// the embedded broker `list_topics` gives each config back; on Kafka the backend states
/// every setting Kafka has explicitly (retention `-1` for "keep everything"), as the
/// cluster's DescribeConfigs shows, so the cluster's defaults (7 days) do not apply.
fn create_topic_keeps_what_was_asked(t: &Target) {
    let forever = t.topic("kept-forever");
    t.broker()
        .create_topic(&forever, TopicConfig::default().partitions(2))
        .unwrap();
    let hour = t.topic("kept-an-hour");
    let config = TopicConfig::default()
        .retention_ms(3_600_000)
        .retention_bytes(1 << 30)
        .timestamp_type(TimestampType::LogAppendTime);
    t.broker().create_topic(&hour, config.clone()).unwrap();
    let Some(bootstrap) = t.bootstrap() else {
        let listed = t.broker().list_topics().unwrap();
        assert_eq!(listed[&forever], TopicConfig::default().partitions(2));
        assert_eq!(listed[&hour], config);
        return;
    };
    let configs = described(bootstrap, &forever);
    assert_eq!(configs["retention.ms"], "-1", "{configs:?}");
    assert_eq!(configs["retention.bytes"], "-1", "{configs:?}");
    assert_eq!(
        configs["message.timestamp.type"], "CreateTime",
        "{configs:?}"
    );
    let configs = described(bootstrap, &hour);
    assert_eq!(configs["retention.ms"], "3600000", "{configs:?}");
    assert_eq!(configs["retention.bytes"], "1073741824", "{configs:?}");
    assert_eq!(
        configs["message.timestamp.type"], "LogAppendTime",
        "{configs:?}"
    );
}

/// `backend()` says which backend serves the handle.
fn the_handle_names_its_backend(t: &Target) {
    let expected = match t.is_kafka() {
        false => nanokafka::Backend::Embedded,
        true => nanokafka::Backend::Kafka,
    };
    assert_eq!(t.broker().backend(), expected);
}

/// A deleted topic is gone from `list_topics`, a second delete is `UnknownTopic`, and the
/// name can be created again.
fn delete_topic_removes_it_and_the_name_can_be_reused(t: &Target) {
    let broker = t.broker();
    let topic = t.new_topic("deleted", 2);
    broker.produce(&topic, &1u64).unwrap();
    broker.delete_topic(&topic).unwrap();
    wait::until("the topic gone from list_topics", || {
        (!broker.list_topics().unwrap().contains_key(&topic)).then_some(())
    });
    let again = broker.delete_topic(&topic);
    assert!(
        matches!(&again, Err(Error::UnknownTopic { topic: named }) if *named == topic),
        "{again:?}"
    );
    // Kafka deletes a topic asynchronously: the name is free a moment after the delete.
    wait::until("the name created again", || {
        broker
            .create_topic(&topic, TopicConfig::default().partitions(1))
            .ok()
    });
    assert_eq!(broker.list_topics().unwrap()[&topic].partitions, 1);
}

/// `offset_for_timestamp` finds the first record at or after a time, and `None` past the
/// newest record.
fn offset_for_timestamp_finds_the_first_record_at_or_after_a_time(t: &Target) {
    if t.is_tansu() {
        // tansu 0.6.0's ListOffsets by timestamp answers offset 0 for the second of three
        // records with distinct timestamps (its ListOffsets miscounts offsets, see the
        // harness's `batch.num.messages`): a gap of tansu's, skipped there only.
        eprintln!("skipped on tansu: its ListOffsets by timestamp gives wrong offsets");
        return;
    }
    let broker = t.broker();
    let topic = t.new_topic("by-time", 1);
    let mut deliveries = Vec::new();
    for i in 0..3u64 {
        deliveries.push(broker.produce(&topic, &i).unwrap());
    }
    let mut consumer = broker.consumer::<u64>(&topic, "g", "m").unwrap();
    let read = wait::read(&mut consumer, 3);
    let second = &read[1];
    let found = broker
        .offset_for_timestamp(&topic, 0, second.timestamp_ms)
        .unwrap();
    // Records produced within one millisecond share a timestamp: the first of them answers.
    let first_with_that_time = read
        .iter()
        .find(|r| r.timestamp_ms == second.timestamp_ms)
        .map(|r| r.offset);
    assert_eq!(found, first_with_that_time);
    let newest = read.iter().map(|r| r.timestamp_ms).max().unwrap();
    assert_eq!(
        broker
            .offset_for_timestamp(&topic, 0, newest + 60_000)
            .unwrap(),
        None
    );
}

/// After `shutdown`, the handle's calls and its async face's are `BrokerStopped`.
fn a_shut_down_handle_refuses_every_call(t: &Target) {
    let topic = t.new_topic("stopped", 1);
    let client = t.another_client();
    client.produce(&topic, &1u64).unwrap();
    let face = client.async_handle();
    client.shutdown().unwrap();
    let refused = client.produce(&topic, &2u64);
    assert!(matches!(refused, Err(Error::BrokerStopped)), "{refused:?}");
    let refused = client.consumer::<u64>(&topic, "g", "m").map(|_| ());
    assert!(matches!(refused, Err(Error::BrokerStopped)), "{refused:?}");
    let refused =
        actix_rt::System::new().block_on(async move { face.produce(&topic, &3u64).await });
    assert!(matches!(refused, Err(Error::BrokerStopped)), "{refused:?}");
}

/// `alter_topic` grows the partitions (a keyed record goes by the new count at once),
/// refuses a count that does not grow, and changes retention: on the embedded broker
/// `list_topics` gives it back; on Kafka the cluster's DescribeConfigs shows it, with the
/// settings the topic was created with kept.
fn alter_topic_grows_partitions_and_changes_retention(t: &Target) {
    if t.is_tansu() {
        // tansu 0.6.0 does not serve CreatePartitions (librdkafka: "Required feature not
        // supported by broker", reported as `Error::Kafka`): a gap of tansu's.
        eprintln!("skipped on tansu: it does not serve CreatePartitions");
        return;
    }
    let broker = t.broker();
    let topic = t.topic("altered");
    let created = TopicConfig::default().retention_bytes(1 << 30);
    broker.create_topic(&topic, created.clone()).unwrap();
    let refused = broker.alter_topic(&topic, TopicChanges::default().partitions(1));
    assert!(
        matches!(
            refused,
            Err(Error::InvalidConfig {
                field: "partitions",
                ..
            })
        ),
        "{refused:?}"
    );
    let missing = broker.alter_topic(&t.topic("missing"), TopicChanges::default().partitions(2));
    assert!(
        matches!(missing, Err(Error::UnknownTopic { .. })),
        "{missing:?}"
    );

    let changes = TopicChanges::default()
        .partitions(3)
        .retention_ms(Some(3_600_000));
    let altered = broker.alter_topic(&topic, changes).unwrap();
    assert_eq!(altered.partitions, 3);
    assert_eq!(altered.retention_ms, Some(3_600_000));
    let d = broker.produce_keyed(&topic, key_for(2, 3), &1u64).unwrap();
    assert_eq!((d.partition, d.offset), (2, 0));
    assert_eq!(broker.list_topics().unwrap()[&topic].partitions, 3);

    let Some(bootstrap) = t.bootstrap() else {
        let expected = created.partitions(3).retention_ms(3_600_000);
        assert_eq!(broker.list_topics().unwrap()[&topic], expected);
        return;
    };
    let configs = described(bootstrap, &topic);
    assert_eq!(configs["retention.ms"], "3600000", "{configs:?}");
    assert_eq!(configs["retention.bytes"], "1073741824", "{configs:?}");
}

/// A compacted topic is created compacted with the compaction settings asked for, and the
/// policy can be altered: `list_topics` gives them back on the embedded broker, the cluster's
/// DescribeConfigs shows them on Kafka. The embedded broker refuses a keyless record with
/// `KeyRequired`; so does `nanokafka serve` (INVALID_RECORD, as Kafka's broker), which the
/// Kafka backend reports as `KeyRequired` too; tansu does not check keys, so it is not
/// asked, nor altered (it has no AlterConfigs).
fn a_compacted_topic_keeps_its_policy_and_settings(t: &Target) {
    let broker = t.broker();
    let topic = t.topic("compacted");
    let created = TopicConfig::default()
        .cleanup_policy(CleanupPolicy::Compact)
        .delete_retention_ms(1000);
    broker.create_topic(&topic, created.clone()).unwrap();
    let keyed = broker.produce_keyed(&topic, "k", &1u64).unwrap();
    assert_eq!(keyed.offset, 0);
    if !t.is_tansu() {
        let keyless = broker.produce(&topic, &2u64);
        assert!(
            matches!(keyless, Err(Error::KeyRequired { ref indexes, .. }) if indexes == &[0]),
            "{keyless:?}"
        );
    }
    match t.bootstrap() {
        None => assert_eq!(broker.list_topics().unwrap()[&topic], created),
        Some(bootstrap) => {
            let configs = described(bootstrap, &topic);
            assert_eq!(configs["cleanup.policy"], "compact", "{configs:?}");
            assert_eq!(configs["delete.retention.ms"], "1000", "{configs:?}");
        }
    }
    if t.is_tansu() {
        // tansu 0.6.0 does not serve AlterConfigs (librdkafka: "Required feature not
        // supported by broker"): a gap of tansu's.
        eprintln!("alter skipped on tansu: it does not serve AlterConfigs");
        return;
    }
    let both = TopicChanges::default().cleanup_policy(CleanupPolicy::CompactDelete);
    let altered = broker.alter_topic(&topic, both).unwrap();
    assert_eq!(altered.cleanup_policy, CleanupPolicy::CompactDelete);
    if let Some(bootstrap) = t.bootstrap() {
        let configs = described(bootstrap, &topic);
        assert_eq!(configs["cleanup.policy"], "compact,delete", "{configs:?}");
        // The alter sent only what changed: the other configs stay as created.
        assert_eq!(configs["delete.retention.ms"], "1000", "{configs:?}");
    }
}

on_every_target!(
    a_compacted_topic_keeps_its_policy_and_settings,
    a_shut_down_handle_refuses_every_call,
    create_topic_makes_the_partitions_and_refuses_a_second_create,
    create_topic_keeps_what_was_asked,
    the_handle_names_its_backend,
    delete_topic_removes_it_and_the_name_can_be_reused,
    offset_for_timestamp_finds_the_first_record_at_or_after_a_time,
    alter_topic_grows_partitions_and_changes_retention,
);
