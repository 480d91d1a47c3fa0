//! Produce throughput through the broker: blocking threads, pipelined async from inside an
//! actix System, the batch API, and `FsyncPolicy::Always` with eight producer threads.
//! Every function returns records per second and the process's CPU per record over the same
//! interval ([`Rate`]), and uses a fresh topic (one partition unless the caller made more).
//!
//! [`with_busy_neighbour`] runs the one-thread measurement while another thread of the process
//! spins: what a producer gets when a neighbour hogs a core of the 2-core host (the broker's
//! threads and the producer share the other), compared with the quiet one-thread rate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use nanokafka::clock::{Clock, SystemClock};
use nanokafka::internals::storage::{LogConfig, PartitionLog, RetentionPolicy};
use nanokafka::{FsyncPolicy, NanoKafka};

use crate::harness::{
    payload, produce_batch, rate_for, record_batch, tallied, Meter, Rate, Tally, BATCH,
    RETENTION_BYTES,
};

/// Futures in flight in the pipelined measurement (its ≥ 1 M/s target is stated for 256).
const IN_FLIGHT: usize = 256;
/// Records per `buffered` run of the pipelined measurement, between two clock checks.
const PIPELINE_ROUND: usize = 10_000;
/// `produce_batch` futures in flight in the pipelined batch measurement: the next batch is
/// built while the ones before it are appended.
pub const BATCHES_IN_FLIGHT: usize = 4;
/// Batches per `buffered` run of the pipelined batch measurement, between two clock checks.
const BATCH_ROUND: usize = 64;

/// `threads` blocking threads, each calling `produce_raw` with one 100-byte record at a time.
pub fn blocking_threads(broker: &NanoKafka, topic: &str, threads: usize, budget: Duration) -> Rate {
    blocking_tally(broker, topic, threads, budget).rate()
}

/// [`blocking_threads`], as records and usage (a slice of an [`interleaved`] measurement).
pub fn blocking_tally(broker: &NanoKafka, topic: &str, threads: usize, budget: Duration) -> Tally {
    threaded(threads, budget, || {
        broker
            .produce_raw(topic, None, payload())
            .expect("produce_raw");
        1
    })
}

/// Slices each run of an [`interleaved`] measurement is cut into.
pub const SLICES: u32 = 4;

/// Measures `runs` in turns, each for `budget / SLICES` at a time, [`SLICES`] times over: each
/// rate is over all the slices of its run. On this shared VM the host changes speed for
/// seconds at a time, so runs measured one after the other can each catch another state of
/// it, and their ratio then measures the host. In turns, every run sees the same states.
pub fn interleaved<const N: usize>(
    budget: Duration,
    runs: [&dyn Fn(Duration) -> Tally; N],
) -> [Rate; N] {
    let slice = budget / SLICES;
    let mut tallies = [Tally::default(); N];
    for _ in 0..SLICES {
        for (run, tally) in runs.iter().zip(&mut tallies) {
            *tally += run(slice);
        }
    }
    tallies.map(|tally| tally.rate())
}

/// `threads` blocking threads, each calling `produce_batch` with a [`BATCH`]-record batch.
pub fn batch_threads(broker: &NanoKafka, topic: &str, threads: usize, budget: Duration) -> Rate {
    threaded(threads, budget, || {
        broker
            .produce_batch(topic, Some(0), record_batch())
            .expect("produce_batch");
        BATCH as u64
    })
    .rate()
}

/// `threads` threads each repeating `produce` (which returns the records it produced) until
/// `budget` has passed; the records of all of them together, and their usage.
fn threaded(threads: usize, budget: Duration, produce: impl Fn() -> u64 + Sync) -> Tally {
    tallied(|| {
        let start = Instant::now();
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut produced = 0u64;
                        while start.elapsed() < budget {
                            produced += produce();
                        }
                        produced
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("producer thread"))
                .sum()
        })
    })
}

/// One blocking thread, [`BATCH`] × 100 B per `produce_batch` call. Building the
/// `RecordBatch` is part of the timed loop, as it is for a caller.
pub fn batch(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    rate_for(budget, || {
        let deliveries = broker
            .produce_batch(topic, Some(0), record_batch())
            .expect("produce_batch");
        deliveries.len() as u64
    })
}

