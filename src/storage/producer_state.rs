//! Idempotent producers' state in one partition: the last batches each producer id wrote, so
//! that a retried batch is recognised as a duplicate, also after a restart.
//!
//! A Kafka producer with `enable.idempotence` numbers its records per partition (the batch's
//! `base_sequence`, then one per record) under a producer id and epoch. When an acknowledgement
//! is lost it sends the batch again; the broker must answer with the offsets it stored the
//! first time instead of storing it twice. Kafka keeps the last [`BATCHES_PER_PRODUCER`]
//! batches per producer for this (a producer has at most five requests in flight); so does
//! this module.
//!
//! # Rules (Kafka's, for one partition)
//! * A batch whose first and last sequence equal one of the producer's stored batches is a
//!   duplicate: it is not written, and the stored batch's offsets are the answer.
//! * An epoch below the stored one is fenced: a newer instance of the producer took over.
//! * A new epoch must start again at sequence 0.
//! * Otherwise the first sequence must follow the last stored one (`i32::MAX` wraps to 0). A
//!   producer id never seen here may start anywhere: its earlier batches may have been
//!   removed by retention.
//!
//! # Snapshot file: `<offset:020>.producers`
//! The state as of `offset` (every batch below it applied), written when a segment is rolled
//! (as of the new segment's base) and at a clean shutdown (as of the log end). On open the
//! newest valid snapshot at or below the log end is loaded and the batches from its offset
//! on are applied again; a damaged one is skipped for an older one (or a scan from the log
//! start). A snapshot is synced (with its directory) before the older ones are removed:
//! retention may have deleted the segments between an older snapshot and the log start, and
//! a producer whose last batches were there would then be remembered at an older sequence
//! (its next batch refused as out of order) or forgotten (a retry stored twice). The name differs from
//! Kafka's `.snapshot` on purpose: the bytes are this module's own, not Kafka's schema.
//!
//! ```text
//! offset  size  field (little-endian)
//!      0     4  magic "NKPS"
//!      4     2  version, 1
//!      6     8  offset: the state covers every batch below it
//!     14     4  producers
//!     18     -  per producer: producer_id i64, epoch i16, last_timestamp_ms u64, batches u8,
//!               then per batch: first_seq i32, last_seq i32, base_offset u64, last_offset u64,
//!               max_timestamp i64 (version 2 only)
//!      -     4  CRC32C of every byte before it
//! ```
//!
//! Version 2 added each batch's `max_timestamp`, what a retry under LogAppendTime is answered
//! with. A version 1 snapshot is still read, its batches' timestamps unknown (-1).
//!
//! # Memory
//! One entry per producer id that wrote here, at most five batches each. Producers silent
//! for [`PRODUCER_EXPIRATION_MS`] (Kafka's `producer.id.expiration.ms` default, one day) are
//! dropped when a snapshot is taken.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use super::error::{Result, StorageError};
use super::format::BatchHeader;
use super::fs::{FileSystem, OpenMode};

/// Batches remembered per producer id (Kafka's `max.in.flight.requests.per.connection` cap
/// for idempotence).
pub const BATCHES_PER_PRODUCER: usize = 5;
/// A producer id silent this long is forgotten (Kafka's `producer.id.expiration.ms`).
pub const PRODUCER_EXPIRATION_MS: u64 = 24 * 60 * 60 * 1000;
/// The suffix of snapshot files.
pub const SNAPSHOT_SUFFIX: &str = ".producers";
const MAGIC: &[u8; 4] = b"NKPS";
const VERSION: u16 = 2;
/// The version before batches carried their largest timestamp; still read.
const VERSION_WITHOUT_TIMESTAMPS: u16 = 1;

/// One stored batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSequence {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: u64,
    pub last_offset: u64,
    /// The stored batch's largest timestamp: the append time under LogAppendTime, which a
    /// retry of the batch is answered with; -1 when unknown (read from a version 1 snapshot).
    pub max_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Producer {
    epoch: i16,
    last_timestamp_ms: u64,
    batches: VecDeque<BatchSequence>,
}

