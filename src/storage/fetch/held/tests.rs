//! The process-wide budget of held bytes: refused holds fall back to the file, and every
//! held byte is given back whoever drops it.

use std::path::Path;

use super::HeldBudget;
use crate::storage::{LogConfig, PartitionLog, RecordBatch};

/// A budget of `limit` bytes for one test alone (the process's is shared by every test).
fn budget(limit: usize) -> &'static HeldBudget {
    Box::leak(Box::new(HeldBudget::new(limit)))
}

/// A log in `dir` with `batches` batches of 1000 records of 100 B (the consume loop's), its
/// held bytes counted against `budget`.
fn log_of(dir: &Path, batches: u8, budget: &'static HeldBudget) -> PartitionLog {
    let (mut log, _) = PartitionLog::open(dir, LogConfig::default(), 0).unwrap();
    log.set_held_budget(budget);
    for b in 0..batches {
        let mut batch = RecordBatch::new();
        for i in 0..1000u16 {
            let mut value = vec![b; 100];
            value[..2].copy_from_slice(&i.to_be_bytes());
            batch.push_raw(Some(&i.to_be_bytes()), &value);
        }
        log.append_batch(&mut batch, 0).unwrap();
    }
    log
}

type Rec = (u64, Option<Vec<u8>>, Vec<u8>);

/// Reads the whole log `step` records at a time, from offset 0.
fn read_all(log: &mut PartitionLog, step: usize) -> Vec<Rec> {
    let (mut offset, mut seen) = (0, Vec::new());
    while offset < log.log_end_offset() {
        let fetched = log.read(offset, step, 1 << 20).unwrap();
        assert!(!fetched.is_empty());
        seen.extend(
            fetched
                .iter()
                .map(|r| (r.offset, r.key.map(<[u8]>::to_vec), r.value.to_vec())),
        );
        offset = fetched.next_offset();
    }
    seen
}

/// The bytes one hold of the consume loop (500 of a batch of 1000) takes: within the
/// per-partition cap, so the loop is served from held records.
fn one_hold() -> usize {
    let dir = tempfile::tempdir().unwrap();
    let budget = budget(usize::MAX);
    let mut log = log_of(dir.path(), 1, budget);
    assert_eq!(log.read(0, 500, 1 << 20).unwrap().len(), 500);
    let held = budget.used();
    assert!(held > 0 && held <= super::MAX_HELD_BYTES, "{held}");
    held
}

#[test]
fn the_consume_loop_holds_within_the_per_partition_cap() {
    one_hold();
}

/// With no room in the budget nothing is held, and sequential reads of every size still
/// return exactly what reads with holds return.
#[test]
fn a_hold_over_the_budget_falls_back_and_reads_return_the_same_records() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (roomy, empty) = (budget(usize::MAX), budget(0));
    let (mut held, mut refused) = (log_of(a.path(), 3, roomy), log_of(b.path(), 3, empty));
    let all = held.read(0, 10_000, 16 << 20).unwrap();
    let all: Vec<Rec> = all
        .iter()
        .map(|r| (r.offset, r.key.map(<[u8]>::to_vec), r.value.to_vec()))
        .collect();
    assert_eq!(all.len(), 3000);
    for step in [1, 99, 300, 500, 999, 1000, 1500] {
        assert_eq!(read_all(&mut held, step), all, "held, reads of {step}");
        assert_eq!(
            read_all(&mut refused, step),
            all,
            "refused, reads of {step}"
        );
        assert_eq!(empty.used(), 0);
    }
    // Room for one hold: the first partition to stop mid-batch takes it, the second reads
    // from the file, both the same records.
    let one = one_hold();
    let shared = budget(one + one / 2);
    held.set_held_budget(shared);
    refused.set_held_budget(shared);
    let first = held.read(0, 500, 1 << 20).unwrap();
    let taken = shared.used();
    assert!(taken > one / 2, "{taken} of {one}");
    let second = refused.read(0, 500, 1 << 20).unwrap();
    assert_eq!(shared.used(), taken, "the second hold is refused");
    let offsets =
        |f: &crate::storage::FetchedRecords| f.iter().map(|r| r.offset).collect::<Vec<_>>();
    assert_eq!(offsets(&first), offsets(&second));
    for log in [&mut held, &mut refused] {
        let rest = log.read(500, 500, 1 << 20).unwrap();
        assert_eq!(offsets(&rest), (500..1000).collect::<Vec<_>>());
    }
    assert_eq!(shared.used(), 0);
}

