//! Deleting a topic through the public API: the topic, its records, groups and files go; the
//! name can be created again, empty; cached produce routes, parked produces and long polls
//! learn of it; a reopen (also after a crash in the middle of a delete) finds it whole or
//! gone.

use crate::common;

use std::path::Path;
use std::thread;
use std::time::Duration;

use nanokafka::{AsyncNanoKafka, Backpressure, Error, NanoKafka, TopicConfig};

const WATCHDOG: Duration = Duration::from_secs(60);

/// The data directory's entries but the lock and the format file, sorted.
pub(crate) fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != ".lock" && n != "format")
        .collect();
    names.sort();
    names
}

fn is_unknown_topic<T: std::fmt::Debug>(result: &nanokafka::Result<T>, topic: &str) -> bool {
    matches!(result, Err(Error::UnknownTopic { topic: t }) if t == topic)
}

#[test]
fn a_deleted_topic_is_gone_with_its_files_and_its_name_starts_again_empty() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        broker
            .create_topic("orders", TopicConfig::default().partitions(2))
            .unwrap();
        broker
            .create_topic("orders_1", TopicConfig::default())
            .unwrap();
        for value in 0..10u64 {
            broker.produce("orders", &value).unwrap();
        }
        broker.produce("orders_1", &7u64).unwrap();
        broker.join_group("orders", "g", "m").unwrap();
        broker.commit("orders", "g", 0, 2).unwrap();

        broker.delete_topic("orders").unwrap();

        let topics = broker.list_topics().unwrap();
        assert_eq!(topics.keys().collect::<Vec<_>>(), ["orders_1"]);
        // Only the other topic's files are left (it shares a prefix with the deleted one).
        assert_eq!(entries(dir.path()), ["orders_1.json", "orders_1_0"]);
        assert!(is_unknown_topic(&broker.produce("orders", &1u64), "orders"));
        assert!(is_unknown_topic(
            &broker.poll::<u64>("orders", "g", "m"),
            "orders"
        ));
        assert!(is_unknown_topic(&broker.lag("orders", "g"), "orders"));
        assert!(is_unknown_topic(&broker.delete_topic("orders"), "orders"));
        assert!(!broker.stats().unwrap().topics.contains_key("orders"));

        // The name again: empty, one partition, no group, offsets from 0.
        broker
            .create_topic("orders", TopicConfig::default())
            .unwrap();
        let delivery = broker.produce("orders", &100u64).unwrap();
        assert_eq!((delivery.partition, delivery.offset), (0, 0));
        assert!(matches!(
            broker.lag("orders", "g"),
            Err(Error::UnknownGroup { .. })
        ));
        broker.join_group("orders", "g", "m").unwrap();
        let record = broker.poll::<u64>("orders", "g", "m").unwrap().unwrap();
        assert_eq!((record.offset, record.value), (0, 100));
        // The other topic never noticed.
        broker.join_group("orders_1", "g", "m").unwrap();
        let record = broker.poll::<u64>("orders_1", "g", "m").unwrap().unwrap();
        assert_eq!(record.value, 7);
        broker.shutdown().unwrap();

        // A reopen finds the new topic, not the old one.
        let broker = NanoKafka::open(dir.path()).unwrap();
        assert_eq!(broker.list_topics().unwrap()["orders"].partitions, 1);
        assert_eq!(common::log_end(&broker, "orders", 0), 1);
        broker.delete_topic("orders").unwrap();
        broker.shutdown().unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        assert_eq!(
            broker.list_topics().unwrap().keys().collect::<Vec<_>>(),
            ["orders_1"]
        );
        assert_eq!(entries(dir.path()), ["orders_1.json", "orders_1_0"]);
    });
}