/// An idempotent producer as Kafka's DescribeProducers shows it: its id, epoch, last
/// sequence and when it last wrote here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence of its last batch here.
    pub last_sequence: i32,
    /// Its last batch's largest timestamp (ms since the epoch), as Kafka reports it; -1
    /// when unknown (a state restored from a snapshot written before timestamps were kept).
    pub last_timestamp_ms: i64,
}

/// What [`ProducerState::check`] says of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Not from an idempotent producer, or the next batch in its sequence: append it.
    Append,
    /// Already stored: answer with these offsets and write nothing.
    Duplicate(BatchSequence),
}

/// The producers of one partition; see the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerState {
    producers: BTreeMap<i64, Producer>,
}

/// The last sequence of a batch: `base_sequence + last_offset_delta`, wrapping at `i32::MAX`
/// to 0 as Kafka's sequences do.
fn last_sequence(header: &BatchHeader) -> i32 {
    let last = i64::from(header.base_sequence) + i64::from(header.last_offset_delta);
    (last % (i64::from(i32::MAX) + 1)) as i32
}

fn next_sequence(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

impl ProducerState {
    /// Whether `header`'s batch may be appended, is a duplicate, or breaks its producer's
    /// sequence.
    ///
    /// # Errors
    /// `ProducerFenced` for an old epoch; `OutOfOrderSequence` for a new epoch not starting
    /// at 0, or a sequence gap.
    pub fn check(&self, header: &BatchHeader) -> Result<SequenceCheck> {
        if header.producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        let fenced = |reason: String| StorageError::ProducerFenced {
            producer_id: header.producer_id,
            epoch: header.producer_epoch,
            reason,
        };
        let out_of_order = |reason: String| StorageError::OutOfOrderSequence {
            producer_id: header.producer_id,
            epoch: header.producer_epoch,
            reason,
        };
        let Some(producer) = self.producers.get(&header.producer_id) else {
            return Ok(SequenceCheck::Append);
        };
        if header.producer_epoch < producer.epoch {
            return Err(fenced(format!(
                "epoch is older than the current {}",
                producer.epoch
            )));
        }
        if header.producer_epoch > producer.epoch {
            if header.base_sequence != 0 {
                return Err(out_of_order(format!(
                    "a new epoch must start at sequence 0, not {}",
                    header.base_sequence
                )));
            }
            return Ok(SequenceCheck::Append);
        }
        let last = last_sequence(header);
        if let Some(stored) = producer
            .batches
            .iter()
            .find(|b| b.first_seq == header.base_sequence && b.last_seq == last)
        {
            return Ok(SequenceCheck::Duplicate(*stored));
        }
        let expected = producer.batches.back().map(|b| next_sequence(b.last_seq));
        match expected {
            Some(expected) if header.base_sequence != expected => Err(out_of_order(format!(
                "out of order sequence {}: {expected} expected",
                header.base_sequence
            ))),
            _ => Ok(SequenceCheck::Append),
        }
    }

    /// Records a batch written at its base offset (a stored header, or one just appended).
    pub fn apply(&mut self, header: &BatchHeader, timestamp_ms: u64) {
        if header.producer_id < 0 {
            return;
        }
        let producer = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| Producer {
                epoch: header.producer_epoch,
                last_timestamp_ms: timestamp_ms,
                batches: VecDeque::new(),
            });
        if header.producer_epoch != producer.epoch {
            producer.epoch = header.producer_epoch;
            producer.batches.clear();
        }
        producer.last_timestamp_ms = producer.last_timestamp_ms.max(timestamp_ms);
        if producer.batches.len() == BATCHES_PER_PRODUCER {
            producer.batches.pop_front();
        }
        producer.batches.push_back(BatchSequence {
            first_seq: header.base_sequence,
            last_seq: last_sequence(header),
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
        });
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.producers.len()
    }

    /// The producers remembered here, by id.
    pub fn active(&self) -> Vec<ActiveProducer> {
        self.producers
            .iter()
            .filter_map(|(&producer_id, p)| {
                let last = p.batches.back()?;
                Some(ActiveProducer {
                    producer_id,
                    epoch: p.epoch,
                    last_sequence: last.last_seq,
                    last_timestamp_ms: last.max_timestamp,
                })
            })
            .collect()
    }

    /// The base offset of each producer's last batch: the batches the log cleaner keeps,
    /// empty if need be, so that a state rebuilt from the log still knows each producer's
    /// last sequence.
    pub fn last_batch_bases(&self) -> impl Iterator<Item = u64> + '_ {
        self.producers
            .values()
            .filter_map(|p| p.batches.back().map(|b| b.base_offset))
    }

    /// Forgets producers silent for [`PRODUCER_EXPIRATION_MS`] before the latest append of
    /// any producer here (the partition's own notion of now, so no clock is needed; an idle
    /// partition keeps its few producers).
    pub fn expire(&mut self) {
        let latest = self.producers.values().map(|p| p.last_timestamp_ms).max();
        let cutoff = latest.unwrap_or(0).saturating_sub(PRODUCER_EXPIRATION_MS);
        self.producers.retain(|_, p| p.last_timestamp_ms >= cutoff);
    }

    /// The snapshot's bytes (format in the module docs).
    fn encode(&self, offset: u64) -> Vec<u8> {
        let mut buf = Vec::with_capacity(22 + self.producers.len() * 64);
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&VERSION.to_le_bytes());
        buf.extend_from_slice(&offset.to_le_bytes());
        buf.extend_from_slice(&(self.producers.len() as u32).to_le_bytes());
        for (id, p) in &self.producers {
            buf.extend_from_slice(&id.to_le_bytes());
            buf.extend_from_slice(&p.epoch.to_le_bytes());
            buf.extend_from_slice(&p.last_timestamp_ms.to_le_bytes());
            buf.push(p.batches.len() as u8);
            for b in &p.batches {
                buf.extend_from_slice(&b.first_seq.to_le_bytes());
                buf.extend_from_slice(&b.last_seq.to_le_bytes());
                buf.extend_from_slice(&b.base_offset.to_le_bytes());
                buf.extend_from_slice(&b.last_offset.to_le_bytes());
                buf.extend_from_slice(&b.max_timestamp.to_le_bytes());
            }
        }
        let crc = crc32c::crc32c(&buf);
        buf.extend_from_slice(&crc.to_le_bytes());
        buf
    }

    /// Parses a snapshot: `(offset, state)`, or why it is not one.
    fn decode(bytes: &[u8]) -> std::result::Result<(u64, ProducerState), String> {
        let body_len = bytes.len().checked_sub(4).ok_or("shorter than its CRC")?;
        let (body, crc) = bytes.split_at(body_len);
        if crc32c::crc32c(body).to_le_bytes() != crc {
            return Err("crc32c mismatch".into());
        }
        let mut r = Reader { buf: body, at: 0 };
        if r.take(4)? != MAGIC {
            return Err("not a producer snapshot".into());
        }
        let version = u16::from_le_bytes(r.array()?);
        if version != VERSION && version != VERSION_WITHOUT_TIMESTAMPS {
            return Err(format!("producer snapshot version {version} is not 1 or 2"));
        }
        let offset = u64::from_le_bytes(r.array()?);
        let count = u32::from_le_bytes(r.array()?);
        let mut state = ProducerState::default();
        for _ in 0..count {
            let id = i64::from_le_bytes(r.array()?);
            let epoch = i16::from_le_bytes(r.array()?);
            let last_timestamp_ms = u64::from_le_bytes(r.array()?);
            let n = r.take(1)?[0] as usize;
            if n > BATCHES_PER_PRODUCER {
                return Err(format!("{n} batches for producer {id}"));
            }
            let mut batches = VecDeque::with_capacity(n);
            for _ in 0..n {
                batches.push_back(BatchSequence {
                    first_seq: i32::from_le_bytes(r.array()?),
                    last_seq: i32::from_le_bytes(r.array()?),
                    base_offset: u64::from_le_bytes(r.array()?),
                    last_offset: u64::from_le_bytes(r.array()?),
                    max_timestamp: match version {
                        VERSION_WITHOUT_TIMESTAMPS => -1,
                        _ => i64::from_le_bytes(r.array()?),
                    },
                });
            }
            state.producers.insert(
                id,
                Producer {
                    epoch,
                    last_timestamp_ms,
                    batches,
                },
            );
        }
        if r.at != body.len() {
            return Err("bytes after the last producer".into());
        }
        Ok((offset, state))
    }
}

