//! Typed readers against their floor: `String` records of 100 bytes (MessagePack), read in
//! batches of [`TYPED_BATCH`] with a commit of each batch's last record, by the blocking
//! `NanoKafka::poll_batch`, a `Consumer<String>` and a `RecordStream<String>`, each beside the
//! decode floor of the same run: the same encoded Strings in memory, decoded one by one with
//! `rmp-serde`. Each reader is a group of its own over one pre-filled topic.
//!
//! The floor and the readers are measured in turns (`produce::interleaved`): the floor is one
//! thread's work and a reader two threads' (the caller's and the partition's), so a host that
//! changes speed between two measurements taken one after the other would move their ratio.
//!
//! The stream commits as a high-rate stream should, through its `StreamCommitter` (coalesced,
//! sent on the commit interval, never awaited by the reading loop). A second stream row, with
//! no target, awaits `RecordStream::commit` instead: it shows what a round trip per 1,000
//! records costs a task that sleeps while it waits.
//! `NANOKAFKA_BENCH_ONLY=typed` runs these rows alone.

use std::cell::RefCell;
use std::sync::mpsc;
use std::time::Duration;

use futures::StreamExt;
use nanokafka::{Consumer, FsyncPolicy, NanoKafka, StreamOptions, TopicConfig};

use crate::consume;
use crate::harness::{self, tallied, Meter, Progress, Tally, TempBroker, VALUE_LEN};
use crate::produce;
use crate::report::{Figure, Row, Target};

/// Records per poll and per commit.
pub const TYPED_BATCH: usize = 1000;

/// Progress steps of [`rows`].
pub const STEPS: usize = 2;

/// Records in the topic the typed readers read (110 MB, hot in the page cache). A reader that
/// reaches its end goes back to offset 0 and reads on, so the topic need not hold a whole
/// measurement's records.
const TYPED_RECORDS: u64 = 1_000_000;

/// Measures the decode floor and the four readers in turns (fresh broker, one pre-filled
/// topic), each for `budget` in all, and returns their rows, each as a ratio against the
/// floor.
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
    progress.step("typed: decode floor, poll_batch, Consumer, two streams, in turns");
    let flat = FlatReader::join(broker, topic);
    let consumer = RefCell::new(
        broker
            .consumer::<String>(topic, "typed-consumer", "member-0")
            .expect("consumer"),
    );
    let coalesced = StreamReader::start(broker, topic, StreamCommit::Coalesced);
    let awaited = StreamReader::start(broker, topic, StreamCommit::Awaited);
    let [floor, kept, flat, consumer, coalesced, awaited] = produce::interleaved(
        budget,
        [
            &decode_floor,
            &decode_kept,
            &|slice| flat.read(slice),
            &|slice| consumer_poll_batch(&mut consumer.borrow_mut(), slice),
            &|slice| coalesced.read(slice),
            &|slice| awaited.read(slice),
        ],
    );
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
            "RecordStream<String>, StreamCommitter commit per 1000",
            coalesced,
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
    let context = [
        (
            "typed_stream_awaited",
            "RecordStream<String>, awaited commit per 1000",
            awaited,
        ),
        (
            "typed_decode_kept",
            "the same decode, each 1000 kept in a Vec until dropped together",
            kept,
        ),
    ];
    rows.extend(context.into_iter().map(|(key, label, rate)| {
        Row::Figure(Figure::rate(key, label, rate).vs(floor_label, floor.per_sec))
    }));
    rows.push(Row::Figure(Figure::rate(
        "baseline_typed_decode",
        floor_label,
        floor,
    )));
    rows
}

/// Strings decoded from MessagePack bytes in memory for `slice`, one `from_slice` each.
pub fn decode_floor(slice: Duration) -> Tally {
    decoding(slice, |encoded| {
        for bytes in encoded {
            let value: String = rmp_serde::from_slice(bytes).expect("decode");
            std::hint::black_box(value);
        }
    })
}

/// [`decode_floor`] as a batch reader's caller sees it: each [`TYPED_BATCH`] decoded values
/// live together in a `Vec` and are dropped together. A context row: the allocator's cost of
/// a batch of live values (glibc's fastbins and their consolidation, where one value at a
/// time stays in its per-thread cache), which every batch reader pays on top of its floor.
pub fn decode_kept(slice: Duration) -> Tally {
    decoding(slice, |encoded| {
        let values: Vec<String> = encoded
            .iter()
            .map(|bytes| rmp_serde::from_slice(bytes).expect("decode"))
            .collect();
        std::hint::black_box(&values);
    })
}

