//! Reading the next records before they are asked for: [`PartitionLog::read_ahead`].
//!
//! A consumer that polls, handles the records and polls again leaves the partition's thread
//! idle while it handles them, and then waits for the read of its records (the batch's CRC,
//! the parse of each record) on its next poll. Read ahead, that work is done in the idle
//! time, and the next poll finds its answer ready; also when the answer is the rest of a batch
//! the last read stopped in, which is parsed by the read that serves it (see `fetch::Held`).
//!
//! The answer is kept only where it is exactly what the read would return:
//! - the read asks for the same offset, `max_records` and `max_bytes`;
//! - the log start has not passed the offset (retention would make the read start later);
//! - the read ahead did not stop at the log end, or the log has not grown since (a read now
//!   would return the new records too). Below the log end the log never changes.
//!
//! Any other read drops it, and a partition whose reads ahead go unused (groups reading it
//! at different places, a consumer that seeks) reads ahead less and less often: after each
//! unused one it skips twice as many chances as before (up to [`MAX_SKIPS`]); a used one
//! resets that. It is kept under the same limits as the rest of a batch a read
//! stopped in: at most `MAX_HELD_BYTES` per partition, within the process-wide
//! `fetch::HeldBudget`, so many partitions read ahead at once cost at most that budget. A
//! read ahead that does not fit is not kept.

use super::{PartitionLog, ReadHint};
use crate::storage::fetch::{FetchedRecords, Reservation, MAX_HELD_BYTES};

/// The most chances to read ahead a partition passes over after reads ahead went unused.
const MAX_SKIPS: u32 = 64;

/// A partition's read ahead, and how often it pays.
#[derive(Debug, Default)]
pub(super) struct ReadAheads {
    kept: Option<ReadAhead>,
    /// Chances to read ahead still to pass over.
    skips: u32,
    /// The chances passed over after an unused read ahead: 1 after the first, doubled by each
    /// further one, reset by a used one.
    backoff: u32,
}

impl ReadAheads {
    /// Drops what is kept (the log changed in a way no rule here sees).
    pub(super) fn clear(&mut self) {
        self.kept = None;
    }

    /// Whether to read ahead at this chance (passing over it counts it).
    fn wanted(&mut self) -> bool {
        if self.skips > 0 {
            self.skips -= 1;
            return false;
        }
        self.kept.is_none()
    }

    /// A read ahead was used (`true`) or dropped unused.
    fn used(&mut self, used: bool) {
        if used {
            self.backoff = 0;
        } else {
            self.backoff = (self.backoff * 2).clamp(1, MAX_SKIPS);
            self.skips = self.backoff;
        }
    }
}

/// A read done before it was asked for, with the read it answers.
#[derive(Debug)]
pub(super) struct ReadAhead {
    offset: u64,
    max_records: usize,
    max_bytes: usize,
    /// The log end when it was read.
    log_end: u64,
    records: FetchedRecords,
    _reserved: Reservation,
}

impl ReadAhead {
    /// The records, when they answer a read of `offset` with these limits now (see the
    /// module docs).
    fn answer(
        self,
        offset: u64,
        (max_records, max_bytes): (usize, usize),
        (log_start, log_end): (u64, u64),
    ) -> Option<FetchedRecords> {
        let same_read =
            (offset, max_records, max_bytes) == (self.offset, self.max_records, self.max_bytes);
        let stopped_before_the_end = self.records.next_offset() < self.log_end;
        (same_read && offset >= log_start && (stopped_before_the_end || log_end == self.log_end))
            .then_some(self.records)
    }
}

impl PartitionLog {
    /// Reads the records the next sequential read will ask for (from where the last read
    /// stopped, with these limits) and keeps them for it, when that read would otherwise go
    /// to the file or parse records: not when the last read left the rest of a compressed
    /// batch parsed (that read is cheap already), nor at the log end. A failed read ahead is
    /// forgotten: the read itself meets the failure and reports it.
    pub fn read_ahead(&mut self, max_records: usize, max_bytes: usize) {
        let Some(offset) = self.read_ahead_from() else {
            return;
        };
        if !self.ahead.wanted() {
            return;
        }
        let log_end = self.log_end_offset();
        let before = self.read_hint.as_ref().map(ReadHint::without_held);
        let Ok(records) = self.read(offset, max_records, max_bytes) else {
            return;
        };
        let footprint = records.footprint();
        let reserved = (footprint <= MAX_HELD_BYTES)
            .then(|| self.held_budget.try_reserve(footprint))
            .flatten();
        match reserved {
            Some(reserved) => {
                self.ahead.kept = Some(ReadAhead {
                    offset,
                    max_records,
                    max_bytes,
                    log_end,
                    records,
                    _reserved: reserved,
                });
            }
            // Not kept: the next read resumes where the last one stopped, as if none was made.
            None => self.read_hint = before,
        }
    }

