//! A model-based property test of the log cleaner: random appends of keyed records and
//! tombstones, cleanings at random times, clean restarts and power losses, checked after
//! every step against the model (every record written, and when each tombstone was first
//! cleaned). For each key, a read from offset 0 returns a suffix of the records written to
//! it, in offset order, with the latest; a latest tombstone stays until a cleaning ran at
//! least `delete_retention_ms` after the first cleaning that covered it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use nanokafka::internals::storage::format::{self, encode_client_batch, ClientRecord, Decoded};
use nanokafka::internals::storage::fs::SharedFs;
use nanokafka::internals::storage::sim::SimFs;
use nanokafka::internals::storage::{Cleaner, CleanerPolicy, LogConfig, PartitionLog};
use nanokafka::FsyncPolicy;
use proptest::prelude::*;

const NOW: u64 = 1_700_000_000_000;
const DIR: &str = "/data/compacted_0";
const RETENTION_MS: u64 = 1_000_000;

/// `(offset, key, value)`; a `None` value is a tombstone.
type Stored = (u64, Vec<u8>, Option<Vec<u8>>);

#[derive(Debug, Clone)]
enum Op {
    /// One batch of `(key, value)`: keys `k0..k5`, `None` a tombstone.
    Append(Vec<(u8, Option<u8>)>),
    /// Moves the clock forward by this much, then cleans until a pass is done.
    Clean(u64),
    CleanRestart,
    PowerLoss,
}

fn op() -> impl Strategy<Value = Op> {
    let record = (0u8..6, prop::option::weighted(0.8, any::<u8>()));
    prop_oneof![
        6 => prop::collection::vec(record, 1..4).prop_map(Op::Append),
        2 => (0..2 * RETENTION_MS).prop_map(Op::Clean),
        1 => Just(Op::CleanRestart),
        1 => Just(Op::PowerLoss),
    ]
}

struct Model {
    written: Vec<Stored>,
    /// When the cleaning that first covered each tombstone (by offset) ran.
    first_cleaned: BTreeMap<u64, u64>,
    /// The times of every cleaning.
    cleanings: Vec<u64>,
    now: u64,
}

fn open(fs: &SharedFs, segment_bytes: u64, now: u64) -> PartitionLog {
    let config = LogConfig {
        segment_bytes,
        fsync: FsyncPolicy::Always,
        ..LogConfig::default()
    };
    PartitionLog::open_with(fs, Path::new(DIR), config, now)
        .unwrap()
        .0
}

/// Every record from offset 0, decoded from the batches a Kafka fetch returns.
fn read_all(log: &mut PartitionLog) -> Vec<Stored> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < log.log_end_offset() {
        let read = log.read_batches(offset, 1 << 20, true).unwrap();
        assert!(read.next_offset > offset);
        let mut at = 0;
        while at < read.bytes.len() {
            let Decoded::Batch(header) = format::decode(&read.bytes[at..]) else {
                panic!("a batch read does not verify");
            };
            let batch = &read.bytes[at..at + header.batch_len];
            let mut scratch = Vec::new();
            let section = format::records_section(batch, &header, 1 << 30, &mut scratch).unwrap();
            format::validate_records(section, &header, |r| {
                let o = header.base_offset + u64::from(r.offset_delta);
                if o >= offset {
                    out.push((o, r.key.unwrap().to_vec(), r.value.map(<[u8]>::to_vec)));
                }
            })
            .unwrap();
            at += header.batch_len;
        }
        offset = read.next_offset;
    }
    out
}

