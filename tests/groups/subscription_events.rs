//! Push subscriptions that talk back: events (rebalances, records that do not decode, dead
//! letters, refused commits, the end), the awaitable end, and acks with granularity
//! (`CommitUpTo`, `Retry`) with dead-letter topics.

use std::collections::BTreeSet;
use std::time::Duration;

use actix::prelude::*;
use futures::channel::{mpsc, oneshot};
use nanokafka::messages::{
    Ack, DecodeAction, OnDecodeError, SubscribeOptions, SubscriptionEnd, SubscriptionEvent,
    SubscriptionRequest,
};
use nanokafka::{AsyncNanoKafka, Error, Header, ProduceRecord, TopicConfig};

use super::subscription_kit::*;

#[test]
fn a_record_that_does_not_decode_is_reported_and_stop_ends_the_subscription_with_it() {
    let (_dir, broker) = broker(1);
    produce(&broker, 0, &[0, 1]);
    broker.produce(TOPIC, "not a number").unwrap();
    produce(&broker, 0, &[3]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let mut watch = subscribe_with(&bus, "m", commit_all(), None, options())
            .await
            .unwrap();
        // The records before it are delivered.
        assert_eq!(watch.records(2).await, vec![(0, 0), (0, 1)]);
        let events = watch
            .events_until(|e| matches!(e, SubscriptionEvent::DecodeFailed { .. }))
            .await;
        let Some(SubscriptionEvent::DecodeFailed {
            partition: 0,
            offset: 2,
            error,
            action: DecodeAction::Stopped,
        }) = events.last()
        else {
            panic!("a decode event, got {events:?}");
        };
        assert!(!error.is_empty());
        let end = watch.subscription.clone().await;
        assert!(
            matches!(
                end,
                SubscriptionEnd::DecodeError {
                    partition: 0,
                    offset: 2,
                    ..
                }
            ),
            "{end:?}"
        );
        let last = watch
            .events_until(|e| matches!(e, SubscriptionEvent::Ended(_)))
            .await;
        assert!(
            matches!(
                last[..],
                [
                    SubscriptionEvent::Revoked { .. },
                    SubscriptionEvent::Ended(SubscriptionEnd::DecodeError { .. })
                ]
            ),
            "its partition given back, then the end: {last:?}"
        );
        // The records before it were committed, it was not; the member left.
        lag_becomes(&bus, &[(0, 2)]).await;
        let stats = bus.stats().await.unwrap();
        assert!(stats.topics[TOPIC].groups["g"].assignment.is_empty());
    });
}

#[test]
fn a_record_that_does_not_decode_goes_to_the_dead_letter_topic_unchanged_and_reading_goes_on() {
    let (_dir, broker) = broker(1);
    produce(&broker, 0, &[0]);
    let headers = [Header::new("origin", "test")];
    broker
        .produce_with_headers(TOPIC, Some(b"bad"), "not a number", &headers)
        .unwrap();
    produce(&broker, 0, &[2]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let options = options().dead_letter_topic(DLQ);
        let mut watch = subscribe_with(&bus, "m", commit_all(), None, options)
            .await
            .unwrap();
        assert_eq!(watch.records(2).await, vec![(0, 0), (0, 2)]);
        let events = watch
            .events_until(|e| matches!(e, SubscriptionEvent::DecodeFailed { .. }))
            .await;
        assert!(matches!(
            events.last(),
            Some(SubscriptionEvent::DecodeFailed {
                partition: 0,
                offset: 1,
                action: DecodeAction::DeadLettered,
                ..
            })
        ));
        lag_becomes(&bus, &[(0, 0)]).await;
        let letters = dead_letters(&bus).await;
        assert_eq!(letters.len(), 1);
        let letter = &letters[0];
        assert_eq!(letter.value, nanokafka::encode("not a number").unwrap());
        assert_eq!(letter.key.as_deref(), Some(&b"bad"[..]));
        assert_eq!(header(&letter.headers, "origin"), Some("test"));
        assert_eq!(
            header(&letter.headers, "nanokafka.dlq.reason"),
            Some("decode")
        );
        assert_eq!(header(&letter.headers, "nanokafka.dlq.offset"), Some("1"));
        assert!(header(&letter.headers, "nanokafka.dlq.error").is_some());
    });
}

