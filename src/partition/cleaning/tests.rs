//! When a compacted partition's pass is due, as its actor asks every `cleaner_backoff`:
//! Kafka's `min.cleanable.dirty.ratio` and `max.compaction.lag.ms`, decided on a partition
//! with a cleaned head and a dirty tail, and the passes a due check leads to, run here as the
//! cleaner thread runs them.

use std::path::Path;

use super::*;
use crate::storage::cleaner::{Cleaner, CleanerStats};
use crate::storage::format::{encode_client_batch, ClientRecord};
use crate::storage::{FsyncPolicy, LogConfig, RecordBatch};

const NOW: u64 = 1_700_000_000_000;
const DAY: u64 = 24 * 60 * 60 * 1000;

fn ratio_plan(min_dirty_ratio: f64, max_lag_ms: Option<u64>) -> CleaningPlan {
    CleaningPlan {
        cleaner: CleanerPolicy {
            delete_retention_ms: 0,
            min_compaction_lag_ms: 0,
            key_map_bytes: 1 << 20,
        },
        min_dirty_ratio,
        max_lag_ms,
    }
}

/// Appends batches `batches` of ten records each, keys `k<batch>-<i>` (all distinct) with
/// 100-byte values, stamped `now_ms`.
fn produce(p: &mut Partition, batches: std::ops::Range<u32>, now_ms: u64) {
    for b in batches {
        let mut batch = RecordBatch::new();
        for i in 0..10 {
            batch.push_raw(Some(format!("k{b}-{i}").as_bytes()), &[7; 100]);
        }
        p.append(&mut batch, now_ms).unwrap();
    }
}

#[test]
fn a_pass_is_due_at_the_dirty_ratio_or_once_a_dirty_record_is_past_the_maximum_lag() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 4096,
        ..LogConfig::default()
    };
    let fs = crate::storage::fs::os();
    let path: &Path = &dir.path().join("t_0");
    let mut p = Partition::open(&fs, path, ("t", 0), config, None, NOW)
        .unwrap()
        .0;
    // 400 distinct keys: a pass keeps every record, and they are all clean after it.
    produce(&mut p, 0..40, NOW);
    let all = ratio_plan(1.0, None);
    let snapshot = p.cleaning_due(&all, NOW).unwrap();
    let snapshot = snapshot.expect("a log never cleaned is all dirty: due at any ratio");
    let prepared = Cleaner::new(all.cleaner).prepare(&snapshot, NOW).unwrap();
    p.swap_in(prepared, NOW).unwrap();
    assert!(p
        .cleaning_due(&ratio_plan(0.0, None), NOW)
        .unwrap()
        .is_none());

    // A dirty tail of about a tenth of the cleanable bytes, its newest record at `later`.
    let later = NOW + 10_000;
    produce(&mut p, 40..46, later);
    let due = |ratio, lag, now| {
        p.cleaning_due(&ratio_plan(ratio, lag), now)
            .unwrap()
            .is_some()
    };
    assert!(!due(0.5, None, later), "below the ratio");
    assert!(due(0.05, None, later), "above the ratio");
    assert!(
        !due(0.5, Some(1000), later + 999),
        "below the ratio, within the lag"
    );
    assert!(
        due(0.5, Some(1000), later + 1000),
        "below the ratio, past the lag"
    );
}

/// Small segments (a dozen of these one-record batches each), synced appends.
fn open(dir: &Path) -> Partition {
    let config = LogConfig {
        segment_bytes: 1024,
        fsync: FsyncPolicy::Always,
        ..LogConfig::default()
    };
    let fs = crate::storage::fs::os();
    Partition::open(&fs, dir, ("t", 0), config, None, NOW)
        .unwrap()
        .0
}

/// A plan whose key map holds `keys` keys and whose passes are due from `min_dirty_ratio`.
fn plan(keys: usize, min_dirty_ratio: f64) -> CleaningPlan {
    let slot = 24;
    CleaningPlan {
        cleaner: CleanerPolicy {
            delete_retention_ms: DAY,
            min_compaction_lag_ms: 0,
            key_map_bytes: keys * slot * 10 / 9 + slot,
        },
        min_dirty_ratio,
        max_lag_ms: None,
    }
}

/// One batch of one record (`None`: a tombstone).
fn put(p: &mut Partition, key: &str, value: Option<&[u8]>) {
    match value {
        Some(value) => {
            let mut batch = RecordBatch::new();
            batch.push_raw(Some(key.as_bytes()), value);
            p.append(&mut batch, NOW).unwrap();
        }
        None => {
            let record = ClientRecord {
                timestamp_ms: NOW as i64,
                key: Some(key.as_bytes()),
                value: None,
                headers: &[],
            };
            p.append_kafka_batch(&mut encode_client_batch(&[record]), NOW)
                .unwrap();
        }
    }
}

