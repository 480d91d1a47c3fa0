//! When a pass is due: Kafka's `min.cleanable.dirty.ratio` and `max.compaction.lag.ms`,
//! decided on a partition with a cleaned head and a dirty tail.

use std::path::Path;

use super::*;
use crate::storage::cleaner::Cleaner;
use crate::storage::log::LogConfig;
use crate::storage::RecordBatch;

const NOW: u64 = 1_700_000_000_000;

fn plan(min_dirty_ratio: f64, max_lag_ms: Option<u64>) -> CleaningPlan {
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
    let all = plan(1.0, None);
    let snapshot = p.cleaning_due(&all, NOW).unwrap();
    let snapshot = snapshot.expect("a log never cleaned is all dirty: due at any ratio");
    let prepared = Cleaner::new(all.cleaner).prepare(&snapshot, NOW).unwrap();
    p.swap_in(prepared, NOW).unwrap();
    assert!(p.cleaning_due(&plan(0.0, None), NOW).unwrap().is_none());

    // A dirty tail of about a tenth of the cleanable bytes, its newest record at `later`.
    let later = NOW + 10_000;
    produce(&mut p, 40..46, later);
    let due = |ratio, lag, now| p.cleaning_due(&plan(ratio, lag), now).unwrap().is_some();
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