#[test]
fn a_record_retried_to_its_last_attempt_is_dead_lettered_once_and_committed_past() {
    let (_dir, broker) = broker(1);
    broker
        .produce_with_headers(TOPIC, Some(b"k"), &0u64, &[Header::new("origin", "test")])
        .unwrap();
    produce(&broker, 0, &[1, 2, 3]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        // Offset 0 always fails.
        let script: Script = Box::new(|batch| match batch.records[0].offset {
            0 => Ack::Retry {
                offset: 0,
                after: Duration::from_millis(10),
            },
            _ => Ack::Commit,
        });
        let options = options().dead_letter_topic(DLQ).max_attempts(3);
        let mut watch = subscribe_with(&bus, "m", script, None, options)
            .await
            .unwrap();
        let seen = watch.records(3 * 4 + 3).await;
        let offsets: Vec<u64> = seen.iter().map(|s| s.1).collect();
        assert_eq!(offsets, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 1, 2, 3]);
        let events = watch
            .events_until(|e| matches!(e, SubscriptionEvent::DeadLettered { .. }))
            .await;
        assert!(matches!(
            events.last(),
            Some(SubscriptionEvent::DeadLettered {
                partition: 0,
                offset: 0,
                attempts: 3,
                ..
            })
        ));
        lag_becomes(&bus, &[(0, 0)]).await;
        let letters = dead_letters(&bus).await;
        assert_eq!(letters.len(), 1, "dead-lettered exactly once");
        let letter = &letters[0];
        assert_eq!(letter.value, nanokafka::encode(&0u64).unwrap());
        assert_eq!(letter.key.as_deref(), Some(&b"k"[..]));
        let expected = [
            ("origin", "test"),
            ("nanokafka.dlq.topic", TOPIC),
            ("nanokafka.dlq.partition", "0"),
            ("nanokafka.dlq.offset", "0"),
            ("nanokafka.dlq.group", "g"),
            ("nanokafka.dlq.reason", "retries-exhausted"),
            ("nanokafka.dlq.attempts", "3"),
        ];
        assert_headers(&letter.headers, &expected);
        assert_eq!(header(&letter.headers, "nanokafka.dlq.error"), None);
    });
}

#[test]
fn without_a_dead_letter_topic_the_last_attempt_ends_the_subscription() {
    let (_dir, broker) = broker(1);
    produce(&broker, 0, &[0, 1]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let script: Script = Box::new(|batch| Ack::Retry {
            offset: batch.records[0].offset + 1,
            after: Duration::ZERO,
        });
        let options = options().max_attempts(2);
        let watch = subscribe_with(&bus, "m", script, None, options)
            .await
            .unwrap();
        let end = watch.subscription.ended().await;
        assert!(
            matches!(
                end,
                SubscriptionEnd::RetriesExhausted {
                    partition: 0,
                    offset: 1,
                    attempts: 2
                }
            ),
            "{end:?}"
        );
        // The record before it was committed; it was not.
        lag_becomes(&bus, &[(0, 1)]).await;
    });
}

#[test]
fn a_retry_holds_its_partition_in_order_while_another_partition_flows() {
    let (_dir, broker) = broker(2);
    produce(&broker, 0, &[0, 1, 2, 3]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let mut first_try = true;
        let script: Script = Box::new(move |batch| {
            let record = &batch.records[0];
            if (record.partition, record.offset, first_try) == (0, 1, true) {
                first_try = false;
                return Ack::Retry {
                    offset: 1,
                    after: Duration::from_millis(500),
                };
            }
            Ack::Commit
        });
        let options = options().max_batch(1).max_in_flight(4);
        let mut watch = subscribe_with(&bus, "m", script, None, options)
            .await
            .unwrap();
        assert_eq!(watch.records(2).await, vec![(0, 0), (0, 1)]);
        // Partition 0 waits for its retry; partition 1 flows meanwhile.
        let records: Vec<ProduceRecord> = (10..13u64)
            .map(|v| ProduceRecord {
                key: None,
                value: nanokafka::encode(&v).unwrap(),
            })
            .collect();
        bus.produce_batch_raw(TOPIC, Some(1), records)
            .await
            .unwrap();
        let rest = watch.records(3 + 3).await;
        let on_0: Vec<u64> = rest.iter().filter(|s| s.0 == 0).map(|s| s.1).collect();
        assert_eq!(on_0, [1, 2, 3], "k again, then what follows it, in order");
        let redelivered = rest.iter().position(|s| *s == (0, 1)).unwrap();
        let flowed = rest.iter().filter(|s| s.0 == 1).count();
        assert_eq!(flowed, 3);
        assert!(
            rest[..redelivered].iter().all(|s| s.0 == 1) && redelivered == 3,
            "partition 1 flowed during the retry delay: {rest:?}"
        );
        lag_becomes(&bus, &[(0, 0), (1, 0)]).await;
    });
}

