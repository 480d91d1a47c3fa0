//! Produce latency while the broker cleans the partition: one thread calls
//! `NanoKafka::produce_raw` with a key at a fixed rate on a one-partition compacted topic (its
//! partition an actor on an I/O thread, cleaned on the broker's cleaner thread), timing each
//! call; the p99 while a cleaning pass runs is held to the p99 of the same producer, same
//! broker and log, while none runs.
//!
//! What starts a pass is the broker's clock, a `ManualClock`: the topic's
//! `min_compaction_lag_ms` is an hour, so no segment is cleanable until the clock moves past
//! it. Each turn: fill the topic with `records / 2` keyed records (`produce_batch` of 1000,
//! not timed), then the producer for `quiet / 2` (no pass can start), then the clock moves an
//! hour and the producer runs until the pass is swapped in (the partition's
//! `stats().cleaner.passes` grows; read every 10 ms in every phase), then `quiet / 2` more
//! with nothing left to clean. The quiet phases before and after each pass are its baseline,
//! so a host that changes speed during a turn reaches both alike. The cleaner checks every
//! 10 ms (`cleaner_backoff`); the default `FsyncPolicy` (`Interval(1 s)`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nanokafka::clock::ManualClock;
use nanokafka::{CleanupPolicy, DirtyRatio, NanoKafka, RecordBatch, TopicConfig};

use crate::cleaner::{key_bytes, CleanerSettings, Keys, NOW_MS};
use crate::harness::{self, BATCH, VALUE_LEN};
use crate::report::{self, Figure, Row, Target};

const TOPIC: &str = "compacted";
/// The topic's `min_compaction_lag_ms`, and how far the clock moves to start a pass.
const LAG_MS: u64 = 60 * 60 * 1000;
/// How often the partition checks for a due pass.
const CLEANER_BACKOFF: Duration = Duration::from_millis(10);
/// How often the watcher reads `stats()`.
const WATCH_EVERY: Duration = Duration::from_millis(10);

/// Each turn's figures, and every call of each phase.
#[derive(Debug)]
pub struct ProduceLatency {
    pub rate: u32,
    pub turns: Vec<Turn>,
    pub quiet: Phase,
    pub cleaning: Phase,
    /// Records filled per turn.
    pub fill_records: u64,
}

/// The calls of one phase (or of every turn's phase), in ns.
#[derive(Debug)]
pub struct Phase {
    /// Each call's own time.
    pub calls: Histogram<u64>,
    /// From each call's slot in the schedule to its return: a call that waited behind a
    /// slow one counts the wait (no coordinated omission).
    pub scheduled: Histogram<u64>,
}

impl Phase {
    fn new() -> Self {
        // 1 ns .. 100 s, three significant digits.
        let histogram = || Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("bounds");
        Phase {
            calls: histogram(),
            scheduled: histogram(),
        }
    }

    fn add(&mut self, other: &Phase) {
        self.calls.add(&other.calls).expect("same bounds");
        self.scheduled.add(&other.scheduled).expect("same bounds");
    }
}

/// One turn: both phases' p99 of the calls (µs), and the pass's length.
#[derive(Debug, Clone, Copy)]
pub struct Turn {
    pub quiet_p99_us: f64,
    pub cleaning_p99_us: f64,
    pub pass_secs: f64,
}

fn us(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    histogram.value_at_quantile(quantile) as f64 / 1e3
}

/// How many passes partition 0's cleaner has swapped in.
fn passes(broker: &NanoKafka) -> u64 {
    let stats = broker.stats().expect("stats");
    stats.topics[TOPIC].partitions[0]
        .cleaner
        .as_ref()
        .map_or(0, |c| c.passes)
}

/// Produces `records` keyed 100-byte records in batches of [`BATCH`].
fn fill(broker: &NanoKafka, records: u64, keys: &mut Keys) {
    let value = [0xa5u8; VALUE_LEN];
    let mut left = records;
    while left > 0 {
        let n = left.min(BATCH as u64) as usize;
        let mut batch = RecordBatch::with_capacity(n, n * (VALUE_LEN + 16));
        for _ in 0..n {
            batch.push_raw(Some(&key_bytes(keys.next_key())), &value);
        }
        broker
            .produce_batch(TOPIC, Some(0), batch)
            .expect("fill the compacted topic");
        left -= n as u64;
    }
}

/// Calls `produce_raw` with a key every 1/`rate` s until `stop` is set (or `limit` passed),
/// timing each call; a call behind schedule goes at once.
fn paced(
    broker: &NanoKafka,
    rate: u32,
    keys: &mut Keys,
    limit: Duration,
    stop: &AtomicBool,
) -> Phase {
    let interval = Duration::from_secs(1) / rate;
    let mut phase = Phase::new();
    let start = Instant::now();
    let mut seq = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let due = interval * seq;
        if due >= limit {
            break;
        }
        if let Some(wait) = (start + due).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let key = key_bytes(keys.next_key());
        let sent = Instant::now();
        broker
            .produce_raw(TOPIC, Some(&key), vec![0x5a; VALUE_LEN])
            .expect("produce_raw");
        let done = Instant::now();
        let nanos = |d: Duration| (d.as_nanos() as u64).max(1);
        phase.calls.saturating_record(nanos(done - sent));
        phase
            .scheduled
            .saturating_record(nanos(done.saturating_duration_since(start + due)));
        seq += 1;
    }
    phase
}

