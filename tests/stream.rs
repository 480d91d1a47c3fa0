//! `RecordStream<T>`: a group member as a `futures::Stream` of typed records. Order per
//! partition, commits and resuming, rebalances between two streams of one group (nothing
//! yielded twice inside a generation, everything yielded at least once), decode errors,
//! fenced commits, and leaving on drop.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::future::{select, Either};
use futures::StreamExt;
use nanokafka::{
    AsyncNanoKafka, Error, NanoKafka, Record, RecordStream, StreamOptions, TopicConfig,
};

#[path = "common/stream.rs"]
mod common_stream;
use common_stream::{next, run, PATIENCE};

const TOPIC: &str = "events";

/// A broker with `partitions` partitions holding `records` keyed `u64` records (value =
/// its number).
fn broker_with(records: u64, partitions: u32) -> (tempfile::TempDir, NanoKafka) {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let topic = broker.topic::<u64>(TOPIC);
    topic
        .create(TopicConfig::default().partitions(partitions))
        .unwrap();
    for i in 0..records {
        topic.produce_keyed(i.to_string(), &i).unwrap();
    }
    (dir, broker)
}

/// Short waits, small batches: rebalances show up within a few polls.
fn options() -> StreamOptions {
    StreamOptions {
        max_batch: 7,
        poll_wait: Duration::from_millis(100),
        ..StreamOptions::default()
    }
}