/// A hold's bytes go back to the budget when a read serves its last records, when a read
/// elsewhere replaces it, and when the log is closed or dropped; a hold served in part keeps
/// its one reservation.
#[test]
fn dropping_a_held_rest_gives_its_bytes_back() {
    let dir = tempfile::tempdir().unwrap();
    let budget = budget(usize::MAX);
    let mut log = log_of(dir.path(), 2, budget);
    log.read(0, 500, 1 << 20).unwrap();
    let one = budget.used();
    assert!(one > 0);
    // Served in part: still one hold.
    assert_eq!(log.read(500, 100, 1 << 20).unwrap().len(), 100);
    assert_eq!(budget.used(), one);
    // Its last records served: given back (the records returned are the caller's).
    let rest = log.read(600, 400, 1 << 20).unwrap();
    assert_eq!(rest.len(), 400);
    assert_eq!(budget.used(), 0);
    drop(rest);
    // A read elsewhere drops the hold.
    log.read(1000, 500, 1 << 20).unwrap();
    assert!(budget.used() > 0);
    log.read(0, 10, 1 << 20).unwrap();
    assert!(
        budget.used() > 0,
        "the read of 10 holds the rest of its batch"
    );
    log.read(1200, 10, 1 << 20).unwrap();
    log.read(1500, 10_000, 1 << 20).unwrap();
    assert_eq!(budget.used(), 0);
    // Closing, and dropping without closing, give it back. (A read's hold counts its
    // buffer's whole capacity, and a pooled buffer may be up to a quarter larger than a fresh
    // one: another read of the same records need not hold exactly `one`.)
    log.read(0, 500, 1 << 20).unwrap();
    assert!(budget.used() > 0);
    log.close().unwrap();
    assert_eq!(budget.used(), 0);
    let mut log = log_of(dir.path(), 0, budget);
    log.read(0, 500, 1 << 20).unwrap();
    assert!(budget.used() > 0);
    drop(log);
    assert_eq!(budget.used(), 0);
}

/// Many partitions opened, read mid-batch, closed, reopened and dropped, two threads at once:
/// the budget is never exceeded, every hold it takes is within it, and it ends at 0.
#[test]
fn the_budget_neither_overflows_nor_leaks_across_many_partitions() {
    let one = one_hold();
    let budget = budget(5 * one + one / 2);
    let root = tempfile::tempdir().unwrap();
    std::thread::scope(|s| {
        for t in 0..2 {
            let root = root.path();
            s.spawn(move || {
                let mut logs = Vec::new();
                for p in 0..20 {
                    let mut log = log_of(&root.join(format!("{t}-{p}")), 1, budget);
                    assert_eq!(log.read(0, 500, 1 << 20).unwrap().len(), 500);
                    assert!(budget.used() <= budget.limit());
                    logs.push(log);
                }
                // Close every other one, reopen it and read mid-batch again.
                for (p, log) in logs.iter_mut().enumerate().filter(|(p, _)| p % 2 == 0) {
                    let dir = root.join(format!("{t}-{p}"));
                    std::mem::replace(log, log_of(&dir, 0, budget))
                        .close()
                        .unwrap();
                    assert_eq!(log.read(0, 700, 1 << 20).unwrap().len(), 700);
                    assert!(budget.used() <= budget.limit());
                }
                for log in &mut logs {
                    assert_eq!(log.read(700, 300, 1 << 20).unwrap().iter().count(), 300);
                }
                drop(logs);
            });
        }
    });
    assert_eq!(budget.used(), 0);
}