/// Runs every pass due as of `now_ms`, as the actor's checks would one after another.
fn run_due(p: &mut Partition, plan: &CleaningPlan, now_ms: u64) -> Vec<CleanerStats> {
    let mut passes = Vec::new();
    while let Some(snapshot) = p.cleaning_due(plan, now_ms).unwrap() {
        let prepared = Cleaner::new(plan.cleaner)
            .prepare(&snapshot, now_ms)
            .unwrap();
        passes.push(p.swap_in(prepared, now_ms).unwrap());
        assert!(passes.len() < 100, "passes never stop being due");
    }
    passes
}

/// The keys of every record from offset 0, in offset order.
fn keys(p: &mut Partition) -> Vec<String> {
    let mut keys = Vec::new();
    let mut from = 0;
    while from < p.log_end_offset() {
        let fetched = p.fetch("reader", Some(from), 100).unwrap();
        let Some(last) = fetched.records.iter().last() else {
            break;
        };
        from = last.offset + 1;
        keys.extend(
            fetched
                .records
                .iter()
                .map(|r| String::from_utf8(r.key.unwrap().to_vec()).unwrap()),
        );
    }
    keys
}

/// Thirty rounds of keys `k0..k3`, then `k4..k11` once, then five more rounds of `k0..k3`:
/// a key map of four keys fills only near the end of the dirty section.
fn write_late_new_keys(p: &mut Partition) {
    for round in 0..30u8 {
        for key in 0..4 {
            put(p, &format!("k{key}"), Some(&[round; 20]));
        }
    }
    for key in 4..12 {
        put(p, &format!("k{key}"), Some(b"only"));
    }
    for round in 30..35u8 {
        for key in 0..4 {
            put(p, &format!("k{key}"), Some(&[round; 20]));
        }
    }
}

/// A pass that stops short (its key map filled) leaves little of the section dirty, less than
/// the ratio asks for: the rest is due all the same, and cleaned to its end.
#[test]
fn a_pass_that_stopped_short_is_followed_until_the_dirty_section_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = open(dir.path());
    write_late_new_keys(&mut p);
    let plan = plan(4, 0.9);
    let passes = run_due(&mut p, &plan, NOW);
    assert!(passes.len() > 2, "{passes:?}");
    assert!(!passes[0].done && passes.last().unwrap().done, "{passes:?}");
    assert!(
        !p.log.has_dirty_sealed_segment(),
        "cleaned to the active segment"
    );
    let read = keys(&mut p);
    let active_base = *p.log.segment_bases().last().unwrap();
    let cleaned = &read[..read.len() - (p.log_end_offset() - active_base) as usize];
    let mut distinct = cleaned.to_vec();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        cleaned.len(),
        "one record per key: {cleaned:?}"
    );
}

/// The clean point survives a reopen: a log cleaned to its active segment is not cleaned
/// again, and the next pass's dirty section starts where the last one ended.
#[test]
fn a_reopened_partition_that_was_clean_is_not_cleaned_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = open(dir.path());
    write_late_new_keys(&mut p);
    let eager = plan(1000, 0.0001);
    let passes = run_due(&mut p, &eager, NOW);
    assert_eq!(passes.len(), 1);
    let clean_point = passes[0].cleaned_up_to;
    p.close().unwrap();
    let mut p = open(dir.path());
    assert!(
        p.cleaning_due(&eager, NOW).unwrap().is_none(),
        "nothing dirty after a reopen"
    );
    let segments = p.log.segment_count();
    let mut round = 0u8;
    while p.log.segment_count() < segments + 2 {
        put(&mut p, "k0", Some(&[round; 20]));
        round = round.wrapping_add(1);
    }
    let snapshot = p
        .cleaning_due(&eager, NOW)
        .unwrap()
        .expect("the new segments");
    assert_eq!(snapshot.first_dirty_offset, clean_point);
    let prepared = Cleaner::new(eager.cleaner).prepare(&snapshot, NOW).unwrap();
    assert!(
        prepared.stats().dirty_ratio_before < 1.0,
        "the cleaned segments count clean: {:?}",
        prepared.stats()
    );
}

/// A tombstone goes once its delete horizon has passed though nothing was written since:
/// the earliest horizon of the cleaned section makes a pass due (also after a reopen).
#[test]
fn a_tombstone_on_a_quiet_log_goes_once_its_delete_horizon_passed() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = open(dir.path());
    put(&mut p, "gone", Some(b"v1"));
    put(&mut p, "gone", None);
    write_late_new_keys(&mut p);
    let plan = plan(1000, 0.5);
    let first = run_due(&mut p, &plan, NOW);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].tombstones_removed, 0);
    assert!(
        keys(&mut p).contains(&"gone".to_owned()),
        "within delete.retention.ms"
    );
    assert!(
        run_due(&mut p, &plan, NOW + DAY - 1).is_empty(),
        "nothing due yet"
    );
    p.close().unwrap();
    let mut p = open(dir.path());
    let at_horizon = run_due(&mut p, &plan, NOW + DAY);
    assert_eq!(at_horizon.len(), 1, "{at_horizon:?}");
    assert_eq!(at_horizon[0].tombstones_removed, 1);
    assert!(!keys(&mut p).contains(&"gone".to_owned()));
    assert!(
        run_due(&mut p, &plan, NOW + 2 * DAY).is_empty(),
        "no tombstone left"
    );
}
