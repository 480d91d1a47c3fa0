//! The actor face: an actix actor drives the broker with typed messages sent to
//! `Addr<BrokerActor>` (the handles take shortcuts; these messages must work on their own).

use std::time::Duration;

use actix::System;
use nanokafka::encode;
use nanokafka::messages::{Commit, JoinGroup, Lag, Poll, Produce};
use nanokafka::GroupOptions;
use nanokafka::{NanoKafka, ProduceRecord, Record, TopicConfig};

#[test]
fn typed_messages_produce_poll_and_commit_through_the_broker_actor() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic("t", TopicConfig::default().partitions(3))
        .unwrap();
    let addr = broker.addr().unwrap();
    System::new().block_on(async move {
        let records = (0..6u64)
            .map(|i| ProduceRecord {
                key: Some(format!("k{}", i % 2).into_bytes()),
                value: encode(&i).unwrap(),
            })
            .collect();
        let produce = Produce {
            topic: "t".into(),
            partition: None,
            records,
        };
        let deliveries = addr.send(produce).await.unwrap().unwrap();
        assert_eq!(deliveries.len(), 6);
        // Records with one key share a partition and keep their order in it.
        for i in 2..6 {
            let (now, before) = (deliveries[i], deliveries[i - 2]);
            assert_eq!(now.partition, before.partition);
            assert!(now.offset > before.offset);
        }

        let join = JoinGroup {
            topic: "t".into(),
            group: "g".into(),
            member: "m".into(),
            options: GroupOptions::default(),
        };
        assert_eq!(
            addr.send(join).await.unwrap().unwrap().partitions,
            vec![0, 1, 2]
        );
        let mut seen = Vec::new();
        while seen.len() < 6 {
            let poll = Poll {
                topic: "t".into(),
                group: "g".into(),
                member: "m".into(),
                max_records: 10,
                wait: Some(Duration::from_secs(5)),
            };
            let batch = addr.send(poll).await.unwrap().unwrap();
            let last = batch.last().expect("records are waiting");
            let commit = Commit {
                topic: "t".into(),
                group: "g".into(),
                partition: last.partition,
                offset: last.offset,
            };
            addr.send(commit).await.unwrap().unwrap();
            seen.extend(
                batch
                    .into_iter()
                    .map(|r: Record<Vec<u8>>| r.decode::<u64>("t").unwrap().value),
            );
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..6).collect::<Vec<_>>());
        let lag = addr
            .send(Lag {
                topic: "t".into(),
                group: "g".into(),
            })
            .await
            .unwrap()
            .unwrap();
        assert!(lag.values().all(|&l| l == 0));
    });
}
