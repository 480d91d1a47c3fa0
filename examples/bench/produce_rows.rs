//! The batch-produce and `FsyncPolicy::Always` measurements and their rows, shared by the
//! full run and `NANOKAFKA_BENCH_PRODUCE_ONLY=1` (these rows, the baselines they are held
//! to, nothing else: for comparing builds quickly).

use std::time::Duration;

use nanokafka::FsyncPolicy;

use crate::baselines;
use crate::harness::{Progress, Rate, TempBroker};
use crate::produce;
use crate::report::{Figure, Row, Target};

/// Producer threads of the `FsyncPolicy::Always` measurement (its target is stated for 8),
/// and threads of its baseline.
pub const ALWAYS_PRODUCERS: usize = 8;
/// Progress steps of [`measure_always`] and of [`measure_batches`].
pub const ALWAYS_STEPS: usize = 2;
pub const BATCH_STEPS: usize = 4;

/// The `FsyncPolicy::Always` figures, each broker row with the records one `fdatasync`
/// covered.
pub struct AlwaysFigures {
    /// 8 threads, `write` + `fdatasync` of one record each, one shared file (measured in
    /// slices alternating with `single`'s).
    pub baseline: Rate,
    pub single: (Rate, f64),
    pub batch: (Rate, f64),
}

/// Slices the baseline and the single-record row alternate in: an fdatasync's cost drifts
/// with what the shared disk is doing, so both see the same conditions.
const ALWAYS_ROUNDS: u32 = 4;

/// The baseline and the single-record row in alternating slices ([`ALWAYS_ROUNDS`] of each,
/// `budget` in all per figure), then the batch row.
pub fn measure_always(budget: Duration, progress: &mut Progress) -> AlwaysFigures {
    let always = TempBroker::start(FsyncPolicy::Always);
    let broker = &always.broker;
    progress.step(
        "FsyncPolicy::Always, 8 producer threads, produce_raw, alternating with the baseline \
         (8 threads, write + fdatasync of one record each, one file)",
    );
    let topic = always.topic("always-single");
    let slice = budget / ALWAYS_ROUNDS;
    let (mut baseline, mut single) = (Vec::new(), Vec::new());
    let (mut records, mut syncs) = (0, 0);
    for _ in 0..ALWAYS_ROUNDS {
        baseline.push(baselines::shared_fdatasync(slice, ALWAYS_PRODUCERS));
        let (rate, appended, synced) = produce::with_fsyncs(broker, topic, || {
            produce::blocking_threads(broker, topic, ALWAYS_PRODUCERS, slice)
        });
        single.push(rate);
        (records, syncs) = (records + appended, syncs + synced);
    }
    progress.step("FsyncPolicy::Always, 8 producer threads, produce_batch of 1000");
    let topic = always.topic("always-batch");
    let (batch, batch_records, batch_syncs) = produce::with_fsyncs(broker, topic, || {
        produce::batch_threads(broker, topic, ALWAYS_PRODUCERS, budget)
    });
    AlwaysFigures {
        baseline: mean(&baseline),
        single: (mean(&single), per_sync(records, syncs)),
        batch: (batch, per_sync(batch_records, batch_syncs)),
    }
}

/// The rate over equal slices: the mean of their rates, CPU per record weighted by records.
fn mean(slices: &[Rate]) -> Rate {
    let per_sec = slices.iter().map(|r| r.per_sec).sum::<f64>() / slices.len() as f64;
    let cpu = slices
        .iter()
        .map(|r| r.cpu_us_per_record * r.per_sec)
        .sum::<f64>()
        / slices
            .iter()
            .map(|r| r.per_sec)
            .sum::<f64>()
            .max(f64::MIN_POSITIVE);
    Rate {
        per_sec,
        cpu_us_per_record: cpu,
    }
}

fn per_sync(records: u64, syncs: u64) -> f64 {
    records as f64 / syncs.max(1) as f64
}

/// The batch-produce figures (`FsyncPolicy::Never`, one partition).
pub struct BatchFigures {
    /// The serial row's work on one thread: build, then `PartitionLog::append_batch`.
    pub one_thread: Rate,
    pub serial: Rate,
    pub pipelined: Rate,
    pub raw: Rate,
}

