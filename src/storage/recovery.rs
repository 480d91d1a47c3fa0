//! Loading a partition directory: what is trusted, what is checked, what is cut.
//!
//! Recovery runs as separate passes, each a function:
//!
//! 0. [`finish_interrupted`] deletes the log cleaner's `.cleaned` files and finishes the
//!    swaps a crash interrupted (`.swap` files), by the rules of `cleaner/swap.rs`, before
//!    anything reads a segment.
//! 1. [`remove_leftovers`] deletes temp files of interrupted atomic writes and index files
//!    (`.index`, `.timeindex`) whose segment is gone.
//! 2. [`list_segments`] finds the segments by name (`<base_offset:020>.log`).
//! 3. [`plan`] reads the checkpoint and decides which segments to trust: after a clean
//!    shutdown, all of them; otherwise those wholly below the recovery point.
//! 4. [`load_segments`] checks every segment (opened once by [`load`], whose size the plan
//!    compares). A trusted one gets the cheap tail check (its last
//!    index entry and the frames after it, its time index's last entry). An untrusted one, a
//!    trusted one whose tail check fails, or one missing an index file, is validated record
//!    by record ([`validate_segment`]): its indexes are rebuilt, and a sealed one's time
//!    index ends with its largest timestamp, as after a roll.
//!
//!    **Recovery never cuts below the recovery point.** Every record below it was synced
//!    (the checkpoint proves it), so a bad frame there is media corruption, not a torn write:
//!    it is kept on disk, logged with file, position and cause, and reported in
//!    `RecoveryReport::corrupt_kept`; reads of it fail with `StorageError::Corrupt`. The scan then
//!    resynchronises (`LogSegment::resync`: the bad frame's length field, else a search for
//!    the next frame with a valid CRC and a higher offset, below what no offset of the
//!    segment reaches: the next segment's base, or the log end a clean shutdown recorded,
//!    and no further on than the bytes stepped over can hold records for, since the base
//!    offset lies outside the CRC) and goes on; the frame it resumes
//!    at is indexed, so the records after the damage stay readable. In a trusted sealed
//!    segment every frame is below the recovery point; in the segment holding the recovery
//!    point, those before it. Only the unsynced tail, the frames from the recovery point on,
//!    is cut at its first torn or invalid frame (a torn write can only be there); every cut
//!    is logged with file, position, bytes cut and cause. Without a checkpoint nothing is
//!    known synced, and the first bad frame of each segment is cut.
//!
//!    When no valid frame follows kept damage, its bytes stay and the segment's next offset
//!    is what is known: the next segment's base for a sealed segment; for the last one the
//!    recovery point (offsets up to it were acknowledged, and must not be handed out again),
//!    but no more than the damaged bytes can hold (a checkpoint is not trusted to invent
//!    millions of records). Appends then go after the damaged bytes, and the first of them
//!    gets an index entry.
//! 5. [`find_gaps`] reports offsets missing between segments (a segment deleted by hand).
//!    Reads skip a gap to the next offset that exists, as Kafka's fetch does.
//!
//! Nothing here panics: every failure is a `StorageError` naming the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checkpoint::Checkpoint;
use super::cleaner::swap::{finish_interrupted, CLEANED_MARKER};
use super::error::{Result, StorageError};
use super::fs::{FileSystem, SharedFs};
use super::fsutil::TMP_SUFFIX;
use super::segment::{file_names, time_index_name, LogSegment, StepOver};

/// The fewest bytes a record takes in an uncompressed batch (layout in `format`): its length,
/// attributes, timestamp delta, offset delta, key length, value length and header count, one
/// byte each. What bounds the records damaged bytes can have held.
const MIN_RECORD_LEN: u64 = 7;

/// Offsets are Kafka's signed 64-bit ones: no segment this code writes starts above this,
/// and a base this low leaves room for every `u32` relative offset without overflow.
pub const MAX_BASE_OFFSET: u64 = i64::MAX as u64;

/// One cut made by recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    pub path: PathBuf,
    /// Byte position the file was cut to.
    pub position: u64,
    pub bytes_cut: u64,
    pub reason: String,
}

/// A damaged range recovery kept (below the recovery point: never cut).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptDamage {
    pub path: PathBuf,
    /// Where the first bad frame starts.
    pub position: u64,
    /// Damaged bytes: up to the frame recovery resumed at, or to the end of the file.
    pub len: u64,
    /// The first damaged offset (reads of it fail with `StorageError::Corrupt`).
    pub first_offset: u64,
    /// The offset of the valid frame after the damage; `None` when none follows.
    pub resumed_at: Option<u64>,
    pub reason: String,
}

