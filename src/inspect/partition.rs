//! A partition directory as `nanokafka verify` checks it: the segments its next open will
//! have, the log cleaner's files an interrupted pass left, and the order of the offsets of
//! every batch across the segments.
//!
//! # The segments the next open will have
//! The directory is read as recovery's first pass (`storage::cleaner::swap::finish_interrupted`)
//! will leave it, without changing it: a `<base>.log.swap` (a cleaned segment whose swap was
//! committed) stands in for the segments whose base offset lies in its extent, `[base, the
//! offset after its last batch)`; every `.cleaned` file, and a `.swap` index without its
//! log, will be deleted, and so will every `.deleted` file (a segment a committed swap
//! replaced, renamed before it is unlinked). Those files are listed as [`CleanerFile`]s, each
//! with what the next open does with it: they are the normal trace of a kill during a
//! cleaning pass, not damage.
//!
//! # Offsets
//! Offsets increase strictly from batch to batch and from segment to segment: a batch whose
//! offsets are below the end of the one before (a duplicate offset, a batch out of order) is
//! damage, and so is a batch below its segment's base offset or reaching the next segment's.
//! A batch that starts past the offset expected leaves a gap, which only the log cleaner
//! makes: it is accepted in the sealed segments (all but the last) of a log that was cleaned
//! (`cleaner.marker`, see `LogSegment::may_have_gaps`), and damage anywhere else (its base
//! offset, outside the CRC, was most likely changed). Segments follow each other without a
//! gap, cleaned or not (a cleaned segment keeps its sources' last batch). After a batch that
//! does not verify, whose header cannot be trusted, the next batch's start is not checked
//! against it (the damage is reported once, by the scan).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{BatchSummary, Damage};
use crate::storage::cleaner::swap::{
    swap_end, CLEANED_MARKER, CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX,
};
use crate::storage::error::StorageError;

/// A file of the log cleaner's that an interrupted pass left, and its fate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CleanerFile {
    pub file: PathBuf,
    /// What the broker's next open of the directory does with it, and why.
    pub fate: String,
}

/// A segment as the next open will have it: a `.log` file, or a `.log.swap` that the open
/// renames over the segments it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedSegment {
    pub base_offset: u64,
    pub log: PathBuf,
    /// Its offset index, when there is one (else the open rebuilds it).
    pub index: Option<PathBuf>,
}

/// The files of one partition directory, sorted out (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionFiles {
    pub dir: PathBuf,
    /// In base offset order.
    pub segments: Vec<PlannedSegment>,
    /// `cleaner.marker` is there: the log was cleaned, and its sealed segments may hold gaps.
    pub cleaned: bool,
    pub cleaner_files: Vec<CleanerFile>,
}

/// A segment's batches as [`super::scan_segment`] found them, for [`OffsetCheck::segment`].
#[derive(Debug, Clone, Copy)]
pub struct ScannedSegment<'a> {
    pub base_offset: u64,
    pub log: &'a Path,
    pub batches: &'a [BatchSummary],
    /// The base offset of the segment after it; `None` for the last (active) one.
    pub next_base: Option<u64>,
}

/// The offsets of one partition's segments, checked one segment at a time in base offset
/// order (so that no more than one segment's batches are held): the damage found, and the
/// gaps accepted as the cleaner's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetCheck {
    pub damage: Vec<Damage>,
    pub cleaner_gaps: usize,
    /// The log was cleaned (`cleaner.marker`).
    cleaned: bool,
    /// Where the segment before ended, when its last batch verified (an empty one ends at
    /// its base), and its file: the next one must start there.
    previous_end: Option<(u64, PathBuf)>,
}