pub fn measure_batches(budget: Duration, progress: &mut Progress) -> BatchFigures {
    let never = TempBroker::start(FsyncPolicy::Never);
    let broker = &never.broker;
    // Each row's topic is deleted after it, so the next starts from the same page cache.
    let done = |topic: &str| {
        broker
            .delete_topic(topic)
            .expect("delete a batch row's topic")
    };
    progress.step("produce: build + PartitionLog::append_batch on one thread, 1000 x 100 B");
    let one_thread = produce::batch_on_one_thread(budget);
    progress.step("produce: produce_batch (RecordBatch), 1000 x 100 B per call");
    let serial = produce::batch(broker, never.topic("batch"), budget);
    done("batch");
    progress.step("produce: produce_batch, 4 batches in flight from an actix task");
    let pipelined = produce::batch_pipelined(broker, never.topic("batch-pipelined"), budget);
    done("batch-pipelined");
    progress.step("produce: produce_batch_raw (Vec<ProduceRecord>), 1000 x 100 B per call");
    let raw = produce::batch_raw(broker, never.topic("batch-raw"), budget);
    BatchFigures {
        one_thread,
        serial,
        pipelined,
        raw,
    }
}

/// The batch rows, held to the raw append baseline `raw_append` (labelled `raw_label`).
pub fn batch_rows(figures: &BatchFigures, raw_label: &str, raw_append: f64) -> Vec<Row> {
    vec![
        Row::Figure(
            Figure::rate(
                "produce_batch_one_thread",
                "the same work on one thread: build + PartitionLog::append_batch (context: \
                 the most a serial caller can get)",
                figures.one_thread,
            )
            .vs(raw_label, raw_append),
        ),
        Row::Figure(
            Figure::rate(
                "produce_batch",
                "produce_batch (RecordBatch), 1000 x 100 B, one call at a time",
                figures.serial,
            )
            .vs(raw_label, raw_append)
            .target(Target::RatioAtLeast(0.5)),
        ),
        Row::Figure(
            Figure::rate(
                "produce_batch_pipelined",
                format!(
                    "produce_batch, 1000 x 100 B, {} in flight (async)",
                    produce::BATCHES_IN_FLIGHT
                ),
                figures.pipelined,
            )
            .vs(raw_label, raw_append)
            .target(Target::RatioAtLeast(0.5)),
        ),
        Row::Figure(
            Figure::rate(
                "produce_batch_raw",
                "produce_batch_raw (1000 Vecs), 1000 x 100 B (context)",
                figures.raw,
            )
            .vs(raw_label, raw_append),
        ),
    ]
}

/// The `FsyncPolicy::Always` section: each broker row with its records per `fdatasync`
/// in the label, and as a figure of its own (in the JSON too).
pub fn always_rows(figures: &AlwaysFigures) -> Vec<Row> {
    let sync_label = "8 threads, write + fdatasync per record, shared file";
    let (single, single_per_sync) = figures.single;
    let (batch, batch_per_sync) = figures.batch;
    vec![
        Row::Section("FsyncPolicy::Always, 8 producer threads"),
        Row::Figure(
            Figure::rate(
                "always_8_threads",
                format!("8 threads, produce_raw ({single_per_sync:.1} rec/fdatasync)"),
                single,
            )
            .vs(sync_label, figures.baseline.per_sec)
            .target(Target::RatioAtLeast(1.0)),
        ),
        Row::Figure(Figure::new(
            "always_8_threads_records_per_fsync",
            "8 threads, produce_raw: records per fdatasync",
            single_per_sync,
            "rec",
        )),
        Row::Figure(
            Figure::rate(
                "always_8_threads_batch",
                format!(
                    "8 threads, produce_batch of 1000 ({batch_per_sync:.0} rec/fdatasync, context)"
                ),
                batch,
            )
            .vs(sync_label, figures.baseline.per_sec),
        ),
        Row::Figure(Figure::new(
            "always_8_threads_batch_records_per_fsync",
            "8 threads, produce_batch of 1000: records per fdatasync",
            batch_per_sync,
            "rec",
        )),
    ]
}

/// The baseline row of the `Always` section, for the baselines section.
pub fn always_baseline_row(figures: &AlwaysFigures) -> Row {
    Row::Figure(Figure::rate(
        "baseline_shared_fdatasync",
        "8 threads, write + fdatasync per record, shared file",
        figures.baseline,
    ))
}