#[test]
fn commit_up_to_commits_exactly_through_the_record_and_delivers_the_rest_again() {
    let (_dir, broker) = broker(1);
    produce(&broker, 0, &[0, 1, 2, 3, 4, 5]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let mut first = true;
        let script: Script = Box::new(move |_| {
            if std::mem::take(&mut first) {
                Ack::CommitUpTo(2)
            } else {
                Ack::Defer
            }
        });
        let mut watch = subscribe_with(&bus, "m", script, None, options())
            .await
            .unwrap();
        let seen: Vec<u64> = watch.records(9).await.iter().map(|s| s.1).collect();
        assert_eq!(seen, [0, 1, 2, 3, 4, 5, 3, 4, 5]);
        // Committed through 2 (the Deferred rest is not).
        lag_becomes(&bus, &[(0, 3)]).await;
    });
}

#[test]
fn rebalance_events_agree_with_the_groups_assignment() {
    let (_dir, broker) = broker(4);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let mut a = subscribe_with(&bus, "a", commit_all(), None, options())
            .await
            .unwrap();
        let mut owned_by_a: BTreeSet<u32> = BTreeSet::new();
        let apply = |owned: &mut BTreeSet<u32>, events: &[SubscriptionEvent]| {
            for event in events {
                match event {
                    SubscriptionEvent::Assigned { partitions, .. } => owned.extend(partitions),
                    SubscriptionEvent::Revoked { partitions, .. } => {
                        partitions.iter().for_each(|p| {
                            owned.remove(p);
                        })
                    }
                    _ => {}
                }
            }
        };
        // A generation's events: `Revoked` then `Assigned`, each only when it names a
        // partition; the last one of each member tells its new share.
        let assigned = |generation: u64| {
            move |e: &SubscriptionEvent| match e {
                SubscriptionEvent::Assigned { generation: g, .. } => *g == generation,
                SubscriptionEvent::Revoked { generation: g, .. } => *g == generation,
                _ => false,
            }
        };
        let stats = |bus: AsyncNanoKafka| async move {
            let group = bus.stats().await.unwrap().topics[TOPIC].groups["g"].clone();
            (group.generation, group.assignment)
        };
        // At subscribe time: every partition.
        let (generation, assignment) = stats(bus.clone()).await;
        apply(&mut owned_by_a, &a.events_until(assigned(generation)).await);
        assert_eq!(owned_by_a, (0..4).collect());
        assert_eq!(Vec::from_iter(owned_by_a.clone()), assignment["a"]);

        // A second member joins: each side's events add up to its share.
        let mut b = subscribe_with(&bus, "b", commit_all(), None, options())
            .await
            .unwrap();
        let (generation, assignment) = stats(bus.clone()).await;
        apply(&mut owned_by_a, &a.events_until(assigned(generation)).await);
        let mut owned_by_b = BTreeSet::new();
        apply(&mut owned_by_b, &b.events_until(assigned(generation)).await);
        assert_eq!(Vec::from_iter(owned_by_a.clone()), assignment["a"]);
        assert_eq!(Vec::from_iter(owned_by_b), assignment["b"]);
        assert!(!assignment["b"].is_empty());

        // It leaves: everything is a's again.
        b.subscription.unsubscribe();
        assert!(matches!(
            b.subscription.ended().await,
            SubscriptionEnd::Unsubscribed
        ));
        let (generation, assignment) = stats(bus.clone()).await;
        apply(&mut owned_by_a, &a.events_until(assigned(generation)).await);
        assert_eq!(owned_by_a, (0..4).collect());
        assert_eq!(Vec::from_iter(owned_by_a), assignment["a"]);
        assert_eq!(assignment.len(), 1);
    });
}

