//! A model-based property test of the partition log: random appends, reads, clock moves,
//! clean restarts, crashes and crashes that cut the active segment, checked after every step
//! against an in-memory model (every record ever appended, by offset, plus the log start).
//!
//! Shrunk failures are frozen below as named tests that replay the exact sequence.

use crate::common::{base_of, segment_files};

use std::fs;
use std::path::Path;

use nanokafka::storage::{AppendRecord, LogConfig, PartitionLog, RetentionPolicy, StorageError};
use nanokafka::FsyncPolicy;
use proptest::prelude::*;

const NOW: u64 = 1_700_000_000_000;
/// Bytes of a frame besides its key and value.
const FRAME_OVERHEAD: usize = 30;

type Key = Option<Vec<u8>>;
/// A record as read back: offset, key, value, timestamp.
type Fetched = (u64, Key, Vec<u8>, u64);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Cut the active segment to 0 bytes.
    FileStart,
    /// Cut at the `n % (frames + 1)`-th frame boundary (the last one leaves the file whole).
    FrameBoundary(u16),
    /// Cut at byte `n % (len + 1)`: usually inside a frame.
    Byte(u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Append(Vec<(Key, Vec<u8>)>),
    /// Read from `offset % (log end + 3)`: below, inside and past the range.
    Read {
        offset: u16,
        max_records: usize,
        max_bytes: usize,
    },
    /// Moves the clock (backwards too: wall clocks do) and enforces retention.
    AdvanceClock(i64),
    CleanRestart,
    Crash,
    CrashAndCut(Cut),
}

#[derive(Debug, Clone, Copy)]
struct Params {
    segment_bytes: u64,
    retention: RetentionPolicy,
}

impl Params {
    fn config(&self) -> LogConfig {
        LogConfig {
            segment_bytes: self.segment_bytes,
            fsync: FsyncPolicy::Never,
            retention: self.retention,
            ..LogConfig::default()
        }
    }
}

/// What the log should hold: every record ever appended (offset = index) and the log start.
#[derive(Debug, Default)]
struct Model {
    records: Vec<(Key, Vec<u8>, u64)>,
    log_start: u64,
    last_timestamp: u64,
}

impl Model {
    fn log_end(&self) -> u64 {
        self.records.len() as u64
    }

    fn append(&mut self, batch: &[(Key, Vec<u8>)], now: u64, retention: RetentionPolicy) {
        self.last_timestamp = self.last_timestamp.max(now);
        for (key, value) in batch {
            self.records
                .push((key.clone(), value.clone(), self.last_timestamp));
        }
        self.enforce_retention(now, retention);
    }

    fn enforce_retention(&mut self, now: u64, retention: RetentionPolicy) {
        let end = self.log_end();
        if let Some(n) = retention.records {
            self.log_start = self.log_start.max(end.saturating_sub(n));
        }
        if let Some(ms) = retention.ms {
            let cutoff = now.saturating_sub(ms);
            let first_young = (self.log_start..end)
                .find(|&o| self.records[o as usize].2 >= cutoff)
                .unwrap_or(end);
            self.log_start = self.log_start.max(first_young);
        }
        if let Some(max_bytes) = retention.bytes {
            let frame = |o: u64| {
                let (k, v, _) = &self.records[o as usize];
                (FRAME_OVERHEAD + k.as_ref().map_or(0, Vec::len) + v.len()) as u64
            };
            let mut retained: u64 = (self.log_start..end).map(frame).sum();
            while retained > max_bytes {
                retained -= frame(self.log_start);
                self.log_start += 1;
            }
        }
    }

    /// Records `[from, log end)` as the log returns them.
    fn from(&self, from: u64) -> Vec<Fetched> {
        (from..self.log_end())
            .map(|o| {
                let (k, v, ts) = &self.records[o as usize];
                (o, k.clone(), v.clone(), *ts)
            })
            .collect()
    }
}

/// Byte positions where the frames of a segment file end, read from their length fields.
fn frame_ends(bytes: &[u8]) -> Vec<u64> {
    let mut ends = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        at += 4 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        ends.push(at as u64);
    }
    ends
}

fn fetch(
    log: &mut PartitionLog,
    offset: u64,
    max_records: usize,
    max_bytes: usize,
) -> Result<(Vec<Fetched>, u64), StorageError> {
    let fetched = log.read(offset, max_records, max_bytes)?;
    let records = fetched
        .iter()
        .map(|r| {
            (
                r.offset,
                r.key.map(<[u8]>::to_vec),
                r.value.to_vec(),
                r.timestamp_ms,
            )
        })
        .collect();
    Ok((records, fetched.next_offset()))
}