/// The members of `group` now.
async fn members(bus: &AsyncNanoKafka, group: &str) -> Vec<String> {
    let stats = bus.stats().await.unwrap();
    stats.topics[TOPIC]
        .groups
        .get(group)
        .map(|g| g.assignment.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn records_come_in_order_per_partition_each_once() {
    let (_dir, broker) = broker_with(60, 3);
    let seen = run(broker.async_handle(), |bus| async move {
        let mut stream = bus
            .topic::<u64>(TOPIC)
            .stream_with("g", "m", options())
            .await
            .unwrap();
        let mut seen = Vec::new();
        for _ in 0..60 {
            let r = next(&mut stream).await;
            seen.push((r.partition, r.offset, r.value));
        }
        seen
    });
    let mut per_partition: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (partition, offset, _) in &seen {
        per_partition.entry(*partition).or_default().push(*offset);
    }
    assert_eq!(per_partition.len(), 3);
    for offsets in per_partition.values() {
        assert_eq!(*offsets, (0..offsets.len() as u64).collect::<Vec<_>>());
    }
    let values: BTreeSet<u64> = seen.iter().map(|s| s.2).collect();
    assert_eq!(values, (0..60).collect());
}

#[test]
fn a_new_stream_of_the_group_resumes_after_the_commit() {
    let (_dir, broker) = broker_with(0, 1);
    let topic = broker.topic::<u64>(TOPIC);
    for i in 0..20 {
        topic.produce(&i).unwrap();
    }
    let resumed = run(broker.async_handle(), |bus| async move {
        let mut first = bus
            .stream_with::<u64>(TOPIC, "g", "a", options())
            .await
            .unwrap();
        let mut read = Vec::new();
        for _ in 0..10 {
            read.push(next(&mut first).await);
        }
        first.commit(&read[9]).await.unwrap();
        // A record this stream never yielded cannot be committed through `commit`.
        let unseen = Record {
            offset: 15,
            ..read[9].clone()
        };
        assert!(matches!(
            first.commit(&unseen).await,
            Err(Error::InvalidArgument { name: "record", .. })
        ));
        assert_eq!(bus.lag(TOPIC, "g").await.unwrap()[&0], 10);
        first.leave().await.unwrap();
        assert!(members(&bus, "g").await.is_empty());
        let mut second = bus
            .stream_with::<u64>(TOPIC, "g", "b", options())
            .await
            .unwrap();
        next(&mut second).await
    });
    assert_eq!((resumed.offset, resumed.value), (10, 10));
}

/// What the rebalance test records of each yielded record: who yielded it, in which
/// generation, and the record's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Seen {
    generation: u64,
    partition: u32,
    offset: u64,
    by: char,
}

/// Notes `record`, just yielded by `stream` (`by`), and commits it. Commits of records
/// read before a rebalance are refused (counted in `refused`): that is the fence working.
async fn note(
    stream: &mut RecordStream<u64>,
    by: char,
    record: Record<u64>,
    refused: &mut u32,
) -> Seen {
    let seen = Seen {
        generation: stream.assignment().generation,
        partition: record.partition,
        offset: record.offset,
        by,
    };
    match stream.commit(&record).await {
        Ok(()) => {}
        Err(Error::IllegalGeneration { .. }) => *refused += 1,
        Err(e) => panic!("commit of {seen:?} failed: {e}"),
    }
    seen
}

/// The next record of whichever of `a` and `b` yields first; `a_first` says which is polled
/// first (alternate it, or the other may never get a turn while one has records).
async fn either(
    a: &mut RecordStream<u64>,
    b: &mut RecordStream<u64>,
    a_first: bool,
) -> (char, Record<u64>) {
    // `next` is cancel-safe: the loser's records stay in its stream.
    let (by, item) = if a_first {
        match select(a.next(), b.next()).await {
            Either::Left((item, _)) => ('a', item),
            Either::Right((item, _)) => ('b', item),
        }
    } else {
        match select(b.next(), a.next()).await {
            Either::Left((item, _)) => ('b', item),
            Either::Right((item, _)) => ('a', item),
        }
    };
    (by, item.expect("the stream goes on").expect("a record"))
}

#[test]
fn two_streams_split_the_partitions_and_rebalances_repeat_nothing_within_a_generation() {
    const RECORDS: u64 = 300;
    let (_dir, broker) = broker_with(RECORDS, 4);
    let (seen, refused) = run(broker.async_handle(), |bus| async move {
        let mut refused = 0;
        let mut seen = Vec::new();
        let mut a = bus
            .stream_with::<u64>(TOPIC, "g", "a", options())
            .await
            .unwrap();
        // A alone: all four partitions.
        assert_eq!(a.assignment().partitions.len(), 4);
        for _ in 0..40 {
            let record = next(&mut a).await;
            seen.push(note(&mut a, 'a', record, &mut refused).await);
        }
        // B joins: a rebalance. Both read, interleaved, until B has read 40 records.
        let mut b = bus
            .stream_with::<u64>(TOPIC, "g", "b", options())
            .await
            .unwrap();
        let mut a_first = false;
        while seen.iter().filter(|s| s.by == 'b').count() < 40 {
            a_first = !a_first;
            let s = match either(&mut a, &mut b, a_first).await {
                ('a', record) => note(&mut a, 'a', record, &mut refused).await,
                (_, record) => note(&mut b, 'b', record, &mut refused).await,
            };
            seen.push(s);
        }
        // B leaves: a rebalance; A reads the rest.
        b.leave().await.unwrap();
        let distinct = |seen: &[Seen]| {
            let all: BTreeSet<(u32, u64)> = seen.iter().map(|s| (s.partition, s.offset)).collect();
            all.len() as u64
        };
        while distinct(&seen) < RECORDS {
            let record = next(&mut a).await;
            seen.push(note(&mut a, 'a', record, &mut refused).await);
        }
        assert_eq!(
            a.assignment().partitions.len(),
            4,
            "A has every partition again"
        );
        (seen, refused)
    });
    // Nothing twice inside one generation (a generation is group-wide: it covers both).
    let mut within_generation = BTreeSet::new();
    for s in &seen {
        assert!(
            within_generation.insert((s.generation, s.partition, s.offset)),
            "{s:?} yielded twice in its generation"
        );
    }
    // Everything at least once (the loop above ends only then), over three generations
    // at least: A alone, A and B, A alone again.
    let generations: BTreeSet<u64> = seen.iter().map(|s| s.generation).collect();
    assert!(generations.len() >= 3, "{generations:?}");
    // Inside a generation the two read disjoint partitions.
    for generation in &generations {
        let partitions = |by: char| -> BTreeSet<u32> {
            seen.iter()
                .filter(|s| s.generation == *generation && s.by == by)
                .map(|s| s.partition)
                .collect()
        };
        let (of_a, of_b) = (partitions('a'), partitions('b'));
        assert!(
            of_a.is_disjoint(&of_b),
            "generation {generation}: {of_a:?} and {of_b:?}"
        );
    }
    // What was read again after a rebalance was what had not been committed before it; a
    // commit refused by the fence is what makes a re-read possible, not a failure.
    let reads = seen.len() as u64;
    assert!(reads >= RECORDS, "{reads} reads, {refused} refused commits");
}

#[test]
fn a_commit_of_a_record_read_before_a_rebalance_is_refused() {
    let (_dir, broker) = broker_with(0, 1);
    for i in 0..30 {
        broker.produce(TOPIC, &i).unwrap();
    }
    run(broker.async_handle(), |bus| async move {
        // One record per poll: nothing is buffered when the group moves on.
        let opts = StreamOptions {
            max_batch: 1,
            ..options()
        };
        let mut a = bus.stream_with::<u64>(TOPIC, "g", "a", opts).await.unwrap();
        let old = a.assignment().generation;
        let r0 = next(&mut a).await;
        a.commit(&r0).await.unwrap();
        let _r1 = next(&mut a).await;
        let r2 = next(&mut a).await;
        // Another member joins: the group is in a new generation.
        let b = bus.join_group(TOPIC, "g", "b").await.unwrap();
        assert!(b.generation > old);
        let refused = a.commit(&r2).await;
        assert!(
            matches!(refused, Err(Error::IllegalGeneration { generation, .. }) if generation == old),
            "{refused:?}"
        );
        assert_eq!(
            bus.lag(TOPIC, "g").await.unwrap()[&0],
            29,
            "nothing changed"
        );
        // B leaves (another rebalance): A resumes at its commit, record 1, in the newest
        // generation.
        bus.leave_group(TOPIC, "g", "b").await.unwrap();
        let again = next(&mut a).await;
        assert_eq!(again.offset, 1);
        assert!(a.assignment().generation > b.generation);
        // A record of the old generation is still fenced by it, now that the stream has
        // moved on; the one read in this generation commits.
        let refused = a.commit(&r2).await;
        assert!(
            matches!(refused, Err(Error::IllegalGeneration { generation, .. }) if generation == old),
            "{refused:?}"
        );
        a.commit(&again).await.unwrap();
        assert_eq!(bus.lag(TOPIC, "g").await.unwrap()[&0], 28);
    });
}

#[test]
fn a_record_that_does_not_decode_is_an_error_naming_it_and_the_stream_moves_past() {
    let (_dir, broker) = broker_with(0, 1);
    broker.produce(TOPIC, &0u64).unwrap();
    broker.produce(TOPIC, &1u64).unwrap();
    // A string where a u64 is expected: valid MessagePack, not a u64.
    broker
        .produce_raw(TOPIC, None, nanokafka::encode("not a number").unwrap())
        .unwrap();
    broker.produce(TOPIC, &3u64).unwrap();
    run(broker.async_handle(), |bus| async move {
        let mut stream = bus
            .stream_with::<u64>(TOPIC, "g", "m", options())
            .await
            .unwrap();
        assert_eq!(next(&mut stream).await.value, 0);
        assert_eq!(next(&mut stream).await.value, 1);
        let bad = stream.next().await.expect("the stream goes on");
        match bad {
            Err(Error::Decode {
                topic,
                partition,
                offset,
                ..
            }) => assert_eq!((topic.as_str(), partition, offset), (TOPIC, 0, 2)),
            other => panic!("expected a Decode error, got {other:?}"),
        }
        let after = next(&mut stream).await;
        assert_eq!((after.offset, after.value), (3, 3));
        // The bad record can be committed past by offset.
        stream.commit_offset(0, 2).await.unwrap();
        assert_eq!(bus.lag(TOPIC, "g").await.unwrap()[&0], 1);
    });
}

#[test]
fn seek_moves_the_position_and_drops_the_buffered_records() {
    let (_dir, broker) = broker_with(0, 1);
    for i in 0..20 {
        broker.produce(TOPIC, &i).unwrap();
    }
    run(broker.async_handle(), |bus| async move {
        let mut stream = bus
            .stream_with::<u64>(TOPIC, "g", "m", options())
            .await
            .unwrap();
        assert_eq!(next(&mut stream).await.offset, 0);
        stream.seek(0, 15).unwrap();
        assert_eq!(next(&mut stream).await.offset, 15);
        assert!(matches!(
            stream.seek(7, 0),
            Err(Error::PartitionNotAssigned { partition: 7, .. })
        ));
    });
}

#[test]
fn dropping_the_stream_leaves_the_group() {
    let (_dir, broker) = broker_with(3, 2);
    run(broker.async_handle(), |bus| async move {
        let mut stream = bus
            .stream_with::<u64>(TOPIC, "g", "m", options())
            .await
            .unwrap();
        next(&mut stream).await;
        assert_eq!(members(&bus, "g").await, ["m"]);
        drop(stream);
        // The leave is sent, not awaited: the next request of this handle is handled after it.
        let deadline = Instant::now() + PATIENCE;
        while !members(&bus, "g").await.is_empty() {
            assert!(
                Instant::now() < deadline,
                "the dropped stream is still a member"
            );
            actix_rt::task::yield_now().await;
        }
    });
}

#[test]
fn bad_options_and_unknown_topics_are_refused_before_joining() {
    let (_dir, broker) = broker_with(0, 1);
    run(broker.async_handle(), |bus| async move {
        let zero = StreamOptions {
            max_batch: 0,
            ..options()
        };
        assert!(matches!(
            bus.stream_with::<u64>(TOPIC, "g", "m", zero).await,
            Err(Error::InvalidArgument {
                name: "max_batch",
                ..
            })
        ));
        assert!(members(&bus, "g").await.is_empty());
        assert!(matches!(
            bus.stream::<u64>("nope", "g", "m").await,
            Err(Error::UnknownTopic { .. })
        ));
    });
}

/// A stream moves into spawned tasks and works with `StreamExt` combinators that need
/// `Unpin`; a `Topic` is shared between tasks.
#[test]
fn a_stream_is_send_and_unpin_and_a_topic_send_sync_and_clone() {
    fn send_unpin<S: Send + Unpin>() {}
    fn send_sync_clone<S: Send + Sync + Clone>() {}
    send_unpin::<RecordStream<u64>>();
    send_sync_clone::<nanokafka::Topic<u64>>();
    send_sync_clone::<nanokafka::BlockingTopic<u64>>();
}

#[test]
fn after_its_coordinator_restarts_the_stream_joins_again_and_resumes_at_the_commit() {
    let (_dir, broker) = broker_with(0, 1);
    for i in 0..10 {
        broker.produce(TOPIC, &i).unwrap();
    }
    run(broker.async_handle(), |bus| async move {
        let opts = StreamOptions {
            max_batch: 5,
            ..options()
        };
        let mut stream = bus.stream_with::<u64>(TOPIC, "g", "m", opts).await.unwrap();
        let mut last = None;
        for _ in 0..5 {
            last = Some(next(&mut stream).await);
        }
        let last = last.unwrap();
        assert_eq!(last.offset, 4);
        stream.commit(&last).await.unwrap();
        // The coordinator forgets its members: the stream's next poll is refused
        // (`UnknownMember`), and it joins again by itself. A batch it fetched ahead before
        // the restart may come first (as a Kafka consumer's fetched records do); records
        // produced after the restart can only come from a poll after it, as a member again.
        bus.crash_group_coordinator(TOPIC, "g").await.unwrap();
        for i in 10..15u64 {
            bus.produce(TOPIC, &i).await.unwrap();
        }
        let mut read = Vec::new();
        while read.last() != Some(&14) {
            read.push(next(&mut stream).await.offset);
        }
        assert_eq!(read[0], 5, "resumes at the commit: {read:?}");
        assert!(read.iter().all(|&o| o >= 5), "{read:?}");
        assert!((5..15).all(|o| read.contains(&o)), "{read:?}");
        assert_eq!(members(&bus, "g").await, ["m"]);
    });
}

#[test]
fn the_largest_batch_and_wait_work() {
    let (_dir, broker) = broker_with(10, 1);
    run(broker.async_handle(), |bus| async move {
        let largest = StreamOptions {
            max_batch: usize::MAX,
            poll_wait: Duration::MAX,
            ..StreamOptions::default()
        };
        let mut stream = bus
            .stream_with::<u64>(TOPIC, "g", "m", largest)
            .await
            .unwrap();
        for offset in 0..10 {
            assert_eq!(next(&mut stream).await.offset, offset);
        }
        stream.leave().await.unwrap();
    });
}

// ---- a caught-up stream's poll waits at every partition before it fetches any ----

/// Whether a poll is parked at all `partitions` of the topic.
async fn parked_everywhere(bus: &AsyncNanoKafka, partitions: usize) -> bool {
    let stats = bus.stats().await.unwrap();
    let parked = stats.topics[TOPIC].partitions.iter();
    parked.filter(|p| p.parked_polls > 0).count() == partitions
}

#[test]
fn a_caught_up_stream_takes_each_record_of_a_trickle_on_any_partition() {
    let (_dir, broker) = broker_with(0, 4);
    run(broker.async_handle(), |bus| async move {
        // A poll waits as long as the test: a record its waits missed fails the test rather
        // than being found by the poll after it.
        let opts = StreamOptions {
            poll_wait: PATIENCE,
            ..options()
        };
        let mut stream = bus.stream_with::<u64>(TOPIC, "g", "m", opts).await.unwrap();
        let mut partitions = BTreeSet::new();
        for value in 0..12u64 {
            // Every other record comes while the poll waits, the others before it is sent.
            let waiting = value % 2 == 1;
            let mut record = Box::pin(next(&mut stream));
            if waiting {
                assert!(futures::poll!(record.as_mut()).is_pending());
                let deadline = Instant::now() + PATIENCE / 2;
                while !parked_everywhere(&bus, 4).await {
                    assert!(
                        Instant::now() < deadline,
                        "the poll did not wait at every partition"
                    );
                    actix_rt::task::yield_now().await;
                }
            }
            let produced = bus.produce(TOPIC, &value).await.unwrap();
            let record = record.await;
            let got = (record.partition, record.offset, record.value);
            assert_eq!(got, (produced.partition, produced.offset, value));
            partitions.insert(record.partition);
        }
        assert_eq!(
            partitions.len(),
            4,
            "round-robin produces reach every partition"
        );
        stream.leave().await.unwrap();
    });
}

// ---- the next poll is sent while the caller takes a full batch; it serves only if nothing moved ----

#[test]
fn while_the_caller_takes_a_full_batch_the_next_poll_is_already_waiting_for_records() {
    let (_dir, broker) = broker_with(2, 1);
    run(broker.async_handle(), |bus| async move {
        let opts = StreamOptions {
            max_batch: 2,
            poll_wait: PATIENCE,
            ..options()
        };
        let mut stream = bus.stream_with::<u64>(TOPIC, "g", "m", opts).await.unwrap();
        assert_eq!(next(&mut stream).await.offset, 0);
        // The batch was full: the poll after it is at the partition before the caller asks.
        let deadline = Instant::now() + PATIENCE / 2;
        while bus.stats().await.unwrap().topics[TOPIC].partitions[0].parked_polls == 0 {
            assert!(Instant::now() < deadline, "no poll was sent ahead");
            actix_rt::task::yield_now().await;
        }
        bus.produce(TOPIC, &2u64).await.unwrap();
        assert_eq!(next(&mut stream).await.offset, 1);
        assert_eq!(next(&mut stream).await.offset, 2);
    });
}

#[test]
fn a_commit_past_the_position_while_a_poll_is_sent_ahead_is_where_reading_resumes() {
    let (_dir, broker) = broker_with(10, 1);
    run(broker.async_handle(), |bus| async move {
        let opts = StreamOptions {
            max_batch: 2,
            ..options()
        };
        let mut stream = bus.stream_with::<u64>(TOPIC, "g", "m", opts).await.unwrap();
        assert_eq!(next(&mut stream).await.offset, 0);
        assert_eq!(next(&mut stream).await.offset, 1);
        // Committed 6: the answer read ahead from 2 is dropped, records 2..=5 never come.
        stream.commit_offset(0, 5).await.unwrap();
        assert_eq!(next(&mut stream).await.offset, 6);
    });
}

// ---- a caught-up stream's next poll is sent by the coordinator as it answers ----

/// The polls parked at `partition` now.
async fn parked_at(bus: &AsyncNanoKafka, partition: usize) -> usize {
    let stats = bus.stats().await.unwrap();
    stats.topics[TOPIC].partitions[partition].parked_polls
}

/// Waits (yielding, at most half of [`PATIENCE`]) until `partition` has `parked` polls
/// parked or none, as `parked` says.
async fn until_parked(bus: &AsyncNanoKafka, partition: usize, parked: bool, what: &str) {
    let deadline = Instant::now() + PATIENCE / 2;
    while (parked_at(bus, partition).await > 0) != parked {
        assert!(Instant::now() < deadline, "{what}");
        actix_rt::task::yield_now().await;
    }
}

/// A stream of group "g" whose polls wait as long as the test, past its first poll: that
/// one goes through the broker, which tells the handle the group's coordinator, and reads
/// record 0, produced here; the polls after it go to the coordinator directly.
async fn stream_past_its_first_poll(bus: &AsyncNanoKafka) -> RecordStream<u64> {
    let opts = StreamOptions {
        poll_wait: PATIENCE,
        ..options()
    };
    let mut stream = bus.stream_with::<u64>(TOPIC, "g", "m", opts).await.unwrap();
    bus.produce(TOPIC, &0u64).await.unwrap();
    assert_eq!(next(&mut stream).await.value, 0);
    stream
}

#[test]
fn a_caught_up_streams_next_poll_waits_before_it_is_asked_for_while_the_reader_keeps_asking() {
    let (_dir, broker) = broker_with(0, 1);
    run(broker.async_handle(), |bus| async move {
        let mut stream = stream_past_its_first_poll(&bus).await;
        let mut record = Box::pin(next(&mut stream));
        assert!(futures::poll!(record.as_mut()).is_pending());
        until_parked(&bus, 0, true, "the stream's poll did not wait").await;
        bus.produce(TOPIC, &1u64).await.unwrap();
        assert_eq!(record.await.value, 1);

        // Not asked for yet, the next poll waits at the partition already.
        until_parked(&bus, 0, true, "no poll was sent for the stream").await;
        bus.produce(TOPIC, &2u64).await.unwrap();
        until_parked(&bus, 0, false, "the poll was not answered").await;
        // The stream was not asked for more while that poll waited: none is sent after it,
        // so a reader that stops reading keeps no poll waiting. (Had one been sent, the next
        // record would answer it, and it would be followed by another.)
        bus.produce(TOPIC, &3u64).await.unwrap();
        let _settled = bus.stats().await.unwrap();
        let parked = parked_at(&bus, 0).await;
        assert_eq!(parked, 0, "a poll waits for a reader that asks nothing");
        assert_eq!(next(&mut stream).await.value, 2);
        assert_eq!(next(&mut stream).await.value, 3);

        // Asked for while they wait, the polls go on being sent for it.
        for value in 4..9u64 {
            let mut record = Box::pin(next(&mut stream));
            assert!(futures::poll!(record.as_mut()).is_pending());
            until_parked(&bus, 0, true, "the stream's poll did not wait").await;
            bus.produce(TOPIC, &value).await.unwrap();
            assert_eq!(record.await.value, value);
            until_parked(&bus, 0, true, "no poll was sent for the stream").await;
        }
        stream.leave().await.unwrap();
    });
}

#[test]
fn a_seek_drops_the_answer_of_the_poll_sent_for_the_stream() {
    let (_dir, broker) = broker_with(0, 1);
    run(broker.async_handle(), |bus| async move {
        let mut stream = stream_past_its_first_poll(&bus).await;
        // The second poll goes to the coordinator, which sends the third.
        bus.produce(TOPIC, &1u64).await.unwrap();
        assert_eq!(next(&mut stream).await.offset, 1);
        until_parked(&bus, 0, true, "no poll was sent for the stream").await;
        // That poll reads record 2 from offset 2; the stream is moved back to 1 first.
        bus.produce(TOPIC, &2u64).await.unwrap();
        until_parked(&bus, 0, false, "the poll was not answered").await;
        stream.seek(0, 1).unwrap();
        assert_eq!(next(&mut stream).await.offset, 1);
        assert_eq!(next(&mut stream).await.offset, 2);
        stream.leave().await.unwrap();
    });
}

#[test]
fn a_polls_wait_at_a_partition_that_did_not_answer_is_left_to_the_streams_next_poll() {
    let (_dir, broker) = broker_with(0, 2);
    run(broker.async_handle(), |bus| async move {
        let mut stream = stream_past_its_first_poll(&bus).await;
        let mut record = Box::pin(next(&mut stream));
        assert!(futures::poll!(record.as_mut()).is_pending());
        until_parked(&bus, 0, true, "the stream's poll did not wait").await;
        until_parked(&bus, 1, true, "the stream's poll did not wait").await;
        bus.produce(TOPIC, &1u64).await.unwrap();
        assert_eq!(record.await.value, 1);
        until_parked(&bus, 0, true, "no poll was sent for the stream").await;
        until_parked(&bus, 1, true, "no poll was sent for the stream").await;

        // Not asked for, the stream's next poll is answered by one partition...
        let answered = bus.produce(TOPIC, &2u64).await.unwrap().partition;
        let other = 1 - answered as usize;
        until_parked(&bus, answered as usize, false, "the poll was not answered").await;
        // ...and its wait at the other still waits, for the poll after it.
        let _settled = bus.stats().await.unwrap();
        let parked = parked_at(&bus, other).await;
        assert_eq!(
            parked, 1,
            "the wait at the partition that did not answer was dropped"
        );
        // A record there answers it while the stream is between polls: the next poll waits
        // there anew, is answered at once and reads it.
        let landed = bus.produce(TOPIC, &3u64).await.unwrap().partition;
        assert_eq!(landed as usize, other, "round-robin produces alternate");
        assert_eq!(next(&mut stream).await.value, 2);
        assert_eq!(next(&mut stream).await.value, 3);
        stream.leave().await.unwrap();
    });
}