/// [`batch`]'s work with no thread in between: this thread builds each batch and appends it
/// with `PartitionLog::append_batch`, the storage engine a partition's actor owns (segments
/// and retention as the broker's topics have them, rolled segments sealed on another
/// thread). The most a caller making one `produce_batch` call at a time could get, whatever
/// carries its batch to the partition's thread and the answer back.
pub fn batch_on_one_thread(budget: Duration) -> Rate {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = LogConfig {
        fsync: FsyncPolicy::Never,
        retention: RetentionPolicy {
            bytes: Some(RETENTION_BYTES),
            ..RetentionPolicy::default()
        },
        ..LogConfig::default()
    };
    let (mut log, _) =
        PartitionLog::open(dir.path(), config, SystemClock.now_ms()).expect("open a log");
    rate_for(budget, || {
        let mut batch = record_batch();
        let appended = log
            .append_batch(&mut batch, SystemClock.now_ms())
            .expect("append");
        appended.count
    })
}

/// As [`batch`], with [`BATCHES_IN_FLIGHT`] `AsyncNanoKafka::produce_batch` futures in
/// flight from a task of an actix System on its own thread: each batch is built while the
/// ones before it are appended. The deliveries are checked to be consecutive across batches
/// (pipelined batches keep their order).
pub fn batch_pipelined(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    let handle = broker.async_handle();
    let topic = topic.to_owned();
    std::thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let meter = Meter::start();
            let mut produced = 0u64;
            let mut next_offset = None;
            while meter.elapsed() < budget {
                let mut replies = futures::stream::iter(0..BATCH_ROUND)
                    .map(|_| handle.produce_batch(&topic, Some(0), record_batch()))
                    .buffered(BATCHES_IN_FLIGHT);
                while let Some(reply) = replies.next().await {
                    let deliveries = reply.expect("produce_batch");
                    let first = deliveries.first().expect("a delivery per record").offset;
                    if let Some(expected) = next_offset {
                        assert_eq!(first, expected, "batches appended in call order");
                    }
                    next_offset = Some(first + deliveries.len() as u64);
                    produced += deliveries.len() as u64;
                }
            }
            meter.rate(produced)
        })
    })
    .join()
    .expect("actix thread")
}

/// Runs `measure` (a produce measurement on partition 0 of `topic`) and returns its rate
/// with the records appended and the partition's `fdatasync`s over the run (from the log
/// end offset and `PartitionStats::fsyncs` before and after).
pub fn with_fsyncs(
    broker: &NanoKafka,
    topic: &str,
    measure: impl FnOnce() -> Rate,
) -> (Rate, u64, u64) {
    let counts = || {
        let stats = broker.stats().expect("stats");
        let partition = &stats.topics[topic].partitions[0];
        (partition.log_end_offset, partition.fsyncs)
    };
    let (records_before, syncs_before) = counts();
    let rate = measure();
    let (records_after, syncs_after) = counts();
    (
        rate,
        records_after - records_before,
        syncs_after - syncs_before,
    )
}

/// As [`batch`], through `produce_batch_raw`: 1000 small `Vec`s built per call, then copied
/// into one batch by the handle.
pub fn batch_raw(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    rate_for(budget, || {
        let deliveries = broker
            .produce_batch_raw(topic, Some(0), produce_batch())
            .expect("produce_batch_raw");
        deliveries.len() as u64
    })
}

/// [`IN_FLIGHT`] `AsyncNanoKafka::produce_raw` futures at a time from a task of an actix
/// System on its own thread (the broker runs in its own System, as an application's would
/// not, but a message crosses threads either way: the partitions live on I/O arbiters).
/// Replies come back in order; the offsets are checked to be consecutive.
pub fn pipelined(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    let handle = broker.async_handle();
    let topic = topic.to_owned();
    std::thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let meter = Meter::start();
            let mut produced = 0u64;
            let mut last_offset = None;
            while meter.elapsed() < budget {
                let mut replies = futures::stream::iter(0..PIPELINE_ROUND)
                    .map(|_| handle.produce_raw(&topic, None, payload()))
                    .buffered(IN_FLIGHT);
                while let Some(reply) = replies.next().await {
                    let delivery = reply.expect("produce_raw");
                    if let Some(last) = last_offset {
                        assert_eq!(delivery.offset, last + 1, "replies in order");
                    }
                    last_offset = Some(delivery.offset);
                    produced += 1;
                }
            }
            meter.rate(produced)
        })
    })
    .join()
    .expect("actix thread")
}

/// [`blocking_threads`] with one thread while another thread of the process spins on an atomic
/// flag until the measurement is over. The CPU per record includes the spinner's core.
pub fn with_busy_neighbour(broker: &NanoKafka, topic: &str, budget: Duration) -> Tally {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let tally = blocking_tally(broker, topic, 1, budget);
        stop.store(true, Ordering::Relaxed);
        tally
    })
}