/// The log and its model must agree on the range and on every record in it.
fn check_matches(log: &mut PartitionLog, model: &Model) {
    assert_eq!(log.log_start_offset(), model.log_start, "log start");
    assert_eq!(log.log_end_offset(), model.log_end(), "log end");
    let mut got = Vec::new();
    let mut offset = 0;
    loop {
        let (records, next) = fetch(log, offset, 50, 1 << 20).unwrap();
        if records.is_empty() {
            assert_eq!(next, model.log_end());
            break;
        }
        got.extend(records);
        offset = next;
    }
    assert_eq!(got, model.from(model.log_start), "records");
}

/// One bounded read: a prefix of the model's records from `max(offset, log start)`, within
/// the bounds, stopping short only at a segment boundary.
fn check_read(
    log: &mut PartitionLog,
    model: &Model,
    offset: u64,
    max_records: usize,
    max_bytes: usize,
) {
    let result = fetch(log, offset, max_records, max_bytes);
    if offset > model.log_end() {
        assert!(
            matches!(result, Err(StorageError::OffsetOutOfRange { .. })),
            "{result:?}"
        );
        return;
    }
    let (got, next) = result.unwrap();
    let from = offset.max(model.log_start);
    let want = model.from(from);
    assert!(
        got.len() <= want.len(),
        "read from {offset} returned too much"
    );
    assert_eq!(&want[..got.len()], &got[..], "read from {offset}");
    assert_eq!(next, from + got.len() as u64);
    assert!(got.len() <= max_records);
    if max_records > 0 && !want.is_empty() {
        assert!(!got.is_empty(), "at least one record comes");
    }
    let frame = |r: &Fetched| FRAME_OVERHEAD + r.1.as_ref().map_or(0, Vec::len) + r.2.len();
    let bytes: usize = got.iter().map(frame).sum();
    assert!(
        got.len() <= 1 || bytes <= max_bytes,
        "{bytes} > {max_bytes}"
    );
    if let Some(following) = want.get(got.len()) {
        if got.len() < max_records && bytes + frame(following) <= max_bytes {
            let bases: Vec<u64> = segment_files(log.dir())
                .iter()
                .map(|p| base_of(p))
                .collect();
            assert!(
                bases.contains(&next),
                "read stopped short at {next}, not a segment base"
            );
        }
    }
}

/// Cuts the active segment of a crashed log as `cut` says, as a power loss could: never below
/// the frame of `recovery_point` (every record below it was synced, and recovery keeps what
/// is there, see `recovery`). Returns the offset the log must now end at: the records wholly
/// before the cut.
fn crash_and_cut(dir: &Path, cut: Cut, recovery_point: u64) -> u64 {
    let active = segment_files(dir).pop().unwrap();
    let bytes = fs::read(&active).unwrap();
    let ends = frame_ends(&bytes);
    let mut boundaries = vec![0];
    boundaries.extend(&ends);
    let position = match cut {
        Cut::FileStart => 0,
        Cut::FrameBoundary(n) => boundaries[n as usize % boundaries.len()],
        Cut::Byte(n) => u64::from(n) % (bytes.len() as u64 + 1),
    };
    let synced = recovery_point
        .checked_sub(base_of(&active))
        .map_or(0, |frames| boundaries[frames as usize]);
    let position = position.max(synced);
    fs::OpenOptions::new()
        .write(true)
        .open(&active)
        .unwrap()
        .set_len(position)
        .unwrap();
    let whole_frames = ends.iter().filter(|&&end| end <= position).count() as u64;
    base_of(&active) + whole_frames
}