/// Runs `produce` while a thread reads the cleaner's pass count every [`WATCH_EVERY`] (in
/// both phases, so that both pay for it); the flag `produce` is given is set once the count
/// passes `stop_after` (never, for `None`). Returns what `produce` did and the count after.
fn watched<T>(
    broker: &NanoKafka,
    stop_after: Option<u64>,
    produce: impl FnOnce(&AtomicBool) -> T,
) -> (T, u64) {
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let out = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if stop_after.is_some_and(|before| passes(broker) > before) {
                    stop.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(WATCH_EVERY);
            }
        });
        let out = produce(&stop);
        done.store(true, Ordering::Relaxed);
        out
    });
    (out, passes(broker))
}

/// Runs the turns; see the module docs.
pub fn measure(settings: &CleanerSettings, rate: u32, quiet: Duration) -> ProduceLatency {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = ManualClock::new(NOW_MS);
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .clock(Arc::new(clock.clone()))
        .cleaner_backoff(CLEANER_BACKOFF)
        .cleaner_key_map_bytes(settings.fitting_budget())
        .build()
        .expect("start broker");
    let config = TopicConfig::default()
        .partitions(1)
        .segment_bytes(settings.segment_bytes())
        .cleanup_policy(CleanupPolicy::Compact)
        .min_compaction_lag_ms(LAG_MS)
        .min_cleanable_dirty_ratio(DirtyRatio::from_basis_points(1).expect("a ratio"));
    broker.create_topic(TOPIC, config).expect("create topic");
    let fill_records = settings.records / 2;
    let mut keys = Keys::new(settings.keys);
    let mut measured = ProduceLatency {
        rate,
        turns: Vec::new(),
        quiet: Phase::new(),
        cleaning: Phase::new(),
        fill_records,
    };
    // A pass takes seconds; one that takes ten minutes is stuck.
    let limit = Duration::from_secs(600);
    for _ in 0..settings.turns {
        fill(&broker, fill_records, &mut keys);
        harness::settle_disk();
        let before = passes(&broker);
        let (mut quiet_phase, after_quiet) = watched(&broker, None, |stop| {
            paced(&broker, rate, &mut keys, quiet / 2, stop)
        });
        assert_eq!(after_quiet, before, "no pass before the clock moves");
        clock.advance(LAG_MS);
        let started = Instant::now();
        let (cleaning_phase, after) = watched(&broker, Some(before), |stop| {
            paced(&broker, rate, &mut keys, limit, stop)
        });
        let pass_secs = started.elapsed().as_secs_f64();
        assert!(after > before, "the pass ended within {limit:?}");
        let (quiet_after, last) = watched(&broker, None, |stop| {
            paced(&broker, rate, &mut keys, quiet / 2, stop)
        });
        assert_eq!(last, after, "nothing left to clean after the pass");
        quiet_phase.add(&quiet_after);
        measured.turns.push(Turn {
            quiet_p99_us: us(&quiet_phase.calls, 0.99),
            cleaning_p99_us: us(&cleaning_phase.calls, 0.99),
            pass_secs,
        });
        measured.quiet.add(&quiet_phase);
        measured.cleaning.add(&cleaning_phase);
    }
    broker.shutdown().expect("shutdown");
    measured
}

/// The p99 row (each turn's ratio in its label), and the same calls from their schedule and
/// at their longest (context).
pub fn rows(measured: &ProduceLatency) -> Vec<Row> {
    let list = |f: &dyn Fn(&Turn) -> String| -> String {
        let items: Vec<String> = measured.turns.iter().map(f).collect();
        items.join(", ")
    };
    let ratios = list(&|t| format!("{:.2}", t.cleaning_p99_us / t.quiet_p99_us));
    let pass_secs = list(&|t| format!("{:.1}", t.pass_secs));
    let (quiet, cleaning) = (&measured.quiet, &measured.cleaning);
    vec![
        Row::Figure(
            Figure::new(
                "cleaner_produce_p99",
                format!(
                    "produce_raw p99 at {} rec/s while a pass cleans the partition ({} calls, \
                     p50 {:.1} us; passes of {pass_secs} s, {} records filled per turn; \
                     turns' ratios {ratios})",
                    measured.rate,
                    cleaning.calls.len(),
                    us(&cleaning.calls, 0.5),
                    report::human(measured.fill_records as f64),
                ),
                us(&cleaning.calls, 0.99),
                "us",
            )
            .vs(
                format!(
                    "the same, no pass running ({} calls, p50 {:.1} us)",
                    quiet.calls.len(),
                    us(&quiet.calls, 0.5)
                ),
                us(&quiet.calls, 0.99),
            )
            .target(Target::RatioAtMost(2.0)),
        ),
        Row::Figure(
            Figure::new(
                "cleaner_produce_p99_scheduled",
                "the same calls' p99 from their slot in the schedule: a call that waited \
                 behind a slow one counts the wait (context)",
                us(&cleaning.scheduled, 0.99),
                "us",
            )
            .vs("the same, no pass running", us(&quiet.scheduled, 0.99)),
        ),
        Row::Figure(
            Figure::new(
                "cleaner_produce_max",
                "the longest call while a pass runs (context)",
                cleaning.calls.max() as f64 / 1e3,
                "us",
            )
            .vs("the same, no pass running", quiet.calls.max() as f64 / 1e3),
        ),
    ]
}
