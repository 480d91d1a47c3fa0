//! A partition directory made from the input: `00000000000000000000.log` (raw bytes, or
//! batches of arbitrary records then damaged), and optionally an `.index`, a `checkpoint` and
//! a `log_start_offset`, each garbage or well-formed but lying. `PartitionLog::open` must not
//! panic; every record it then serves must be a record of a valid batch of the file at that
//! offset; it must accept an append (see `nanokafka_fuzz::check_partition`).
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use nanokafka::internals::storage::checkpoint::Checkpoint;
use nanokafka::internals::storage::LogConfig;
use nanokafka_fuzz::{check_partition, RawPartition, ReadPlan, Record, StateFile, Written, NOW};

/// Key, value and headers of a record.
type Fields = (Option<Vec<u8>>, Vec<u8>, Vec<(Vec<u8>, Option<Vec<u8>>)>);

#[derive(Arbitrary, Debug)]
enum Log {
    Raw(Vec<u8>),
    /// Valid batches, one per append (so the fuzzer need not find CRCs), then damaged.
    Batches {
        batches: Vec<Vec<Fields>>,
        damage: Vec<Damage>,
    },
}

#[derive(Arbitrary, Debug)]
enum Damage {
    Flip { at: u16, mask: u8 },
    Insert { at: u16, bytes: Vec<u8> },
    Delete { at: u16, len: u8 },
    Truncate { at: u16 },
}

#[derive(Arbitrary, Debug)]
enum State<T> {
    Absent,
    Raw(Vec<u8>),
    Valid(T),
}

#[derive(Arbitrary, Debug)]
struct CheckpointInput {
    clean: bool,
    recovery_point: u64,
    /// When set, `active_size` is the real file size, so a clean checkpoint is believed.
    size_matches: bool,
    active_size: u64,
}

#[derive(Arbitrary, Debug)]
struct Input {
    log: Log,
    index: Option<Vec<u8>>,
    checkpoint: State<CheckpointInput>,
    log_start: State<u64>,
    max_records: u8,
    max_bytes: u16,
}

fn damaged(batches: Vec<Vec<Fields>>, damage: &[Damage]) -> Vec<u8> {
    let batches: Vec<Vec<Record>> = batches
        .into_iter()
        .map(|records| {
            let record = |(key, value, headers)| Record {
                timestamp_ms: NOW,
                key,
                value,
                headers,
            };
            records.into_iter().map(record).collect()
        })
        .collect();
    let mut log = nanokafka_fuzz::native_segment(&batches);
    for d in damage {
        let at = |n: u16| usize::from(n) % (log.len() + 1);
        match d {
            Damage::Flip { at: n, mask } if !log.is_empty() => {
                let i = usize::from(*n) % log.len();
                log[i] ^= mask;
            }
            Damage::Flip { .. } => {}
            Damage::Insert { at: n, bytes } => {
                let i = at(*n);
                log.splice(i..i, bytes.iter().copied());
            }
            Damage::Delete { at: n, len } => {
                let i = at(*n);
                let j = (i + usize::from(*len)).min(log.len());
                log.drain(i..j);
            }
            Damage::Truncate { at: n } => log.truncate(at(*n)),
        }
    }
    log
}

fuzz_target!(|input: Input| {
    let log = match input.log {
        Log::Raw(bytes) => bytes,
        Log::Batches { batches, damage } => damaged(batches, &damage),
    };
    let checkpoint = match input.checkpoint {
        State::Absent => StateFile::Absent,
        State::Raw(bytes) => StateFile::Raw(bytes),
        State::Valid(c) => StateFile::Valid(Checkpoint {
            clean: c.clean,
            recovery_point: c.recovery_point,
            log_end_offset: 0,
            active_size: if c.size_matches {
                log.len() as u64
            } else {
                c.active_size
            },
        }),
    };
    let log_start = match input.log_start {
        State::Absent => StateFile::Absent,
        State::Raw(bytes) => StateFile::Raw(bytes),
        State::Valid(start) => StateFile::Valid(start),
    };
    let partition = RawPartition {
        log,
        index: input.index,
        checkpoint,
        log_start,
    };
    let dir = nanokafka_fuzz::scratch_dir();
    partition.write_to(dir.path());
    let plan = ReadPlan {
        // A read of 0 records returns nothing by contract.
        max_records: usize::from(input.max_records).max(1),
        max_bytes: usize::from(input.max_bytes),
    };
    // An `Err` from open is allowed (never a panic); the check returns it.
    let _ = check_partition(
        dir.path(),
        LogConfig::default(),
        Written::RawSegment(&partition.log),
        plan,
    );
});
