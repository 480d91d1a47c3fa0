//! Dead letters that say what they were: `Ack::DeadLetter` sends a record to the dead-letter
//! topic at once, `DeadLettered` names its key, headers and place there, and a record's
//! attempt count goes with the commit, so a member that takes its partition over delivers
//! it as the next attempt and no record is delivered more than `max_attempts` times.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use nanokafka::messages::{Ack, SubscriptionEnd, SubscriptionEvent};
use nanokafka::{Error, Header, ProduceRecord};

use super::subscription_kit::*;

/// Every delivery of a batch's first record: (member, partition, offset, attempt).
type Attempts = Arc<Mutex<Vec<(&'static str, u32, u64, u32)>>>;

/// A script that notes each batch's attempt, retries the record at `at` (soon on its first
/// attempt, after a minute on later ones, so that the test decides what comes next) and
/// commits everything else.
fn retry_at(member: &'static str, at: (u32, u64), attempts: &Attempts) -> Script {
    let attempts = attempts.clone();
    Box::new(move |batch| {
        let first = &batch.records[0];
        let (partition, offset) = (first.partition, first.offset);
        attempts
            .lock()
            .unwrap()
            .push((member, partition, offset, batch.attempt));
        if (partition, offset) != at {
            return Ack::Commit;
        }
        let after = match batch.attempt {
            1 => Duration::from_millis(10),
            _ => Duration::from_secs(60),
        };
        Ack::Retry { offset, after }
    })
}

#[test]
fn a_record_retried_twice_is_delivered_as_attempt_3_by_the_next_owner_and_dead_lettered_there() {
    let (_dir, broker) = broker(2);
    let origin = [Header::new("origin", "test")];
    let at = broker
        .produce_with_headers(TOPIC, Some(b"pay-7"), &7u64, &origin)
        .unwrap();
    let (p, q) = (at.partition, 1 - at.partition);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let attempts: Attempts = Arc::default();
        // One batch in flight: a batch delivered after another was answered and acted on.
        let options = || {
            options()
                .dead_letter_topic(DLQ)
                .max_attempts(3)
                .max_in_flight(1)
                .max_batch(1)
        };
        let script = retry_at("a", (p, 0), &attempts);
        let mut a = subscribe_with(&bus, "a", script, None, options())
            .await
            .unwrap();
        assert_eq!(a.records(2).await, vec![(p, 0), (p, 0)]);
        // The second retry's commit is made once a record of the other partition comes.
        let record = ProduceRecord {
            key: None,
            value: nanokafka::encode(&1u64).unwrap(),
        };
        bus.produce_batch_raw(TOPIC, Some(q), vec![record])
            .await
            .unwrap();
        assert_eq!(a.records(1).await, vec![(q, 0)]);
        a.subscription.unsubscribe();
        assert!(matches!(
            a.subscription.clone().await,
            SubscriptionEnd::Unsubscribed
        ));

        let script = retry_at("b", (p, 0), &attempts);
        let mut b = subscribe_with(&bus, "b", script, None, options())
            .await
            .unwrap();
        let events = b
            .events_until(|e| matches!(e, SubscriptionEvent::DeadLettered { .. }))
            .await;
        let of_record: Vec<_> = (attempts.lock().unwrap().iter())
            .filter(|(_, partition, offset, _)| (*partition, *offset) == (p, 0))
            .map(|(member, _, _, attempt)| (*member, *attempt))
            .collect();
        assert_eq!(
            of_record,
            [("a", 1), ("a", 2), ("b", 3)],
            "3 deliveries in all"
        );
        let Some(SubscriptionEvent::DeadLettered {
            partition,
            offset: 0,
            attempts: 3,
            key,
            headers,
            reason: None,
            dead_letter_partition,
            dead_letter_offset,
            ..
        }) = events.last()
        else {
            panic!("a dead letter after 3 attempts, got {events:?}");
        };
        assert_eq!(*partition, p);
        assert_eq!(key.as_deref(), Some(&b"pay-7"[..]));
        assert_eq!(headers[..], origin);
        lag_becomes(&bus, &[(0, 0), (1, 0)]).await;
        let letters = dead_letters(&bus).await;
        assert_eq!(letters.len(), 1, "dead-lettered once");
        let letter = &letters[0];
        assert_eq!(
            (letter.partition, letter.offset),
            (*dead_letter_partition, *dead_letter_offset)
        );
        assert_eq!(letter.key, *key);
        assert_eq!(header(&letter.headers, "origin"), Some("test"));
        let partition = p.to_string();
        let expected = [
            ("nanokafka.dlq.partition", partition.as_str()),
            ("nanokafka.dlq.offset", "0"),
            ("nanokafka.dlq.reason", "retries-exhausted"),
            ("nanokafka.dlq.attempts", "3"),
        ];
        assert_headers(&letter.headers, &expected);
        b.subscription.unsubscribe();
    });
}

