//! Typed readers against their floor: `String` records of 100 bytes (MessagePack), read in
//! batches of [`TYPED_BATCH`] with a commit of each batch's last record, by the blocking
//! `NanoKafka::poll_batch`, a `Consumer<String>` and a `RecordStream<String>`, each beside the
//! decode floor of the same run: the same encoded Strings in memory, decoded one by one with
//! `rmp-serde`. Each reader is a group of its own over one pre-filled topic.
//! `NANOKAFKA_BENCH_ONLY=typed` runs these rows alone.

use std::time::Duration;

use futures::StreamExt;
use nanokafka::{FsyncPolicy, NanoKafka, StreamOptions, TopicConfig};

use crate::consume;
use crate::harness::{self, Meter, Progress, Rate, TempBroker, VALUE_LEN};
use crate::report::{Figure, Row, Target};

/// Records per poll and per commit.
pub const TYPED_BATCH: usize = 1000;

/// Progress steps of [`rows`].
pub const STEPS: usize = 5;

/// Records in the topic the typed readers read (110 MB, hot in the page cache). A reader that
/// reaches its end goes back to offset 0 and reads on, so the topic need not hold a whole
/// measurement's records.
const TYPED_RECORDS: u64 = 1_000_000;

/// Measures the decode floor and the three readers (fresh broker, one pre-filled topic) and
/// returns their rows, each as a ratio against the floor.
pub fn rows(budget: Duration, progress: &mut Progress) -> Vec<Row> {
    progress.step("typed: prefill 100 B Strings");
    let never = TempBroker::start(FsyncPolicy::Never);
    let broker = &never.broker;
    let topic = "typed";
    broker
        .create_topic(topic, TopicConfig::default())
        .expect("topic");
    consume::prefill(broker, topic, TYPED_RECORDS, true);
    harness::settle_disk();
    progress.step("typed: baseline, rmp-serde decode of the same Strings");
    let floor = decode_floor(budget);
    progress.step("typed: NanoKafka::poll_batch::<String> 1000 + commit");
    let flat = flat_poll_batch(broker, topic, budget);
    progress.step("typed: Consumer<String>::poll_batch 1000 + commit");
    let consumer = consumer_poll_batch(broker, topic, budget);
    progress.step("typed: RecordStream<String>, a commit per 1000");
    let stream = stream(broker, topic, budget);
    let floor_label = "rmp-serde decode of the same Strings";
    let figures = [
        (
            "typed_poll_batch",
            "poll_batch::<String> 1000 + commit",
            flat,
        ),
        ("typed_consumer", "Consumer<String> 1000 + commit", consumer),
        (
            "typed_stream",
            "RecordStream<String>, commit per 1000",
            stream,
        ),
    ];
    let mut rows = vec![Row::Section(
        "typed readers (100 B Strings, vs decode floor)",
    )];
    rows.extend(figures.into_iter().map(|(key, label, rate)| {
        Row::Figure(
            Figure::rate(key, label, rate)
                .vs(floor_label, floor.per_sec)
                .target(Target::RatioAtLeast(0.35)),
        )
    }));
    rows.push(Row::Figure(Figure::rate(
        "baseline_typed_decode",
        floor_label,
        floor,
    )));
    rows
}

/// Strings decoded per second from MessagePack bytes in memory, one `from_slice` each.
pub fn decode_floor(budget: Duration) -> Rate {
    let text = "x".repeat(VALUE_LEN - 2);
    let encoded: Vec<Vec<u8>> = (0..TYPED_BATCH)
        .map(|_| rmp_serde::to_vec(&text).expect("encode"))
        .collect();
    let meter = Meter::start();
    let mut decoded = 0u64;
    while meter.elapsed() < budget {
        for bytes in &encoded {
            let value: String = rmp_serde::from_slice(bytes).expect("decode");
            std::hint::black_box(value);
        }
        decoded += TYPED_BATCH as u64;
    }
    meter.rate(decoded)
}

/// The blocking `poll_batch::<String>` of the flat API, then a commit of the batch's last (at the
/// topic's end, the group's offset goes back to 0).
pub fn flat_poll_batch(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    let (group, member) = ("typed-flat", "member-0");
    broker.join_group(topic, group, member).expect("join");
    let meter = Meter::start();
    let mut consumed = 0u64;
    while meter.elapsed() < budget {
        let records = broker
            .poll_batch::<String>(topic, group, member, TYPED_BATCH, Duration::ZERO)
            .expect("poll_batch");
        let last = records.last().expect("a record: the topic is read round");
        if last.offset + 1 == TYPED_RECORDS {
            // Kafka's rule: a group's offset is reset only while it has no members.
            broker.leave_group(topic, group, member).expect("leave");
            broker.reset_offset(topic, group, 0, 0).expect("reset");
            broker.join_group(topic, group, member).expect("join");
        } else {
            broker
                .commit(topic, group, last.partition, last.offset)
                .expect("commit");
        }
        consumed += records.len() as u64;
    }
    meter.rate(consumed)
}

/// `Consumer<String>::poll_batch`, then a commit of the batch's last (and a seek to 0 at the
/// topic's end).
pub fn consumer_poll_batch(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    let mut consumer = broker
        .consumer::<String>(topic, "typed-consumer", "member-0")
        .expect("consumer");
    let meter = Meter::start();
    let mut consumed = 0u64;
    while meter.elapsed() < budget {
        let records = consumer
            .poll_batch(TYPED_BATCH, Duration::ZERO)
            .expect("poll_batch");
        let last = records.last().expect("a record: the topic is read round");
        consumer.commit(last).expect("commit");
        if last.offset + 1 == TYPED_RECORDS {
            consumer.seek(0, 0).expect("seek");
        }
        consumed += records.len() as u64;
    }
    meter.rate(consumed)
}

/// A `RecordStream<String>` of batches of [`TYPED_BATCH`], committing every
/// [`TYPED_BATCH`]th record (and seeking to 0 at the topic's end), on an actix System of its
/// own thread.
pub fn stream(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    let handle = broker.async_handle();
    let topic = topic.to_owned();
    let options = StreamOptions {
        max_batch: TYPED_BATCH,
        ..StreamOptions::default()
    };
    std::thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let mut stream = handle
                .stream_with::<String>(&topic, "typed-stream", "member-0", options)
                .await
                .expect("stream");
            let meter = Meter::start();
            let mut consumed = 0u64;
            while meter.elapsed() < budget {
                // The clock is read once a batch, as the other readers do.
                for n in 1..=TYPED_BATCH {
                    let record = stream.next().await.expect("a record").expect("record");
                    if n == TYPED_BATCH {
                        stream.commit(&record).await.expect("commit");
                    }
                    if record.offset + 1 == TYPED_RECORDS {
                        stream.seek(0, 0).expect("seek");
                    }
                }
                consumed += TYPED_BATCH as u64;
            }
            let rate = meter.rate(consumed);
            stream.leave().await.expect("leave");
            rate
        })
    })
    .join()
    .expect("stream thread")
}