/// Offsets `[from, to)` that no segment holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub from: u64,
    pub to: u64,
}

/// What opening a partition found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The previous run ended with a clean shutdown and the files match it.
    pub clean_shutdown: bool,
    pub segments: usize,
    /// Segments validated record by record.
    pub segments_scanned: usize,
    pub truncations: Vec<Truncation>,
    pub indexes_rebuilt: Vec<PathBuf>,
    pub gaps: Vec<Gap>,
    /// Damage below the recovery point (frames that do not verify, synced before): kept on
    /// disk, never served, and stepped over by scans.
    pub corrupt_kept: Vec<KeptDamage>,
    pub leftovers_removed: Vec<PathBuf>,
    /// The log cleaner's files an interrupted pass left: `.cleaned` files deleted, swaps
    /// finished (see `cleaner/swap.rs`).
    pub cleaner_files: Vec<PathBuf>,
    /// `(recovered log end, recovery point)` when the log ends below an offset that was
    /// known durable: synced records are missing (deleted by hand, or a disk that lied).
    pub lost_synced_tail: Option<(u64, u64)>,
}

impl RecoveryReport {
    /// Total bytes cut from segment tails.
    pub fn bytes_cut(&self) -> u64 {
        self.truncations.iter().map(|t| t.bytes_cut).sum()
    }
}

/// Segments loaded and checked, ready for the log.
#[derive(Debug)]
pub struct Loaded {
    pub segments: BTreeMap<u64, LogSegment>,
    pub report: RecoveryReport,
    /// The directory's file names once the leftovers are removed (listed once: the other
    /// files of the partition, producer snapshots among them, are found here).
    pub names: Vec<String>,
}

/// Runs every pass over `dir`, creating it if it does not exist. The directory is listed
/// once, and each segment file opened once: opening 10,000 partitions is mostly syscalls.
pub fn load(fs: &SharedFs, dir: &Path, index_interval_bytes: u64) -> Result<Loaded> {
    let mut names = list_or_create(fs.as_ref(), dir)?;
    let cleaner_files = finish_interrupted(fs.as_ref(), dir, &mut names)?;
    let mut report = RecoveryReport {
        leftovers_removed: remove_leftovers(fs.as_ref(), dir, &mut names)?,
        cleaner_files,
        ..RecoveryReport::default()
    };
    let bases = list_segments(dir, &names);
    let cleaned = names.iter().any(|n| n == CLEANED_MARKER);
    let mut opened = Vec::with_capacity(bases.len());
    for &base in &bases {
        let mut segment = LogSegment::open(fs, dir, base, index_interval_bytes)?;
        if Some(&base) != bases.last() {
            segment.mark_sealed();
        }
        if cleaned {
            segment.allow_gaps();
        }
        opened.push(OpenedSegment {
            index_missing: !names.contains(&file_names(base).1)
                || !names.contains(&time_index_name(base)),
            segment,
        });
    }
    let active_size = opened.last().map_or(0, |s| s.segment.size());
    let plan = plan(fs.as_ref(), dir, active_size)?;
    report.clean_shutdown = plan.clean;
    let segments = load_segments(opened, &plan, &mut report)?;
    report.segments = segments.len();
    report.gaps = find_gaps(dir, &segments);
    let log_end = segments
        .values()
        .next_back()
        .map_or(0, LogSegment::next_offset);
    if let Some(point) = plan.recovery_point.filter(|&point| log_end < point) {
        tracing::error!(
            dir = %dir.display(), log_end, recovery_point = point,
            "records below the recovery point are missing: synced data was lost"
        );
        report.lost_synced_tail = Some((log_end, point));
    }
    Ok(Loaded {
        segments,
        report,
        names,
    })
}

/// The names in `dir`; creates it (empty) when it does not exist.
fn list_or_create(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<String>> {
    match fs.list(dir) {
        Ok(names) => Ok(names),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs.create_dir_all(dir)
                .map_err(|e| StorageError::io("create partition directory", dir, e))?;
            Ok(Vec::new())
        }
        Err(e) => Err(StorageError::io("list directory", dir, e)),
    }
}