/// The partition directories of the data directory at `data_dir` (every directory in it but
/// hidden ones such as `.deleted`), sorted by path.
///
/// # Errors
/// `Io` naming the directory that cannot be listed.
pub fn partition_dirs(data_dir: &Path) -> crate::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in list(data_dir)? {
        let hidden = entry
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if !hidden && entry.is_dir() {
            dirs.push(entry);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// The segments and cleaner files of the partition directory `dir` (see the module docs).
///
/// # Errors
/// `Io` naming the directory that cannot be listed or the swap file that cannot be read.
pub fn partition_files(dir: &Path) -> crate::Result<PartitionFiles> {
    let mut names: Vec<String> = list(dir)?
        .iter()
        .filter_map(|p| Some(p.file_name()?.to_str()?.to_owned()))
        .collect();
    names.sort();
    let mut files = PartitionFiles {
        dir: dir.to_owned(),
        cleaned: names.iter().any(|n| n == CLEANED_MARKER),
        ..PartitionFiles::default()
    };
    let mut segments: std::collections::BTreeMap<u64, PlannedSegment> = names
        .iter()
        .filter_map(|n| base_of(n, ".log"))
        .map(|base| {
            let segment = PlannedSegment {
                base_offset: base,
                log: dir.join(format!("{base:020}.log")),
                index: Some(dir.join(format!("{base:020}.index")))
                    .filter(|_| names.contains(&format!("{base:020}.index"))),
            };
            (base, segment)
        })
        .collect();
    let log_swap = format!(".log{SWAP_SUFFIX}");
    let index_swap = format!(".index{SWAP_SUFFIX}");
    let time_index_swap = format!(".timeindex{SWAP_SUFFIX}");
    let swaps: Vec<u64> = names.iter().filter_map(|n| base_of(n, &log_swap)).collect();
    let fate = |name: &str, fate: String| CleanerFile {
        file: dir.join(name),
        fate,
    };
    for name in &names {
        if name.ends_with(CLEANED_SUFFIX) {
            let why = "deleted by the next open: a cleaning pass's output whose swap had not \
                       begun (its source segments are all here)";
            files.cleaner_files.push(fate(name, why.to_owned()));
        }
        if name.ends_with(DELETED_SUFFIX) {
            let why = "deleted by the next open: a segment a committed swap replaced, renamed \
                       before its unlink";
            files.cleaner_files.push(fate(name, why.to_owned()));
        }
    }
    for &base in &swaps {
        let name = format!("{base:020}{log_swap}");
        let path = dir.join(&name);
        let end = swap_end(crate::storage::fs::os().as_ref(), &path, base)
            .map_err(crate::Error::from)?
            .max(base + 1);
        let replaced: Vec<u64> = segments.range(base..end).map(|(&b, _)| b).collect();
        for b in &replaced {
            segments.remove(b);
        }
        let index = format!("{base:020}{index_swap}");
        segments.insert(
            base,
            PlannedSegment {
                base_offset: base,
                log: path,
                index: Some(dir.join(&index)).filter(|_| names.contains(&index)),
            },
        );
        let replaced = match &replaced[..] {
            [] => "no segment left".to_owned(),
            bases => bases
                .iter()
                .map(|b| format!("{b:020}.log"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let why = format!(
            "renamed to {base:020}.log by the next open, which finishes its swap: a cleaned \
             segment of offsets {base} to {} in place of {replaced}",
            end - 1
        );
        files.cleaner_files.push(fate(&name, why));
    }
    for name in &names {
        let Some(base) = base_of(name, &index_swap).or_else(|| base_of(name, &time_index_swap))
        else {
            continue;
        };
        let why = if swaps.contains(&base) {
            format!("renamed by the next open with {base:020}{log_swap}, whose index it is")
        } else {
            "deleted by the next open: the index of a swap that had not committed".to_owned()
        };
        files.cleaner_files.push(fate(name, why));
    }
    files.segments = segments.into_values().collect();
    Ok(files)
}

impl OffsetCheck {
    /// A check of a partition whose log was `cleaned` (its `cleaner.marker` is there).
    pub fn new(cleaned: bool) -> Self {
        OffsetCheck {
            cleaned,
            ..OffsetCheck::default()
        }
    }

    /// Checks the next segment, as the module docs say.
    pub fn segment(&mut self, segment: ScannedSegment<'_>) {
        let gaps_allowed = self.cleaned && segment.next_base.is_some();
        let run_past = match self.previous_end.take() {
            Some((end, file)) if end < segment.base_offset => {
                self.damage.push(Damage {
                    file: segment.log.to_owned(),
                    position: 0,
                    length: 0,
                    offset: Some(end),
                    reason: format!(
                        "offsets {end} to {} are in no segment: {} ends at {end}, this one \
                         starts at {} (a segment file is missing, or was cut)",
                        segment.base_offset - 1,
                        file.display(),
                        segment.base_offset
                    ),
                });
                0
            }
            Some((end, _)) => end,
            None => 0,
        };
        // The end of the batches so far (before the first, the segment's base, or where the
        // segment before ran to past it), and whether the last batch verified, so that the
        // next one must start there.
        let (mut end, mut contiguous) = (segment.base_offset.max(run_past), true);
        for batch in segment.batches {
            if !batch.crc_valid {
                contiguous = false;
                continue;
            }
            let (first, next) = (batch.base_offset, batch.last_offset.saturating_add(1));
            let damaged = |reason: String| Damage {
                file: segment.log.to_owned(),
                position: batch.position,
                length: batch.size,
                offset: Some(first),
                reason,
            };
            if first < segment.base_offset {
                self.damage.push(damaged(format!(
                    "offset {first} is below the segment's base offset {}",
                    segment.base_offset
                )));
            } else if first < end {
                self.damage.push(damaged(overlap(batch, end)));
            } else if first > end && contiguous {
                if gaps_allowed {
                    self.cleaner_gaps += 1;
                } else {
                    let where_ = if self.cleaned {
                        "in the active segment, which the cleaner never rewrites"
                    } else {
                        "in a log the cleaner never cleaned (no cleaner.marker)"
                    };
                    self.damage.push(damaged(format!(
                        "offset {first} where {end} was expected: offsets {end} to {} are \
                         missing, {where_}",
                        first - 1
                    )));
                }
            }
            if let Some(next_base) = segment.next_base.filter(|&b| next > b) {
                self.damage.push(damaged(format!(
                    "offsets {first} to {} run past the next segment's base offset {next_base}",
                    next - 1
                )));
            }
            end = end.max(next);
            contiguous = true;
        }
        self.previous_end = contiguous.then(|| (end, segment.log.to_owned()));
    }
}

/// Why a batch starting below `end` (the end of the batches before it) is damage.
fn overlap(batch: &BatchSummary, end: u64) -> String {
    let (first, last) = (batch.base_offset, batch.last_offset);
    if last < end - 1 {
        format!(
            "out of order: offsets {first} to {last} after offset {} (offsets must increase)",
            end - 1
        )
    } else {
        format!(
            "duplicate offsets {first} to {}: already in the batches before it",
            last.min(end - 1)
        )
    }
}

/// The base offset of a file name `<base:020><suffix>` (exactly `suffix` after the digits).
fn base_of(name: &str, suffix: &str) -> Option<u64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// The entries of `dir`.
fn list(dir: &Path) -> crate::Result<Vec<PathBuf>> {
    let io = |e: std::io::Error| crate::Error::from(StorageError::io("list directory", dir, e));
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        entries.push(entry.map_err(io)?.path());
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base_offset: u64, last_offset: u64, position: u64) -> BatchSummary {
        BatchSummary {
            position,
            size: 100,
            base_offset,
            last_offset,
            count: (last_offset - base_offset + 1) as u32,
            base_timestamp: 0,
            max_timestamp: 0,
            codec: "none".into(),
            control: false,
            crc_valid: true,
            error: None,
        }
    }

    /// The damage and the cleaner's gaps found in `segments` (base offset, batches).
    fn check(segments: &[(u64, Vec<BatchSummary>)], cleaned: bool) -> (Vec<Damage>, usize) {
        let mut check = OffsetCheck::new(cleaned);
        for (i, (base, batches)) in segments.iter().enumerate() {
            check.segment(ScannedSegment {
                base_offset: *base,
                log: Path::new("s.log"),
                batches,
                next_base: segments.get(i + 1).map(|s| s.0),
            });
        }
        (check.damage, check.cleaner_gaps)
    }

    #[test]
    fn contiguous_segments_are_clean_cleaned_or_not() {
        let segments = [
            (0, vec![batch(0, 4, 0), batch(5, 5, 100)]),
            (6, vec![batch(6, 9, 0)]),
            (10, vec![]),
        ];
        assert_eq!(check(&segments, false), (vec![], 0));
        assert_eq!(check(&segments, true), (vec![], 0));
    }

    #[test]
    fn a_gap_is_accepted_only_in_a_sealed_segment_of_a_cleaned_log() {
        // The cleaner dropped offsets 0..3 and 5..7 of the first segment; it kept the last
        // batch, so the second segment follows it.
        let sealed_gaps = [
            (0, vec![batch(3, 4, 0), batch(8, 9, 100)]),
            (10, vec![batch(10, 10, 0)]),
        ];
        assert_eq!(check(&sealed_gaps, true), (vec![], 2));
        let (damage, _) = check(&sealed_gaps, false);
        assert_eq!(damage.len(), 2, "{damage:?}");
        assert_eq!(damage[0].offset, Some(3));
        assert!(damage[0].reason.contains("never cleaned"), "{damage:?}");
        let active_gap = [(0, vec![batch(0, 1, 0)]), (2, vec![batch(5, 5, 0)])];
        let (damage, _) = check(&active_gap, true);
        assert_eq!(damage.len(), 1, "{damage:?}");
        assert!(damage[0].reason.contains("active segment"), "{damage:?}");
    }

    #[test]
    fn duplicate_and_out_of_order_batches_are_damage_with_their_offsets() {
        let segments = [(
            0,
            vec![
                batch(0, 4, 0),
                batch(4, 6, 100),
                batch(7, 9, 200),
                batch(2, 3, 300),
            ],
        )];
        let (damage, _) = check(&segments, true);
        assert_eq!(damage.len(), 2, "{damage:?}");
        assert_eq!((damage[0].offset, damage[0].position), (Some(4), 100));
        assert!(damage[0].reason.starts_with("duplicate offsets 4 to 4"));
        assert_eq!((damage[1].offset, damage[1].position), (Some(2), 300));
        assert!(damage[1].reason.starts_with("out of order"), "{damage:?}");
    }

    #[test]
    fn segments_must_meet_without_overlap_or_gap() {
        let overlapping = [(0, vec![batch(0, 5, 0)]), (4, vec![batch(5, 6, 0)])];
        let (damage, _) = check(&overlapping, true);
        assert_eq!(damage.len(), 2, "{damage:?}");
        assert!(damage[0].reason.contains("run past the next segment"));
        assert_eq!(damage[1].offset, Some(5), "{damage:?}");
        assert!(damage[1].reason.starts_with("duplicate offsets 5 to 5"));
        let missing = [(0, vec![batch(0, 1, 0)]), (5, vec![batch(5, 5, 0)])];
        let (damage, _) = check(&missing, true);
        assert_eq!(damage.len(), 1, "{damage:?}");
        assert!(damage[0]
            .reason
            .contains("offsets 2 to 4 are in no segment"));
        let below_base = [(10, vec![batch(3, 4, 0)])];
        let (damage, _) = check(&below_base, false);
        assert!(
            damage[0].reason.contains("below the segment's base"),
            "{damage:?}"
        );
    }

    #[test]
    fn a_batch_after_one_that_does_not_verify_is_not_held_to_its_offsets() {
        let mut bad = batch(3, 4, 100);
        bad.crc_valid = false;
        let segments = [(0, vec![batch(0, 2, 0), bad, batch(7, 7, 200)])];
        assert_eq!(check(&segments, false), (vec![], 0));
    }

    #[test]
    fn swap_file_names_parse_only_with_twenty_digits() {
        assert_eq!(
            base_of("00000000000000000042.log.swap", ".log.swap"),
            Some(42)
        );
        assert_eq!(base_of("00000000000000000042.log.swap", ".log"), None);
        assert_eq!(base_of("42.log.swap", ".log.swap"), None);
    }
}