fn check(log: &mut PartitionLog, model: &Model) {
    let read = read_all(log);
    assert!(read.windows(2).all(|w| w[0].0 < w[1].0), "offsets in order");
    let by_key = |records: &[Stored]| {
        let mut keys: BTreeMap<Vec<u8>, Vec<Stored>> = BTreeMap::new();
        for r in records {
            keys.entry(r.1.clone()).or_default().push(r.clone());
        }
        keys
    };
    let (got, written) = (by_key(&read), by_key(&model.written));
    for (key, all) in &written {
        let got = got.get(key).map_or(&[][..], Vec::as_slice);
        assert!(
            all.ends_with(got),
            "{key:?}: {got:?} is not a suffix of {all:?}"
        );
        let latest = all.last().unwrap();
        let may_be_gone = latest.2.is_none()
            && model
                .first_cleaned
                .get(&latest.0)
                .is_some_and(|&first| model.cleanings.iter().any(|&t| t >= first + RETENTION_MS));
        assert!(
            got.last() == Some(latest) || (got.is_empty() && may_be_gone),
            "{key:?}: latest {latest:?} missing from {got:?}"
        );
    }
    assert_eq!(
        log.log_end_offset(),
        model.written.last().map_or(0, |r| r.0 + 1),
        "the log end does not move"
    );
}

fn run(ops: &[Op], segment_bytes: u64, key_map_bytes: usize) {
    let sim = SimFs::new(7);
    let fs: SharedFs = Arc::new(sim.clone());
    let mut model = Model {
        written: Vec::new(),
        first_cleaned: BTreeMap::new(),
        cleanings: Vec::new(),
        now: NOW,
    };
    let mut log = Some(open(&fs, segment_bytes, NOW));
    let policy = CleanerPolicy {
        delete_retention_ms: RETENTION_MS,
        min_compaction_lag_ms: 0,
        key_map_bytes,
    };
    for op in ops {
        let current = log.as_mut().unwrap();
        match op {
            Op::Append(records) => {
                let names: Vec<[u8; 2]> = records.iter().map(|&(k, _)| [b'k', b'0' + k]).collect();
                let values: Vec<Option<[u8; 1]>> =
                    records.iter().map(|&(_, v)| v.map(|v| [v])).collect();
                let client: Vec<ClientRecord<'_>> = names
                    .iter()
                    .zip(&values)
                    .map(|(name, value)| ClientRecord {
                        timestamp_ms: model.now as i64,
                        key: Some(name),
                        value: value.as_ref().map(|v| &v[..]),
                        headers: &[],
                    })
                    .collect();
                let mut batch = encode_client_batch(&client);
                let base = current
                    .append_kafka_batch(&mut batch, model.now)
                    .unwrap()
                    .base_offset;
                for (i, (name, value)) in names.iter().zip(&values).enumerate() {
                    model
                        .written
                        .push((base + i as u64, name.to_vec(), value.map(|v| v.to_vec())));
                }
            }
            Op::Clean(advance) => {
                model.now += advance;
                let active_base = *current.segment_bases().last().unwrap();
                let mut passes = 0;
                while let Some(snapshot) = current
                    .cleaning_snapshot(current.log_end_offset(), &policy, model.now)
                    .unwrap()
                {
                    let prepared = Cleaner::new(policy).prepare(&snapshot, model.now).unwrap();
                    let stats = current.swap_in(prepared).unwrap();
                    passes += 1;
                    if stats.done {
                        break;
                    }
                    assert!(passes < 500, "cleaning does not end");
                }
                if passes > 0 {
                    for r in model
                        .written
                        .iter()
                        .filter(|r| r.0 < active_base && r.2.is_none())
                    {
                        model.first_cleaned.entry(r.0).or_insert(model.now);
                    }
                    model.cleanings.push(model.now);
                }
            }
            Op::CleanRestart => {
                log.take().unwrap().close().unwrap();
                log = Some(open(&fs, segment_bytes, model.now));
            }
            Op::PowerLoss => {
                drop(log.take());
                sim.crash();
                log = Some(open(&fs, segment_bytes, model.now));
            }
        }
        check(log.as_mut().unwrap(), &model);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_cleaned_log_reads_a_suffix_of_every_key_with_its_latest_record(
        ops in prop::collection::vec(op(), 1..60),
        segment_bytes in 200u64..1500,
    ) {
        run(&ops, segment_bytes, 4096);
    }

    /// A key map of 4 keys (5 slots of 24 bytes, 90 % full at most) for 6 keys: cleanings take
    /// several passes.
    #[test]
    fn a_small_key_map_keeps_the_same_promises(
        ops in prop::collection::vec(op(), 1..60),
        segment_bytes in 200u64..1500,
    ) {
        run(&ops, segment_bytes, 120);
    }
}
