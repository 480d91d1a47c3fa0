//! The actor face with one `Result`: `BrokerRef::request` and `RequestExt::request` answer
//! each message's own reply or error, flat, and `BrokerStopped` once the broker is gone.

#[path = "common/watchdog.rs"]
mod watchdog;

use std::time::Duration;

use actix::System;
use nanokafka::messages::{
    Commit, CrashBroker, CrashGroupCoordinator, CrashTopic, CreateTopic, GetStats, Heartbeat,
    JoinGroup, Lag, Poll, Produce, ResetOffset,
};
use nanokafka::{
    encode, AsyncNanoKafka, BrokerRef, Error, GroupOptions, NanoKafka, ProduceRecord, RequestExt,
    TopicConfig,
};

const WATCHDOG: Duration = Duration::from_secs(60);

fn in_system<F>(body: impl FnOnce() -> F + Send + 'static)
where
    F: std::future::Future<Output = ()> + 'static,
{
    watchdog::within(WATCHDOG, move || System::new().block_on(body()));
}

/// Runs `body` in an actix System with a broker opened there on a fresh directory (its
/// async handle and its `BrokerRef`), then shuts the broker down.
fn with_broker<F>(body: impl FnOnce(AsyncNanoKafka, BrokerRef) -> F + Send + 'static)
where
    F: std::future::Future<Output = ()> + 'static,
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    in_system(move || async move {
        let bus = AsyncNanoKafka::open(&path).await.unwrap();
        let broker = bus.broker_ref().unwrap();
        body(bus.clone(), broker).await;
        bus.shutdown().await.unwrap();
    });
}

fn produce(topic: &str, values: &[u64]) -> Produce {
    Produce {
        topic: topic.into(),
        partition: Some(0),
        records: values
            .iter()
            .map(|v| ProduceRecord {
                key: None,
                value: encode(v).unwrap(),
            })
            .collect(),
    }
}

fn join(topic: &str, group: &str, member: &str) -> JoinGroup {
    JoinGroup {
        topic: topic.into(),
        group: group.into(),
        member: member.into(),
        options: GroupOptions::default(),
    }
}

fn lag(topic: &str, group: &str) -> Lag {
    Lag {
        topic: topic.into(),
        group: group.into(),
    }
}

/// The values of the next records `member` reads, decoded.
async fn poll_values(broker: &BrokerRef, topic: &str, group: &str, member: &str) -> Vec<u64> {
    let poll = Poll {
        topic: topic.into(),
        group: group.into(),
        member: member.into(),
        max_records: 100,
        wait: None,
    };
    let records = broker.request(poll).await.unwrap();
    records
        .into_iter()
        .map(|r| r.decode::<u64>(topic).unwrap().value)
        .collect()
}

#[test]
fn requests_answer_their_reply_flat() {
    with_broker(|bus, broker| async move {
        let create = CreateTopic {
            topic: "t".into(),
            config: TopicConfig::default().partitions(2),
        };
        broker.request(create).await.unwrap();
        let deliveries = broker.request(produce("t", &[1, 2, 3])).await.unwrap();
        assert_eq!(
            deliveries.iter().map(|d| d.offset).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(
            broker
                .request(join("t", "g", "m"))
                .await
                .unwrap()
                .partitions,
            [0, 1]
        );
        assert_eq!(poll_values(&broker, "t", "g", "m").await, [1, 2, 3]);
        let commit = Commit {
            topic: "t".into(),
            group: "g".into(),
            partition: 0,
            offset: 0,
        };
        broker.request(commit).await.unwrap();
        let lags = broker.request(lag("t", "g")).await.unwrap();
        assert_eq!((lags[&0], lags[&1]), (2, 0));

        // The same through the extension trait on the bare address.
        let stats = bus.addr().unwrap().request(GetStats).await.unwrap();
        assert_eq!(stats.topics["t"].partitions.len(), 2);
        assert_eq!(stats.topics["t"].partitions[0].committed["g"], 1);
    });
}

#[test]
fn a_message_error_comes_through_as_it_is() {
    with_broker(|bus, broker| async move {
        let unknown = broker.request(lag("nope", "g")).await;
        assert!(
            matches!(&unknown, Err(Error::UnknownTopic { topic }) if topic == "nope"),
            "{unknown:?}"
        );
        let unknown = bus.addr().unwrap().request(produce("nope", &[1])).await;
        assert!(
            matches!(unknown, Err(Error::UnknownTopic { .. })),
            "{unknown:?}"
        );
    });
}

#[test]
fn a_stopped_broker_answers_broker_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let (by_ref, addr) = (broker.broker_ref().unwrap(), broker.addr().unwrap());
    assert!(by_ref.connected());
    broker.shutdown().unwrap();
    in_system(move || async move {
        assert!(!by_ref.connected());
        assert!(matches!(
            by_ref.request(GetStats).await,
            Err(Error::BrokerStopped)
        ));
        assert!(matches!(
            addr.request(lag("t", "g")).await,
            Err(Error::BrokerStopped)
        ));
    });
}

#[test]
fn a_crashed_group_coordinator_recovers_through_the_actor_face() {
    with_broker(|bus, broker| async move {
        bus.create_topic("t", TopicConfig::default()).await.unwrap();
        broker.request(produce("t", &[0, 1, 2])).await.unwrap();
        broker.request(join("t", "g", "c")).await.unwrap();
        let commit = Commit {
            topic: "t".into(),
            group: "g".into(),
            partition: 0,
            offset: 0,
        };
        broker.request(commit).await.unwrap();

        let crash = CrashGroupCoordinator {
            topic: "t".into(),
            group: "g".into(),
        };
        broker.request(crash).await.unwrap();

        // Memberships are reset, commits kept: the member joins again and reads on.
        let heartbeat = Heartbeat {
            topic: "t".into(),
            group: "g".into(),
            member: "c".into(),
        };
        let evicted = broker.request(heartbeat).await;
        assert!(
            matches!(evicted, Err(Error::UnknownMember { .. })),
            "{evicted:?}"
        );
        assert_eq!(
            broker
                .request(join("t", "g", "c"))
                .await
                .unwrap()
                .partitions,
            [0]
        );
        assert_eq!(poll_values(&broker, "t", "g", "c").await, [1, 2]);
        let stats = broker.request(GetStats).await.unwrap();
        assert_eq!(stats.topics["t"].groups["g"].restarts, 1);

        // An unknown group is an error, not a crash.
        let unknown = CrashGroupCoordinator {
            topic: "t".into(),
            group: "none".into(),
        };
        let refused = broker.request(unknown).await;
        assert!(
            matches!(refused, Err(Error::UnknownGroup { .. })),
            "{refused:?}"
        );
    });
}

#[test]
fn topic_and_broker_crashes_are_requests_too() {
    with_broker(|bus, broker| async move {
        bus.create_topic("t", TopicConfig::default()).await.unwrap();
        broker.request(produce("t", &[5])).await.unwrap();
        broker
            .request(CrashTopic { topic: "t".into() })
            .await
            .unwrap();
        broker.request(CrashBroker).await.unwrap();
        // Both restarted with their state: the topic still serves its records.
        broker.request(join("t", "g", "m")).await.unwrap();
        assert_eq!(poll_values(&broker, "t", "g", "m").await, [5]);
        let stats = broker.request(GetStats).await.unwrap();
        assert_eq!(stats.restarts, 1);
        assert_eq!(stats.topics["t"].restarts, 1);
    });
}

#[test]
fn reset_offset_is_a_message_refused_while_the_group_has_members() {
    with_broker(|bus, broker| async move {
        bus.create_topic("t", TopicConfig::default()).await.unwrap();
        broker.request(produce("t", &[0, 1, 2, 3])).await.unwrap();
        let reset = |offset| ResetOffset {
            topic: "t".into(),
            group: "g".into(),
            partition: 0,
            offset,
        };
        broker.request(reset(2)).await.unwrap();
        assert_eq!(broker.request(lag("t", "g")).await.unwrap()[&0], 2);
        let outside = broker.request(reset(5)).await;
        assert!(
            matches!(outside, Err(Error::InvalidArgument { name: "offset", .. })),
            "{outside:?}"
        );

        broker.request(join("t", "g", "m")).await.unwrap();
        let busy = broker.request(reset(0)).await;
        assert!(
            matches!(&busy, Err(Error::GroupNotEmpty { members, .. }) if members == &["m"]),
            "{busy:?}"
        );
        // Nothing changed: the member reads from the reset position.
        assert_eq!(poll_values(&broker, "t", "g", "m").await, [2, 3]);
    });
}