    /// Where [`PartitionLog::read_ahead`] would read from now: where the last read stopped,
    /// when that read left nothing of its batch parsed and the log goes on past it (the held
    /// rest of an uncompressed batch is parsed when served: see `fetch::Held`). `None`
    /// (nothing to read ahead) lets the owner skip scheduling one, as after every read at the
    /// log end.
    pub fn read_ahead_from(&self) -> Option<u64> {
        let hint = self.read_hint.as_ref()?;
        let readable = self.log_start_offset..self.log_end_offset();
        let parsed = hint.held.as_ref().is_some_and(|h| !h.parses_when_served());
        (!parsed && readable.contains(&hint.offset)).then_some(hint.offset)
    }

    /// The records read ahead for this read, if they answer it; drops them otherwise (the
    /// read hint then still says where the file read ahead stopped, which a read elsewhere
    /// does not use).
    pub(super) fn take_read_ahead(
        &mut self,
        offset: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Option<FetchedRecords> {
        let bounds = (self.log_start_offset, self.log_end_offset());
        let answer = self
            .ahead
            .kept
            .take()?
            .answer(offset, (max_records, max_bytes), bounds);
        self.ahead.used(answer.is_some());
        answer
    }
}

impl ReadHint {
    /// The same hint, for a read that holds nothing of its batch.
    fn without_held(&self) -> ReadHint {
        ReadHint {
            offset: self.offset,
            base_offset: self.base_offset,
            position: self.position,
            resume: self.resume,
            batch_len: self.batch_len,
            held: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fetch::HeldBudget;
    use crate::storage::{LogConfig, RecordBatch, RetentionPolicy};

    const MAX_BYTES: usize = 1 << 20;

    /// A log of `batches` batches holding `per_batch` records each; record `n` is `[n as u8]`.
    fn log_of(
        dir: &std::path::Path,
        config: LogConfig,
        batches: u64,
        per_batch: u64,
    ) -> PartitionLog {
        let (mut log, _) = PartitionLog::open(dir, config, 0).unwrap();
        append(&mut log, batches, per_batch);
        log
    }

    fn append(log: &mut PartitionLog, batches: u64, per_batch: u64) {
        for _ in 0..batches {
            let first = log.log_end_offset();
            let mut batch = RecordBatch::new();
            for n in first..first + per_batch {
                batch.push_raw(None, &[n as u8]);
            }
            log.append_batch(&mut batch, 0).unwrap();
            log.retain(0);
        }
    }

    fn offsets(records: &FetchedRecords) -> Vec<u64> {
        records.iter().map(|r| r.offset).collect()
    }

    /// Reads everything `step` records at a time from the log start, reading ahead after
    /// each read when `ahead`; returns each read's offsets and how many were answered ahead.
    fn read_all(log: &mut PartitionLog, step: usize, ahead: bool) -> (Vec<Vec<u64>>, usize) {
        let (mut reads, mut answered) = (Vec::new(), 0);
        let mut offset = log.log_start_offset();
        while offset < log.log_end_offset() {
            answered += usize::from(log.ahead.kept.is_some());
            let records = log.read(offset, step, MAX_BYTES).unwrap();
            reads.push(offsets(&records));
            offset = records.next_offset();
            if ahead {
                log.read_ahead(step, MAX_BYTES);
            }
        }
        (reads, answered)
    }

    #[test]
    fn reads_answered_ahead_are_exactly_the_reads_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = log_of(dir.path(), LogConfig::default(), 12, 10);
        for step in [1, 3, 10, 15, 25, 40] {
            let (plain, _) = read_all(&mut log, step, false);
            let (ahead, answered) = read_all(&mut log, step, true);
            assert_eq!(ahead, plain, "reads of {step}");
            assert!(answered > 0, "reads of {step}: none was read ahead");
        }
    }

    /// A consumer taking half a batch per read: the read ahead after the first half parses
    /// the second (held in the buffer the first read filled), the one after the second reads
    /// the next batch, so every read but the first is answered ahead.
    #[test]
    fn the_rest_of_a_batch_a_read_stopped_in_is_read_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = log_of(dir.path(), LogConfig::default(), 6, 10);
        let (reads, answered) = read_all(&mut log, 5, true);
        assert_eq!(reads.concat(), (0..60).collect::<Vec<_>>());
        assert_eq!(reads.len(), 12);
        assert_eq!(answered, 11, "reads answered ahead");
    }