#[test]
fn an_async_handles_cached_route_to_a_deleted_topic_is_not_used() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        broker
            .create_topic("t", TopicConfig::default().partitions(2))
            .unwrap();
        // A handle with a route cache of its own (the other handle's delete does not touch
        // it).
        let handle = AsyncNanoKafka::from(broker.addr().unwrap());
        let admin = broker.async_handle();
        actix_rt::System::new().block_on(async move {
            // The first produces go through the broker and teach the handle the direct
            // route; the next ones take it.
            for value in 0..4u64 {
                handle.produce("t", &value).await.unwrap();
            }
            admin.delete_topic("t").await.unwrap();
            // Deleted and not re-created: UnknownTopic, from the route or the broker.
            for _ in 0..2 {
                let result = handle.produce("t", &9u64).await;
                assert!(is_unknown_topic(&result, "t"), "{result:?}");
            }
            // Re-created: the same handle reaches the new topic, not the old actors.
            admin
                .create_topic("t", TopicConfig::default())
                .await
                .unwrap();
            for offset in 0..3 {
                let delivery = handle.produce("t", &(10 + offset)).await.unwrap();
                assert_eq!((delivery.partition, delivery.offset), (0, offset));
            }
        });
        broker.join_group("t", "g", "m").unwrap();
        let records = broker
            .poll_batch::<u64>("t", "g", "m", 100, Duration::ZERO)
            .unwrap();
        let values: Vec<u64> = records.iter().map(|r| r.value).collect();
        assert_eq!(values, [10, 11, 12]);
    });
}

#[test]
fn a_parked_long_poll_and_a_parked_produce_are_answered_unknown_topic() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::builder()
            .data_dir(dir.path())
            .block_timeout(Duration::from_secs(600))
            .build()
            .unwrap();
        let config = TopicConfig::default()
            .max_size(1)
            .backpressure(Backpressure::Block);
        broker.create_topic("full", config).unwrap();
        broker
            .create_topic("empty", TopicConfig::default())
            .unwrap();
        broker.join_group("full", "g", "m").unwrap();
        broker.join_group("empty", "g", "m").unwrap();
        broker.produce("full", &1u64).unwrap(); // the backlog is now at max_size
        let (producer, poller) = (broker.clone(), broker.clone());
        let parked_produce = thread::spawn(move || producer.produce("full", &2u64));
        let parked_poll = thread::spawn(move || {
            poller.poll_timeout::<u64>("empty", "g", "m", Duration::from_secs(600))
        });
        // Whether they parked before the delete or arrive after it, the answer is the same,
        // and it comes long before their 600 s waits (the watchdog).
        broker.delete_topic("full").unwrap();
        broker.delete_topic("empty").unwrap();
        let produced = parked_produce.join().unwrap();
        assert!(is_unknown_topic(&produced, "full"), "{produced:?}");
        let polled = parked_poll.join().unwrap();
        assert!(is_unknown_topic(&polled, "empty"), "{polled:?}");
        assert!(broker.list_topics().unwrap().is_empty());
        assert!(entries(dir.path()).is_empty());
    });
}

#[test]
fn an_open_after_a_crash_in_the_middle_of_a_delete_finds_the_topic_whole_or_gone() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        broker
            .create_topic("t", TopicConfig::default().partitions(2))
            .unwrap();
        for value in 0..4u64 {
            broker.produce("t", &value).unwrap();
        }
        broker.shutdown().unwrap();
        let trash = dir.path().join(".deleted");

        // A crash before the commit point (the trash made, the config not moved yet): the
        // topic is whole, records and all.
        std::fs::create_dir(&trash).unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        assert_eq!(broker.list_topics().unwrap()["t"].partitions, 2);
        assert_eq!(common::log_end(&broker, "t", 0), 2);
        assert_eq!(common::log_end(&broker, "t", 1), 2);
        assert!(!trash.exists());
        broker.shutdown().unwrap();

        // A crash after it (the config in the trash, one partition moved, one not): the
        // open finishes the delete.
        std::fs::create_dir(&trash).unwrap();
        std::fs::rename(dir.path().join("t.json"), trash.join("t.json")).unwrap();
        std::fs::rename(dir.path().join("t_1"), trash.join("t_1")).unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        assert!(broker.list_topics().unwrap().is_empty());
        assert!(entries(dir.path()).is_empty());
        broker.create_topic("t", TopicConfig::default()).unwrap();
        assert_eq!(common::log_end(&broker, "t", 0), 0);
    });
}