/// Runs `round` over [`TYPED_BATCH`] encoded 100-byte Strings until `slice` has passed;
/// counts [`TYPED_BATCH`] records a round.
fn decoding(slice: Duration, round: impl Fn(&[Vec<u8>])) -> Tally {
    let text = "x".repeat(VALUE_LEN - 2);
    let encoded: Vec<Vec<u8>> = (0..TYPED_BATCH)
        .map(|_| rmp_serde::to_vec(&text).expect("encode"))
        .collect();
    tallied(|| {
        let meter = Meter::start();
        let mut decoded = 0u64;
        while meter.elapsed() < slice {
            round(&encoded);
            decoded += TYPED_BATCH as u64;
        }
        decoded
    })
}

/// The blocking `poll_batch::<String>` of the flat API, then a commit of the batch's last (at
/// the topic's end, the group's offset goes back to 0).
struct FlatReader<'a> {
    broker: &'a NanoKafka,
    topic: &'a str,
}

impl<'a> FlatReader<'a> {
    const GROUP: &'static str = "typed-flat";
    const MEMBER: &'static str = "member-0";

    fn join(broker: &'a NanoKafka, topic: &'a str) -> Self {
        broker
            .join_group(topic, Self::GROUP, Self::MEMBER)
            .expect("join");
        FlatReader { broker, topic }
    }

    fn read(&self, slice: Duration) -> Tally {
        let (broker, topic, group, member) = (self.broker, self.topic, Self::GROUP, Self::MEMBER);
        tallied(|| {
            let meter = Meter::start();
            let mut consumed = 0u64;
            while meter.elapsed() < slice {
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
            consumed
        })
    }
}

/// `Consumer<String>::poll_batch` for `slice`, then a commit of each batch's last (and a seek
/// to 0 at the topic's end).
fn consumer_poll_batch(consumer: &mut Consumer<String>, slice: Duration) -> Tally {
    tallied(|| {
        let meter = Meter::start();
        let mut consumed = 0u64;
        while meter.elapsed() < slice {
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
        consumed
    })
}

/// How the stream row commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamCommit {
    /// `StreamCommitter::commit_record`: coalesced, sent on the stream's commit interval.
    Coalesced,
    /// `RecordStream::commit(..).await`: a round trip to the coordinator each time.
    Awaited,
}

/// A `RecordStream<String>` of batches of [`TYPED_BATCH`] on an actix System of its own
/// thread, read a slice at a time: it reads for each duration sent to it and answers with
/// what it read, committing every [`TYPED_BATCH`]th record as its [`StreamCommit`] says (and
/// seeking to 0 at the topic's end). It leaves its group when dropped.
struct StreamReader {
    slices: Option<tokio::sync::mpsc::UnboundedSender<Duration>>,
    tallies: mpsc::Receiver<Tally>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StreamReader {
    fn start(broker: &NanoKafka, topic: &str, commit: StreamCommit) -> Self {
        let handle = broker.async_handle();
        let topic = topic.to_owned();
        let group = match commit {
            StreamCommit::Coalesced => "typed-stream",
            StreamCommit::Awaited => "typed-stream-awaited",
        };
        let options = StreamOptions {
            max_batch: TYPED_BATCH,
            ..StreamOptions::default()
        };
        let (slices, mut slice_rx) = tokio::sync::mpsc::unbounded_channel::<Duration>();
        let (tally_tx, tallies) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            actix_rt::System::new().block_on(async move {
                let mut stream = handle
                    .stream_with::<String>(&topic, group, "member-0", options)
                    .await
                    .expect("stream");
                let committer = stream.committer();
                while let Some(slice) = slice_rx.recv().await {
                    let meter = Meter::start();
                    let mut consumed = 0u64;
                    while meter.elapsed() < slice {
                        // The clock is read once a batch, as the other readers do.
                        for n in 1..=TYPED_BATCH {
                            let record = stream.next().await.expect("a record").expect("record");
                            if n == TYPED_BATCH {
                                match commit {
                                    StreamCommit::Coalesced => {
                                        committer.commit_record(&record).expect("commit")
                                    }
                                    StreamCommit::Awaited => {
                                        stream.commit(&record).await.expect("commit")
                                    }
                                }
                            }
                            if record.offset + 1 == TYPED_RECORDS {
                                stream.seek(0, 0).expect("seek");
                            }
                        }
                        consumed += TYPED_BATCH as u64;
                    }
                    let tally = Tally {
                        records: consumed,
                        usage: meter.usage(),
                    };
                    if tally_tx.send(tally).is_err() {
                        break;
                    }
                }
                stream.leave().await.expect("leave");
            })
        });
        StreamReader {
            slices: Some(slices),
            tallies,
            thread: Some(thread),
        }
    }

    fn read(&self, slice: Duration) -> Tally {
        self.slices
            .as_ref()
            .expect("running")
            .send(slice)
            .expect("stream thread");
        self.tallies.recv().expect("stream thread")
    }
}

impl Drop for StreamReader {
    fn drop(&mut self) {
        self.slices = None;
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() && !std::thread::panicking() {
                panic!("stream thread");
            }
        }
    }
}