/// Pass 1: removes `*.tmp` files, and `.index` and `.timeindex` files without a `.log`, from
/// `dir` and from `names` (its entries).
fn remove_leftovers(
    fs: &dyn FileSystem,
    dir: &Path,
    names: &mut Vec<String>,
) -> Result<Vec<PathBuf>> {
    let logs: std::collections::HashSet<&str> = names
        .iter()
        .filter_map(|name| name.strip_suffix(".log"))
        .collect();
    let leftovers: Vec<String> = names
        .iter()
        .filter(|name| {
            let orphan_index = name
                .strip_suffix(".index")
                .or_else(|| name.strip_suffix(".timeindex"))
                .is_some_and(|stem| !logs.contains(stem));
            name.ends_with(TMP_SUFFIX) || orphan_index
        })
        .cloned()
        .collect();
    let mut removed = Vec::new();
    for name in leftovers {
        let path = dir.join(&name);
        fs.remove_file(&path)
            .map_err(|e| StorageError::io("remove leftover", &path, e))?;
        tracing::info!(path = %path.display(), "removed leftover file");
        names.retain(|n| *n != name);
        removed.push(path);
    }
    Ok(removed)
}

/// Pass 2: the base offsets of the segments among `names` (the entries of `dir`), ascending.
fn list_segments(dir: &Path, names: &[String]) -> Vec<u64> {
    let mut bases = Vec::new();
    for name in names {
        let Some(stem) = name.strip_suffix(".log") else {
            continue;
        };
        if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        match stem.parse::<u64>() {
            Ok(base) if base <= MAX_BASE_OFFSET => bases.push(base),
            _ => tracing::warn!(
                path = %dir.join(name).display(),
                "segment name beyond the largest offset (Kafka's i64::MAX); ignored"
            ),
        }
    }
    bases.sort_unstable();
    bases
}

/// What pass 3 decided.
#[derive(Debug)]
pub struct Plan {
    /// Trust every segment.
    pub clean: bool,
    /// Segments wholly below this offset are trusted (`None`: scan all).
    pub recovery_point: Option<u64>,
    /// The log end a clean shutdown recorded, also when the active segment changed since (a
    /// checkpoint is made unclean before an open's first change, so only damage changes it):
    /// no offset of the log reaches it.
    pub clean_log_end: Option<u64>,
}

/// Pass 3: reads the checkpoint and checks it against the active segment's size (0 without
/// segments).
fn plan(fs: &dyn FileSystem, dir: &Path, active_size: u64) -> Result<Plan> {
    let Some(checkpoint) = Checkpoint::read(fs, dir)? else {
        return Ok(Plan {
            clean: false,
            recovery_point: None,
            clean_log_end: None,
        });
    };
    let clean = checkpoint.clean && checkpoint.active_size == active_size;
    if checkpoint.clean && !clean {
        tracing::warn!(
            dir = %dir.display(), expected = checkpoint.active_size, found = active_size,
            "active segment changed after the clean shutdown; validating it"
        );
    }
    Ok(Plan {
        clean,
        recovery_point: Some(checkpoint.recovery_point),
        // A clean shutdown records its log end twice (as the recovery point too): a
        // checkpoint whose two disagree was not written by one.
        clean_log_end: (checkpoint.clean && checkpoint.log_end_offset == checkpoint.recovery_point)
            .then_some(checkpoint.log_end_offset),
    })
}

/// A segment opened by pass 4, and whether an index file was missing before its open
/// created it.
#[derive(Debug)]
struct OpenedSegment {
    segment: LogSegment,
    index_missing: bool,
}

/// Pass 4 over the segments `load` opened (ascending): checks or validates each as planned.
fn load_segments(
    opened: Vec<OpenedSegment>,
    plan: &Plan,
    report: &mut RecoveryReport,
) -> Result<BTreeMap<u64, LogSegment>> {
    let bases: Vec<u64> = opened.iter().map(|s| s.segment.base_offset()).collect();
    let mut segments = BTreeMap::new();
    for (i, opened) in opened.into_iter().enumerate() {
        let OpenedSegment {
            mut segment,
            index_missing,
        } = opened;
        let base = bases[i];
        let next_base = bases.get(i + 1).copied();
        let trusted = plan.clean
            || matches!((next_base, plan.recovery_point), (Some(next), Some(point)) if next <= point);
        let why_scan = if index_missing {
            Some("index file is missing".to_owned())
        } else if !trusted {
            Some("written since the last checkpoint".to_owned())
        } else {
            segment.load_tail()?.err().or_else(|| {
                // A sealed segment may hold gaps the log cleaner left, so the tail check
                // accepts a batch past the expected offset: never past the next segment.
                next_base
                    .filter(|&next| segment.next_offset() > next)
                    .map(|next| format!("its batches run past the next segment's base {next}"))
            })
        };
        // What the checkpoint proves synced: all of a trusted sealed segment; otherwise the
        // offsets below the recovery point (none without a checkpoint).
        let synced_below = match next_base {
            Some(_) if trusted => u64::MAX,
            _ => plan.recovery_point.unwrap_or(0),
        };
        // What no offset of the segment reaches: a frame found past damage at or above it
        // has a damaged base offset (see `LogSegment::resync`).
        let offset_limit = next_base.or(plan.clean_log_end).unwrap_or(u64::MAX);
        let step_over = StepOver {
            below: synced_below,
            offset_limit,
        };
        if let Some(why) = why_scan {
            validate_segment(&mut segment, &why, step_over, next_base, report)?;
        }
        segments.insert(base, segment);
    }
    Ok(segments)
}