#[test]
fn an_ack_after_the_member_was_fenced_by_a_rebalance_reports_the_refused_commit() {
    let (_dir, broker) = broker(1);
    produce(&broker, 0, &[0, 1]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let (release, held) = oneshot::channel();
        let mut watch = subscribe_with(&bus, "a", commit_all(), Some(held), options())
            .await
            .unwrap();
        assert_eq!(watch.records(2).await, vec![(0, 0), (0, 1)]);
        // Another member joins while the batch is held: a new generation.
        bus.join_group(TOPIC, "g", "b").await.unwrap();
        release.send(()).unwrap();
        let events = watch
            .events_until(|e| matches!(e, SubscriptionEvent::CommitRefused { .. }))
            .await;
        let Some(SubscriptionEvent::CommitRefused {
            partition: 0,
            offset: 1,
            error,
        }) = events.last()
        else {
            panic!("a refused commit, got {events:?}");
        };
        assert!(
            matches!(
                error,
                Error::IllegalGeneration { .. } | Error::PartitionNotAssigned { .. }
            ),
            "{error:?}"
        );
    });
}

#[test]
fn the_end_says_why_unsubscribed_subscriber_gone_topic_deleted_broker_stopped() {
    let (_dir, broker) = broker(1);
    produce(&broker, 0, &[0, 1, 2]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        // Unsubscribed: awaited through a clone, and the end event is the last one.
        let mut watch = subscribe_with(&bus, "a", commit_all(), None, options())
            .await
            .unwrap();
        watch.subscription.unsubscribe();
        let end = watch.subscription.clone().await;
        assert!(matches!(end, SubscriptionEnd::Unsubscribed), "{end:?}");
        assert!(matches!(
            watch.subscription.end(),
            Some(SubscriptionEnd::Unsubscribed)
        ));
        let events = watch
            .events_until(|e| matches!(e, SubscriptionEvent::Ended(_)))
            .await;
        assert!(matches!(
            events.last(),
            Some(SubscriptionEvent::Ended(SubscriptionEnd::Unsubscribed))
        ));

        // The subscriber stops at its first batch.
        let (seen, _seen) = mpsc::unbounded();
        let (events, _events) = mpsc::unbounded();
        let quitter = Scripted {
            script: commit_all(),
            seen,
            events,
            hold: None,
            stop_at_first: true,
        }
        .start();
        let subscription = bus
            .subscribe(
                TOPIC,
                "q",
                "b",
                quitter.recipient(),
                options().max_batch(1).max_in_flight(1),
            )
            .await
            .unwrap();
        let end = subscription.await;
        assert!(matches!(end, SubscriptionEnd::SubscriberGone), "{end:?}");

        // The topic is deleted.
        let watch = subscribe_with(&bus, "c", commit_all(), None, options())
            .await
            .unwrap();
        bus.delete_topic(TOPIC).await.unwrap();
        let end = watch.subscription.ended().await;
        assert!(matches!(end, SubscriptionEnd::TopicDeleted), "{end:?}");
        drop(watch.subscriber);
    });
    // The broker stops (shut down from a thread of its own: the blocking handle refuses to
    // block an actix thread).
    broker.create_topic(TOPIC, TopicConfig::default()).unwrap();
    let (subscribed, stop) = std::sync::mpsc::channel::<()>();
    let stopping = std::thread::spawn({
        let broker = broker.clone();
        move || {
            stop.recv().unwrap();
            broker.shutdown()
        }
    });
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let watch = subscribe_with(&bus, "d", commit_all(), None, options())
            .await
            .unwrap();
        subscribed.send(()).unwrap();
        let end = watch.subscription.ended().await;
        assert!(matches!(end, SubscriptionEnd::BrokerStopped), "{end:?}");
    });
    stopping.join().unwrap().unwrap();
}

