//! Soak: 8 producer threads and a group of 2 consumers for `NANOKAFKA_SOAK_SECS` seconds
//! (default 60), sampling the process's resident memory: memory must not grow with the log.
//! Ignored by default (it runs for a minute); run it with
//! `cargo test --release --test soak -- --ignored --nocapture`.
//!
//! The bookkeeping is constant-size so it cannot mask a leak: each producer thread keys its
//! records to one partition and keeps only a count and an order-independent checksum of its
//! acknowledgements (seq, partition, offset); the final check streams the reopened log and
//! rebuilds both.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nanokafka::{NanoKafka, TopicConfig};

const TOPIC: &str = "soak";
const GROUP: &str = "soak-consumers";
const PRODUCERS: u32 = 8;
const CONSUMERS: u32 = 2;
const PARTITIONS: u32 = 4;
const DEFAULT_SECS: u64 = 60;
/// Memory is sampled this often (about 30 samples over the default minute).
const SAMPLE_EVERY: Duration = Duration::from_secs(2);
/// Allowed growth, see [`assert_memory_flat`].
const GROWTH_FACTOR: f64 = 1.5;
const GROWTH_SLACK_KB: u64 = 20 * 1024;

/// A produced value: (thread, seq).
type Value = (u32, u64);

/// What one producer thread had acknowledged.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Acked {
    count: u64,
    checksum: u64,
}

impl Acked {
    fn add(&mut self, seq: u64, partition: u32, offset: u64) {
        self.count += 1;
        self.checksum = self
            .checksum
            .wrapping_add(mix(seq ^ mix(u64::from(partition) << 48 ^ offset)));
    }
}

/// splitmix64's finalizer: spreads each acknowledgement over all 64 bits, so that a sum of
/// them changes if any one (seq, partition, offset) does.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// This process's resident set size in KiB, from /proc/self/status.
fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// The rule: the highest sample of the second half may exceed the highest of the first half
/// by at most 50 % plus 20 MB. The first half includes the warm-up (allocator arenas, page
/// cache of the mapped files, channel buffers), so a steady state passes and a leak that
/// grows with the log, the number of segments or the number of requests does not, once it
/// is bigger than the slack.
fn assert_memory_flat(samples: &[u64]) {
    assert!(samples.len() >= 4, "too few samples: {samples:?}");
    let (first, second) = samples.split_at(samples.len() / 2);
    let (first_max, second_max) = (*first.iter().max().unwrap(), *second.iter().max().unwrap());
    let allowed = (first_max as f64 * GROWTH_FACTOR) as u64 + GROWTH_SLACK_KB;
    assert!(
        second_max <= allowed,
        "resident memory grew: max {second_max} kB in the second half > {allowed} kB allowed (samples: {samples:?})"
    );
}

#[test]
#[ignore = "a minute long; cargo test --release --test soak -- --ignored --nocapture"]
fn memory_stays_flat_and_nothing_acknowledged_is_lost_under_sustained_load() {
    let secs = std::env::var("NANOKAFKA_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECS);
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    // Small segments: the log rolls hundreds of times, so per-segment state shows as growth.
    let config = TopicConfig::default()
        .partitions(PARTITIONS)
        .segment_bytes(1 << 20);
    broker.create_topic(TOPIC, config).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|thread| {
            let (broker, stop) = (broker.clone(), stop.clone());
            thread::spawn(move || {
                let key = format!("producer-{thread}");
                let mut acked = Acked::default();
                while !stop.load(Ordering::Relaxed) {
                    let seq = acked.count;
                    let d = broker.produce_keyed(TOPIC, &key, &(thread, seq)).unwrap();
                    acked.add(seq, d.partition, d.offset);
                }
                acked
            })
        })
        .collect();
    let consumed = Arc::new(AtomicU64::new(0));
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|c| {
            let (broker, stop, consumed) = (broker.clone(), stop.clone(), consumed.clone());
            thread::spawn(move || {
                let member = format!("consumer-{c}");
                broker.join_group(TOPIC, GROUP, &member).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    let batch = broker
                        .poll_batch::<Value>(TOPIC, GROUP, &member, 500, Duration::from_millis(100))
                        .unwrap();
                    if let Some(last) = batch.last() {
                        broker
                            .commit(TOPIC, GROUP, last.partition, last.offset)
                            .unwrap();
                        consumed.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();

    // Pacing only: the samples are what is checked, not the time.
    let started = Instant::now();
    let mut samples = vec![rss_kb()];
    while started.elapsed() < Duration::from_secs(secs) {
        thread::sleep(SAMPLE_EVERY);
        samples.push(rss_kb());
    }
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<Acked> = producers.into_iter().map(|t| t.join().unwrap()).collect();
    for c in consumers {
        c.join().unwrap();
    }
    let produced: u64 = acked.iter().map(|a| a.count).sum();
    eprintln!(
        "soak: {secs} s, {produced} records acknowledged ({} /s), {} consumed, rss kB {samples:?}",
        produced / secs.max(1),
        consumed.load(Ordering::Relaxed)
    );
    broker.shutdown().unwrap();
    assert_memory_flat(&samples);
    assert!(consumed.load(Ordering::Relaxed) > 0, "the consumers read");

    // Reopened: stream every record and rebuild each thread's count and checksum; each
    // thread's records must come in seq order (one partition per thread).
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker.join_group(TOPIC, "checker", "checker").unwrap();
    let mut found = vec![Acked::default(); PRODUCERS as usize];
    let mut next_offset: BTreeMap<u32, u64> = BTreeMap::new();
    loop {
        let batch = broker
            .poll_batch::<Value>(TOPIC, "checker", "checker", 1000, Duration::ZERO)
            .unwrap();
        let Some(last) = batch.last() else { break };
        broker
            .commit(TOPIC, "checker", last.partition, last.offset)
            .unwrap();
        for r in batch {
            let expected = next_offset.entry(r.partition).or_insert(0);
            assert_eq!(r.offset, *expected, "gap in partition {}", r.partition);
            *expected += 1;
            let (thread, seq) = r.value;
            let writer = &mut found[thread as usize];
            assert_eq!(seq, writer.count, "thread {thread}: out of order or lost");
            writer.add(seq, r.partition, r.offset);
        }
    }
    assert_eq!(found, acked, "every acknowledged record, at its offset");
    broker.shutdown().unwrap();
}