#[test]
fn an_ack_dead_letter_sends_the_record_to_the_dead_letter_topic_at_once_and_reads_on() {
    let (_dir, broker) = broker(1);
    produce(&broker, 0, &[0]);
    let origin = [Header::new("origin", "test")];
    broker
        .produce_with_headers(TOPIC, Some(b"poison"), &1u64, &origin)
        .unwrap();
    produce(&broker, 0, &[2]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let script: Script = Box::new(|batch| match batch.records.iter().any(|r| r.offset == 1) {
            true => Ack::DeadLetter {
                offset: 1,
                reason: "amount refused".into(),
            },
            false => Ack::Commit,
        });
        let options = options().dead_letter_topic(DLQ).max_attempts(3);
        let mut watch = subscribe_with(&bus, "m", script, None, options)
            .await
            .unwrap();
        let seen: Vec<u64> = watch.records(4).await.iter().map(|s| s.1).collect();
        assert_eq!(seen, [0, 1, 2, 2], "once, then what follows it");
        let events = watch
            .events_until(|e| matches!(e, SubscriptionEvent::DeadLettered { .. }))
            .await;
        let Some(SubscriptionEvent::DeadLettered {
            partition: 0,
            offset: 1,
            attempts: 1,
            key,
            headers,
            reason: Some(reason),
            dead_letter_partition: 0,
            dead_letter_offset: 0,
            ..
        }) = events.last()
        else {
            panic!("the record dead-lettered at once, got {events:?}");
        };
        assert_eq!(key.as_deref(), Some(&b"poison"[..]));
        assert_eq!(headers[..], origin);
        assert_eq!(reason, "amount refused");
        lag_becomes(&bus, &[(0, 0)]).await;
        let letters = dead_letters(&bus).await;
        assert_eq!(letters.len(), 1);
        let letter = &letters[0];
        assert_eq!(letter.key.as_deref(), Some(&b"poison"[..]));
        assert_eq!(letter.value, nanokafka::encode(&1u64).unwrap());
        let expected = [
            ("origin", "test"),
            ("nanokafka.dlq.topic", TOPIC),
            ("nanokafka.dlq.offset", "1"),
            ("nanokafka.dlq.reason", "rejected"),
            ("nanokafka.dlq.error", "amount refused"),
            ("nanokafka.dlq.attempts", "1"),
        ];
        assert_headers(&letter.headers, &expected);
    });
}

#[test]
fn an_ack_dead_letter_without_a_dead_letter_topic_ends_with_the_record_uncommitted() {
    let (_dir, broker) = broker(1);
    produce(&broker, 0, &[0, 1, 2]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let script: Script = Box::new(|_| Ack::DeadLetter {
            offset: 1,
            reason: "refused".into(),
        });
        let watch = subscribe_with(&bus, "m", script, None, options())
            .await
            .unwrap();
        let end = watch.subscription.ended().await;
        assert!(
            matches!(
                end,
                SubscriptionEnd::DeadLetterFailed {
                    partition: 0,
                    offset: 1,
                    error: Error::InvalidArgument { .. }
                }
            ),
            "{end:?}"
        );
        // The record before it is committed; it is not.
        lag_becomes(&bus, &[(0, 2)]).await;
    });
}