#[test]
fn bad_options_are_refused_at_subscribe_and_nothing_joins() {
    let (_dir, broker) = broker(1);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let refused = [
            options().dead_letter_topic("bad/name"),
            options().dead_letter_topic(TOPIC),
            options().max_attempts(0),
            options().on_decode_error(OnDecodeError::DeadLetter),
        ];
        for bad in refused {
            let shown = format!("{bad:?}");
            let result = subscribe_with(&bus, "m", commit_all(), None, bad).await;
            assert!(
                matches!(result, Err(Error::InvalidArgument { .. })),
                "{shown}"
            );
        }
        assert!(matches!(
            bus.lag(TOPIC, "g").await,
            Err(Error::UnknownGroup { .. })
        ));
        assert!(!bus.list_topics().await.unwrap().contains_key("bad/name"));
    });
}

#[test]
fn a_poll_waiting_without_a_held_partition_takes_it_in_once_it_is_released() {
    let (_dir, broker) = broker(1);
    produce(&broker, 0, &[0, 1, 2]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        // Each batch holds the only partition, so the next poll waits without it; a wait of
        // a minute would outlast PATIENCE unless the ack's release cuts it short.
        let options = SubscribeOptions::default()
            .max_batch(1)
            .poll_wait(Duration::from_secs(60));
        let mut watch = subscribe_with(&bus, "m", commit_all(), None, options)
            .await
            .unwrap();
        assert_eq!(watch.records(3).await, vec![(0, 0), (0, 1), (0, 2)]);
        watch.subscription.unsubscribe();
        assert!(matches!(
            watch.subscription.ended().await,
            SubscriptionEnd::Unsubscribed
        ));
    });
}

#[test]
fn a_poll_that_fails_is_reported_retried_and_reading_resumes_where_it_was() {
    let (dir, broker) = broker(1);
    produce(&broker, 0, &[0, 1]);
    // Damage a byte of the first batch's records (its 61-byte header comes first): its CRC no
    // longer matches, so every read of it fails until the byte is put back.
    let segment = dir
        .path()
        .join(format!("{TOPIC}_0"))
        .join("00000000000000000000.log");
    let original = std::fs::read(&segment).unwrap();
    let mut damaged = original.clone();
    damaged[63] ^= 0xff;
    std::fs::write(&segment, &damaged).unwrap();
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let mut watch = subscribe_with(&bus, "m", commit_all(), None, options())
            .await
            .unwrap();
        let events = watch
            .events_until(|e| matches!(e, SubscriptionEvent::RequestFailed { .. }))
            .await;
        let Some(SubscriptionEvent::RequestFailed {
            request: SubscriptionRequest::Poll,
            error,
            retry_in,
        }) = events.last()
        else {
            panic!("a failed poll, got {events:?}");
        };
        assert!(matches!(error, Error::Corrupt { .. }), "{error:?}");
        assert!(!retry_in.is_zero());
        // Told, not ended, and nothing was skipped or handed over.
        assert!(watch.subscription.end().is_none());
        assert!(watch.seen.try_recv().is_err(), "nothing delivered");
        // Repaired, the next retry reads from where it was.
        std::fs::write(&segment, &original).unwrap();
        assert_eq!(watch.records(2).await, vec![(0, 0), (0, 1)]);
        lag_becomes(&bus, &[(0, 0)]).await;
    });
}

#[test]
fn the_largest_values_work_a_retry_forever_holds_its_partition_until_the_end() {
    let (_dir, broker) = broker(2);
    produce(&broker, 0, &[0, 1]);
    produce(&broker, 1, &[5]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let script: Script = Box::new(|batch| match batch.records[0].partition {
            0 => Ack::Retry {
                offset: batch.records[0].offset,
                after: Duration::MAX,
            },
            _ => Ack::Commit,
        });
        let options = SubscribeOptions::default()
            .max_batch(usize::MAX)
            .max_in_flight(usize::MAX)
            .max_attempts(u32::MAX)
            .poll_wait(Duration::MAX);
        let mut watch = subscribe_with(&bus, "m", script, None, options)
            .await
            .unwrap();
        let mut seen = watch.records(3).await;
        seen.sort();
        assert_eq!(seen, vec![(0, 0), (0, 1), (1, 0)]);
        // Partition 1 is committed; partition 0 waits for a retry that never comes due.
        lag_becomes(&bus, &[(0, 2), (1, 0)]).await;
        watch.subscription.unsubscribe();
        assert!(matches!(
            watch.subscription.clone().await,
            SubscriptionEnd::Unsubscribed
        ));
    });
}