    #[test]
    fn a_read_ahead_that_stopped_at_the_log_end_is_not_the_answer_once_the_log_grew() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = log_of(dir.path(), LogConfig::default(), 3, 1);
        assert_eq!(offsets(&log.read(0, 1, MAX_BYTES).unwrap()), [0]);
        log.read_ahead(100, MAX_BYTES); // reads [1, 2], up to the log end
        assert!(log.ahead.kept.is_some());
        append(&mut log, 2, 1);
        assert_eq!(offsets(&log.read(1, 100, MAX_BYTES).unwrap()), [1, 2, 3, 4]);
    }

    #[test]
    fn a_read_ahead_is_not_the_answer_to_another_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = log_of(dir.path(), LogConfig::default(), 10, 1);
        log.read(0, 2, MAX_BYTES).unwrap();
        log.read_ahead(2, MAX_BYTES); // reads [2, 3]
        assert_eq!(offsets(&log.read(2, 3, MAX_BYTES).unwrap()), [2, 3, 4]);
        log.read_ahead(3, MAX_BYTES); // reads [5, 6, 7]
        assert_eq!(offsets(&log.read(1, 3, MAX_BYTES).unwrap()), [1, 2, 3]);
        assert_eq!(offsets(&log.read(4, 3, MAX_BYTES).unwrap()), [4, 5, 6]);
    }

    #[test]
    fn after_retention_passed_a_read_ahead_the_read_starts_at_the_log_start() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            retention: RetentionPolicy {
                records: Some(6),
                ..RetentionPolicy::default()
            },
            ..LogConfig::default()
        };
        let mut log = log_of(dir.path(), config, 6, 1);
        log.read(0, 2, MAX_BYTES).unwrap();
        log.read_ahead(2, MAX_BYTES); // reads [2, 3]
        assert!(log.ahead.kept.is_some());
        append(&mut log, 4, 1); // the log start moves to 4
        assert_eq!(log.log_start_offset(), 4);
        assert_eq!(offsets(&log.read(2, 2, MAX_BYTES).unwrap()), [4, 5]);
    }

    #[test]
    fn a_partition_whose_reads_ahead_go_unused_reads_ahead_less_and_less_often() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = log_of(dir.path(), LogConfig::default(), 400, 1);
        // Two readers at different places: each read ahead is for the other one's next read.
        let (mut a, mut b, mut made) = (0, 200, 0);
        for _ in 0..100 {
            for at in [&mut a, &mut b] {
                *at = log.read(*at, 1, MAX_BYTES).unwrap().next_offset();
                log.read_ahead(1, MAX_BYTES);
                made += usize::from(log.ahead.kept.is_some());
            }
        }
        assert!(
            made <= 12,
            "{made} reads ahead for 200 reads that used none"
        );
        // One reader again: the reads ahead come back once one is used.
        let (reads, answered) = read_all(&mut log, 1, true);
        assert_eq!(reads.concat(), (0..400).collect::<Vec<_>>());
        assert!(answered > 300, "{answered} of 400 reads answered ahead");
    }

    #[test]
    fn a_read_ahead_over_the_budget_is_not_kept_and_the_next_read_finds_its_place() {
        static NOTHING: HeldBudget = HeldBudget::new(0);
        let dir = tempfile::tempdir().unwrap();
        let mut log = log_of(dir.path(), LogConfig::default(), 10, 1);
        log.set_held_budget(&NOTHING);
        log.read(0, 2, MAX_BYTES).unwrap();
        log.read_ahead(2, MAX_BYTES);
        assert!(log.ahead.kept.is_none());
        assert_eq!(NOTHING.used(), 0);
        assert_eq!(offsets(&log.read(2, 2, MAX_BYTES).unwrap()), [2, 3]);
        let (reads, answered) = read_all(&mut log, 3, true);
        assert_eq!(answered, 0);
        assert_eq!(reads.concat(), (0..10).collect::<Vec<_>>());
    }
}