/// The snapshot file of the state as of `offset`.
pub fn snapshot_path(dir: &Path, offset: u64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

/// Writes `state` as of `offset` to its snapshot file, not yet synced: the caller makes it
/// durable with [`sync_snapshot`] and only then removes the older ones
/// ([`remove_older_snapshots`]), so that a power loss leaves either the new snapshot whole or
/// the older ones.
///
/// # Errors
/// `Io`.
pub fn write_snapshot(
    fs: &dyn FileSystem,
    dir: &Path,
    offset: u64,
    state: &ProducerState,
) -> Result<()> {
    let path = snapshot_path(dir, offset);
    let file = fs
        .open(&path, OpenMode::Truncate)
        .map_err(|e| StorageError::io("create producer snapshot", &path, e))?;
    file.write_all_at(&state.encode(offset), 0)
        .map_err(|e| StorageError::io("write producer snapshot", &path, e))
}

/// Syncs the snapshot file as of `offset` (its directory entry is the caller's to sync).
///
/// # Errors
/// `Io`.
pub fn sync_snapshot(fs: &dyn FileSystem, dir: &Path, offset: u64) -> Result<()> {
    let path = snapshot_path(dir, offset);
    fs.open(&path, OpenMode::Existing)
        .and_then(|file| file.sync_all())
        .map_err(|e| StorageError::io("sync producer snapshot", &path, e))
}

/// Removes the snapshots older than the one as of `offset`, but the one before it (a damaged
/// newest one then falls back a single segment).
///
/// # Errors
/// `Io`.
pub fn remove_older_snapshots(fs: &dyn FileSystem, dir: &Path, offset: u64) -> Result<()> {
    let mut older: Vec<u64> = list_snapshots(fs, dir)?
        .into_iter()
        .filter(|&o| o < offset)
        .collect();
    older.pop();
    for o in older {
        let old = snapshot_path(dir, o);
        fs.remove_file(&old)
            .map_err(|e| StorageError::io("delete producer snapshot", &old, e))?;
    }
    Ok(())
}

/// The offsets of the snapshot files in `dir`, ascending.
fn list_snapshots(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<u64>> {
    let names = fs
        .list(dir)
        .map_err(|e| StorageError::io("list partition directory", dir, e))?;
    Ok(snapshot_offsets(&names))
}

/// The offsets of the snapshot files among `names`, ascending.
fn snapshot_offsets(names: &[String]) -> Vec<u64> {
    let mut offsets: Vec<u64> = names
        .iter()
        .filter_map(|name| name.strip_suffix(SNAPSHOT_SUFFIX)?.parse().ok())
        .collect();
    offsets.sort_unstable();
    offsets
}

/// The newest valid snapshot at or below `log_end`: `(offset, state)`; `(0, empty)` when
/// none is. Damaged snapshots are logged and skipped; those beyond `log_end` are deleted.
///
/// # Errors
/// `Io` when the directory cannot be listed.
#[cfg(test)]
pub fn load_snapshot(
    fs: &dyn FileSystem,
    dir: &Path,
    log_end: u64,
) -> Result<(u64, ProducerState)> {
    let names = fs
        .list(dir)
        .map_err(|e| StorageError::io("list partition directory", dir, e))?;
    load_snapshot_among(fs, dir, &names, log_end).map(|(offset, state, _)| (offset, state))
}

/// As [`load_snapshot`], among `names` (the entries of `dir`, listed by the caller), also
/// telling whether it deleted snapshots (the directory changed).
///
/// # Errors
/// `Io` when a snapshot beyond `log_end` cannot be deleted.
pub fn load_snapshot_among(
    fs: &dyn FileSystem,
    dir: &Path,
    names: &[String],
    log_end: u64,
) -> Result<(u64, ProducerState, bool)> {
    let mut removed = false;
    for offset in snapshot_offsets(names).into_iter().rev() {
        let path = snapshot_path(dir, offset);
        if offset > log_end {
            // The log lost the batches it describes (a cut tail). Removed now, before any
            // append takes those offsets again: it would describe batches that are not there.
            tracing::warn!(path = %path.display(), log_end, "producer snapshot beyond the log end; removed");
            fs.remove_file(&path)
                .map_err(|e| StorageError::io("delete producer snapshot", &path, e))?;
            removed = true;
            continue;
        }
        let parsed = match fs.read(&path) {
            Ok(bytes) => ProducerState::decode(&bytes),
            Err(e) => Err(e.to_string()),
        };
        match parsed {
            Ok((o, state)) if o == offset => return Ok((offset, state, removed)),
            Ok((o, _)) => {
                tracing::warn!(path = %path.display(), holds = o, "producer snapshot names another offset; ignored")
            }
            Err(reason) => {
                tracing::warn!(path = %path.display(), %reason, "producer snapshot unreadable; ignored")
            }
        }
    }
    Ok((0, ProducerState::default(), removed))
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let bytes = self
            .buf
            .get(self.at..self.at + n)
            .ok_or("snapshot ends early")?;
        self.at += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> std::result::Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
        records: u32,
        base_offset: u64,
    ) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_len: 100,
            leader_epoch: 0,
            crc: 0,
            attributes: 0,
            last_offset_delta: records - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id,
            producer_epoch: epoch,
            base_sequence,
            records_count: records,
        }
    }

    #[test]
    fn a_retried_batch_among_the_last_five_is_a_duplicate_with_its_first_offsets() {
        let mut state = ProducerState::default();
        for i in 0..7u32 {
            let h = header(9, 0, (i * 2) as i32, 2, u64::from(i) * 2);
            assert_eq!(state.check(&h).unwrap(), SequenceCheck::Append);
            state.apply(&h, 0);
        }
        // Batches 2..7 are remembered; batch 6 (sequences 12-13) was stored at offset 12.
        let retry = header(9, 0, 12, 2, 999);
        assert!(matches!(
            state.check(&retry).unwrap(),
            SequenceCheck::Duplicate(BatchSequence {
                base_offset: 12,
                last_offset: 13,
                ..
            })
        ));
        // Batch 0 fell out of the window: its retry is now out of order, not a duplicate.
        assert!(state.check(&header(9, 0, 0, 2, 999)).is_err());
        assert_eq!(
            state.check(&header(9, 0, 14, 1, 14)).unwrap(),
            SequenceCheck::Append
        );
    }

    #[test]
    fn gaps_old_epochs_and_new_epochs_not_at_zero_are_refused() {
        let mut state = ProducerState::default();
        state.apply(&header(1, 3, 0, 5, 0), 0);
        assert!(matches!(
            state.check(&header(1, 2, 5, 1, 5)),
            Err(StorageError::ProducerFenced { producer_id: 1, .. })
        ));
        for bad in [header(1, 3, 6, 1, 5), header(1, 4, 1, 1, 5)] {
            assert!(
                matches!(
                    state.check(&bad),
                    Err(StorageError::OutOfOrderSequence { producer_id: 1, .. })
                ),
                "{bad:?}"
            );
        }
        assert_eq!(
            state.check(&header(1, 4, 0, 1, 5)).unwrap(),
            SequenceCheck::Append
        );
        assert_eq!(
            state.check(&header(2, 0, 77, 1, 5)).unwrap(),
            SequenceCheck::Append
        );
        assert_eq!(
            state.check(&header(-1, -1, -1, 1, 5)).unwrap(),
            SequenceCheck::Append
        );
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        let mut state = ProducerState::default();
        state.apply(&header(1, 0, i32::MAX - 1, 3, 0), 0);
        assert_eq!(
            state.check(&header(1, 0, 1, 1, 3)).unwrap(),
            SequenceCheck::Append
        );
    }

    #[test]
    fn snapshots_round_trip_and_damage_falls_back_to_an_older_one() {
        let dir = tempfile::tempdir().unwrap();
        let fs = super::super::fs::OsFs;
        let mut state = ProducerState::default();
        state.apply(&header(5, 1, 0, 3, 0), 10);
        write_snapshot(&fs, dir.path(), 3, &state).unwrap();
        let older = state.clone();
        state.apply(&header(5, 1, 3, 2, 3), 20);
        write_snapshot(&fs, dir.path(), 5, &state).unwrap();
        assert_eq!(
            load_snapshot(&fs, dir.path(), 5).unwrap(),
            (5, state.clone())
        );
        let newest = snapshot_path(dir.path(), 5);
        let kept = std::fs::read(&newest).unwrap();
        // Beyond the log end (a lost tail): the older one, and the newer is deleted.
        assert_eq!(
            load_snapshot(&fs, dir.path(), 4).unwrap(),
            (3, older.clone())
        );
        assert!(!newest.exists());
        let mut bytes = kept;
        bytes[20] ^= 1;
        std::fs::write(&newest, bytes).unwrap();
        assert_eq!(load_snapshot(&fs, dir.path(), 5).unwrap(), (3, older));
        // Only the newest two are kept.
        write_snapshot(&fs, dir.path(), 9, &state).unwrap();
        remove_older_snapshots(&fs, dir.path(), 9).unwrap();
        assert!(!snapshot_path(dir.path(), 3).exists());
        assert!(snapshot_path(dir.path(), 5).exists());
    }

    #[test]
    fn a_version_1_snapshot_is_read_with_its_batches_timestamps_unknown() {
        let mut v1 = Vec::new();
        v1.extend_from_slice(MAGIC);
        v1.extend_from_slice(&1u16.to_le_bytes());
        v1.extend_from_slice(&3u64.to_le_bytes()); // offset
        v1.extend_from_slice(&1u32.to_le_bytes()); // producers
        v1.extend_from_slice(&5i64.to_le_bytes()); // producer id
        v1.extend_from_slice(&1i16.to_le_bytes()); // epoch
        v1.extend_from_slice(&10u64.to_le_bytes()); // last timestamp
        v1.push(1); // batches
        for field in [0i32, 2] {
            v1.extend_from_slice(&field.to_le_bytes()); // first and last sequence
        }
        for field in [0u64, 2] {
            v1.extend_from_slice(&field.to_le_bytes()); // base and last offset
        }
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_le_bytes());
        let (offset, state) = ProducerState::decode(&v1).unwrap();
        assert_eq!(offset, 3);
        let retry = header(5, 1, 0, 3, 99);
        let stored = BatchSequence {
            first_seq: 0,
            last_seq: 2,
            base_offset: 0,
            last_offset: 2,
            max_timestamp: -1,
        };
        assert_eq!(
            state.check(&retry).unwrap(),
            SequenceCheck::Duplicate(stored)
        );
    }

    #[test]
    fn silent_producers_expire() {
        let mut state = ProducerState::default();
        state.apply(&header(1, 0, 0, 1, 0), 1_000);
        state.apply(&header(2, 0, 0, 1, 1), PRODUCER_EXPIRATION_MS + 1_001);
        state.apply(&header(3, 0, 0, 1, 2), PRODUCER_EXPIRATION_MS + 999);
        state.expire();
        assert_eq!(
            state.len(),
            2,
            "producer 1 was silent a day before producer 2's append"
        );
    }
}