fn run(params: Params, ops: &[Op]) {
    let dir = tempfile::tempdir().unwrap();
    let config = params.config();
    let retention = params.retention;
    let mut clock = NOW;
    let mut model = Model::default();
    let mut log = Some(PartitionLog::open(dir.path(), config, clock).unwrap().0);
    // The log end at the last open: the records below it are synced (see `crash_and_cut`).
    let mut opened_at_end = 0;
    for op in ops {
        let current = log.as_mut().unwrap();
        match op {
            Op::Append(batch) => {
                let records: Vec<AppendRecord<'_>> = batch
                    .iter()
                    .map(|(key, value)| AppendRecord {
                        key: key.as_deref(),
                        value,
                    })
                    .collect();
                let info = current.append(&records, clock).unwrap();
                assert_eq!(info.base_offset, model.log_end());
                model.append(batch, clock, retention);
                assert_eq!(info.timestamp_ms, model.last_timestamp, "timestamp");
            }
            Op::Read {
                offset,
                max_records,
                max_bytes,
            } => {
                let offset = u64::from(*offset) % (model.log_end() + 3);
                check_read(current, &model, offset, *max_records, *max_bytes);
            }
            Op::AdvanceClock(delta) => {
                clock = clock.saturating_add_signed(*delta);
                current.enforce_retention(clock).unwrap();
                model.enforce_retention(clock, retention);
            }
            Op::CleanRestart => {
                log.take().unwrap().close().unwrap();
                let (reopened, report) = PartitionLog::open(dir.path(), config, clock).unwrap();
                assert!(report.clean_shutdown, "{report:?}");
                assert_eq!(report.segments_scanned, 0);
                opened_at_end = reopened.log_end_offset();
                log = Some(reopened);
                model.enforce_retention(clock, retention);
            }
            Op::Crash => {
                drop(log.take());
                let (reopened, report) = PartitionLog::open(dir.path(), config, clock).unwrap();
                assert!(
                    report.truncations.is_empty(),
                    "a crash loses nothing: {report:?}"
                );
                assert!(report.gaps.is_empty());
                opened_at_end = reopened.log_end_offset();
                log = Some(reopened);
                model.enforce_retention(clock, retention);
            }
            Op::CrashAndCut(cut) => {
                drop(log.take());
                let active_base = base_of(segment_files(dir.path()).last().unwrap());
                let survivors_end = crash_and_cut(dir.path(), *cut, opened_at_end.max(active_base));
                let (reopened, report) = PartitionLog::open(dir.path(), config, clock).unwrap();
                assert!(survivors_end <= model.log_end());
                assert_eq!(reopened.log_end_offset(), survivors_end, "{report:?}");
                assert!(report.gaps.is_empty());
                assert!(report.corrupt_kept.is_empty(), "{report:?}");
                opened_at_end = reopened.log_end_offset();
                // The cut records were never synced: the model forgets them.
                model.records.truncate(survivors_end as usize);
                model.log_start = model.log_start.min(survivors_end);
                let any_record_left = segment_files(dir.path())
                    .iter()
                    .any(|p| fs::metadata(p).unwrap().len() > 0);
                model.last_timestamp = match model.records.last() {
                    Some(&(_, _, ts)) if any_record_left => ts,
                    _ => 0,
                };
                log = Some(reopened);
                model.enforce_retention(clock, retention);
            }
        }
        check_matches(log.as_mut().unwrap(), &model);
    }
}

fn op() -> impl Strategy<Value = Op> {
    let record = (
        prop::option::of(prop::collection::vec(any::<u8>(), 0..8)),
        prop::collection::vec(any::<u8>(), 0..300),
    );
    let cut = prop_oneof![
        Just(Cut::FileStart),
        any::<u16>().prop_map(Cut::FrameBoundary),
        any::<u16>().prop_map(Cut::Byte),
    ];
    prop_oneof![
        5 => prop::collection::vec(record, 1..5).prop_map(Op::Append),
        3 => (any::<u16>(), 0usize..8, 1usize..2000).prop_map(|(offset, max_records, max_bytes)| {
            Op::Read { offset, max_records, max_bytes }
        }),
        2 => (-2_000i64..10_000).prop_map(Op::AdvanceClock),
        1 => Just(Op::CleanRestart),
        1 => Just(Op::Crash),
        1 => cut.prop_map(Op::CrashAndCut),
    ]
}

fn params() -> impl Strategy<Value = Params> {
    (
        prop_oneof![Just(1024u64), Just(8192)],
        prop::option::of(1u64..30),
        prop::option::of(1_000u64..20_000),
        prop::option::of(200u64..3_000),
    )
        .prop_map(|(segment_bytes, records, ms, bytes)| Params {
            segment_bytes,
            retention: RetentionPolicy { records, bytes, ms },
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        // Shrunk failures are frozen as named tests below, not in a regressions file.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_log_behaves_like_its_model(params in params(), ops in prop::collection::vec(op(), 1..40)) {
        run(params, &ops);
    }
}

/// A record with a key of `key_len` bytes (if any) and a value of `value_len` bytes.
fn record(key_len: Option<usize>, value_len: usize) -> (Key, Vec<u8>) {
    (key_len.map(|n| vec![b'k'; n]), vec![b'v'; value_len])
}

// Caught: a crash that left the active segment empty made open forget the last timestamp, so
// time retention expired every record of the earlier segments.
#[test]
fn time_retention_after_a_crash_that_empties_the_active_segment_keeps_young_records() {
    let params = Params {
        segment_bytes: 1024,
        retention: RetentionPolicy {
            ms: Some(1000),
            ..RetentionPolicy::default()
        },
    };
    let ops = [
        Op::Append(vec![record(None, 157), record(None, 287)]),
        Op::Append(vec![record(Some(7), 252)]),
        Op::Append(vec![record(Some(2), 200)]),
        Op::CrashAndCut(Cut::FileStart),
    ];
    run(params, &ops);
}