/// Validates one segment record by record and rebuilds its indexes. Damage at offsets below
/// `step_over.below` is kept and reported (see the module docs), and reading resumes after it
/// at a frame below `step_over.offset_limit`; the file is cut at the first bad frame from
/// `step_over.below` on. `next_base` is the next segment's base, if any.
pub fn validate_segment(
    segment: &mut LogSegment,
    why: &str,
    step_over: StepOver,
    next_base: Option<u64>,
    report: &mut RecoveryReport,
) -> Result<()> {
    let synced_below = step_over.below;
    tracing::info!(path = %segment.log_path().display(), why, "validating segment");
    let size_before = segment.size();
    let outcome = segment.rebuild_index(step_over)?;
    report.segments_scanned += 1;
    report.indexes_rebuilt.push(segment.index_path().to_owned());
    for damage in &outcome.damaged {
        let kept = KeptDamage {
            path: segment.log_path().to_owned(),
            position: damage.position,
            len: damage.end - damage.position,
            first_offset: damage.first_offset,
            resumed_at: damage.resumed_at,
            reason: damage.reason.clone(),
        };
        tracing::error!(
            path = %kept.path.display(), position = kept.position, bytes = kept.len,
            first_offset = kept.first_offset, resumed_at = ?kept.resumed_at, cause = %kept.reason,
            "damaged records below the recovery point (synced); kept on disk, reads of them fail"
        );
        report.corrupt_kept.push(kept);
    }
    if let Some(stop) = outcome.stopped {
        segment.truncate_to(stop.position)?;
        let truncation = Truncation {
            path: segment.log_path().to_owned(),
            position: stop.position,
            bytes_cut: size_before - stop.position,
            reason: stop.reason,
        };
        tracing::warn!(
            path = %truncation.path.display(),
            position = truncation.position,
            bytes_cut = truncation.bytes_cut,
            cause = %truncation.reason,
            "truncated segment to its last valid record"
        );
        report.truncations.push(truncation);
    } else if let Some(damage) = outcome.damaged.last().filter(|d| d.resumed_at.is_none()) {
        // Nothing valid after the damage: the segment ends where it is known to end. For the
        // last segment, the recovery point, but no more records than the damaged bytes can
        // hold uncompressed (a compressed batch can hold more; offsets past this bound are
        // then handed out again).
        let known = next_base.unwrap_or_else(|| {
            let most = (damage.end - damage.position).div_ceil(MIN_RECORD_LEN);
            synced_below.min(damage.first_offset + most)
        });
        tracing::warn!(
            path = %segment.log_path().display(), position = damage.position,
            next_offset = known, "no valid record after the damage; the segment ends at the next known offset"
        );
        segment.set_next_offset(known);
    }
    if next_base.is_some() {
        segment.seal_time_index()?;
    }
    segment.sync_all()
}

/// Pass 5: offsets missing between consecutive segments.
pub fn find_gaps(dir: &Path, segments: &BTreeMap<u64, LogSegment>) -> Vec<Gap> {
    let mut gaps = Vec::new();
    let mut iter = segments.values().peekable();
    while let (Some(segment), Some(next)) = (iter.next(), iter.peek()) {
        if segment.next_offset() < next.base_offset() {
            let gap = Gap {
                from: segment.next_offset(),
                to: next.base_offset(),
            };
            tracing::error!(
                dir = %dir.display(), from = gap.from, to = gap.to,
                "offsets missing between segments; reads skip to the next offset present"
            );
            gaps.push(gap);
        }
    }
    gaps
}
