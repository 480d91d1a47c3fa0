//! Loading a partition directory: what is trusted, what is checked, what is cut.
//!
//! Recovery runs as separate passes, each a function:
//!
//! 1. [`remove_leftovers`] deletes temp files of interrupted atomic writes and index files
//!    whose segment is gone.
//! 2. [`list_segments`] finds the segments by name (`<base_offset:020>.log`).
//! 3. [`plan`] reads the checkpoint and decides which segments to trust: after a clean
//!    shutdown, all of them; otherwise those wholly below the recovery point.
//! 4. [`load_segments`] opens every segment. A trusted one gets the cheap tail check (its last
//!    index entry and the frames after it). An untrusted one, or the log's last segment when
//!    its tail check fails, is validated record by record: its index is rebuilt and the file
//!    is cut at the first torn or invalid frame (a torn write can only be there). Every cut is
//!    logged with file, position, bytes cut and cause. A trusted *sealed* segment was synced
//!    before the recovery point moved past it, so a bad frame there is media corruption, not
//!    a torn write: its index is rebuilt but nothing is cut (the records after the bad frame
//!    are kept); reads of the bad frame fail with `Error::Corrupt` and it is reported in
//!    `RecoveryReport::corrupt_sealed`.
//! 5. [`find_gaps`] reports offsets missing between segments (a segment deleted by hand).
//!    Reads skip a gap to the next offset that exists, as Kafka's fetch does.
//!
//! Nothing here panics: every failure is an `Error` naming the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checkpoint::Checkpoint;
use super::fs::{FileSystem, OpenMode, SharedFs};
use super::fsutil::TMP_SUFFIX;
use super::segment::{file_names, LogSegment};
use crate::error::{Error, Result};

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
    /// Frames that do not verify in trusted sealed segments: kept, never served.
    pub corrupt_sealed: Vec<Truncation>,
    pub leftovers_removed: Vec<PathBuf>,
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
}

/// Runs every pass over `dir`.
pub fn load(fs: &SharedFs, dir: &Path, index_interval_bytes: u64) -> Result<Loaded> {
    let mut report = RecoveryReport {
        leftovers_removed: remove_leftovers(fs.as_ref(), dir)?,
        ..RecoveryReport::default()
    };
    let bases = list_segments(fs.as_ref(), dir)?;
    let plan = plan(fs.as_ref(), dir, &bases)?;
    report.clean_shutdown = plan.clean;
    let segments = load_segments(fs, dir, &bases, &plan, index_interval_bytes, &mut report)?;
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
    Ok(Loaded { segments, report })
}

/// Pass 1: removes `*.tmp` files and `.index` files without a `.log`.
pub fn remove_leftovers(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for name in file_names_in(fs, dir)? {
        let path = dir.join(&name);
        let orphan_index = name
            .strip_suffix(".index")
            .is_some_and(|stem| !fs.exists(&dir.join(format!("{stem}.log"))));
        if name.ends_with(TMP_SUFFIX) || orphan_index {
            fs.remove_file(&path)
                .map_err(|e| Error::io("remove leftover", &path, e))?;
            tracing::info!(path = %path.display(), "removed leftover file");
            removed.push(path);
        }
    }
    Ok(removed)
}

/// Pass 2: the base offsets of the segments in `dir`, ascending.
pub fn list_segments(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<u64>> {
    let mut bases = Vec::new();
    for name in file_names_in(fs, dir)? {
        let Some(stem) = name.strip_suffix(".log") else {
            continue;
        };
        if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        match stem.parse::<u64>() {
            Ok(base) if base <= MAX_BASE_OFFSET => bases.push(base),
            _ => tracing::warn!(
                path = %dir.join(&name).display(),
                "segment name beyond the largest offset (Kafka's i64::MAX); ignored"
            ),
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// What pass 3 decided.
#[derive(Debug)]
pub struct Plan {
    /// Trust every segment.
    pub clean: bool,
    /// Segments wholly below this offset are trusted (`None`: scan all).
    pub recovery_point: Option<u64>,
}

/// Pass 3: reads the checkpoint and checks it against the files.
pub fn plan(fs: &dyn FileSystem, dir: &Path, bases: &[u64]) -> Result<Plan> {
    let Some(checkpoint) = Checkpoint::read(fs, dir)? else {
        return Ok(Plan {
            clean: false,
            recovery_point: None,
        });
    };
    let active_size = match bases.last() {
        Some(&base) => {
            let path = dir.join(file_names(base).0);
            fs.open(&path, OpenMode::Existing)
                .and_then(|f| f.size())
                .map_err(|e| Error::io("stat segment", &path, e))?
        }
        None => 0,
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
    })
}

/// Pass 4: opens each segment, checking or validating it as planned.
pub fn load_segments(
    fs: &SharedFs,
    dir: &Path,
    bases: &[u64],
    plan: &Plan,
    index_interval_bytes: u64,
    report: &mut RecoveryReport,
) -> Result<BTreeMap<u64, LogSegment>> {
    let mut segments = BTreeMap::new();
    for (i, &base) in bases.iter().enumerate() {
        let next_base = bases.get(i + 1).copied();
        let index_missing = !fs.exists(&dir.join(file_names(base).1));
        let mut segment = LogSegment::open(fs, dir, base, index_interval_bytes)?;
        let trusted = plan.clean
            || matches!((next_base, plan.recovery_point), (Some(next), Some(point)) if next <= point);
        let why_scan = if index_missing {
            Some("index file is missing".to_owned())
        } else if !trusted {
            Some("written since the last checkpoint".to_owned())
        } else {
            segment.load_tail()?.err()
        };
        match (why_scan, next_base) {
            (None, _) => {}
            (Some(why), Some(next_base)) if trusted => {
                rebuild_sealed_index(&mut segment, next_base, &why, report)?
            }
            (Some(why), _) => validate_segment(&mut segment, &why, report)?,
        }
        segments.insert(base, segment);
    }
    Ok(segments)
}

/// Validates one segment record by record, rebuilding its index and cutting it at the first
/// frame that does not verify.
pub fn validate_segment(
    segment: &mut LogSegment,
    why: &str,
    report: &mut RecoveryReport,
) -> Result<()> {
    tracing::debug!(path = %segment.log_path().display(), why, "validating segment");
    let size_before = segment.size();
    let outcome = segment.rebuild_index()?;
    report.segments_scanned += 1;
    report.indexes_rebuilt.push(segment.index_path().to_owned());
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
    }
    segment.sync_all()
}

/// Rebuilds the index of a trusted sealed segment without cutting anything: a bad frame is
/// reported (and refused on read), the records after it are kept.
fn rebuild_sealed_index(
    segment: &mut LogSegment,
    next_base: u64,
    why: &str,
    report: &mut RecoveryReport,
) -> Result<()> {
    tracing::warn!(path = %segment.log_path().display(), why, "rebuilding the index of a sealed segment");
    let outcome = segment.rebuild_index()?;
    report.segments_scanned += 1;
    report.indexes_rebuilt.push(segment.index_path().to_owned());
    if let Some(stop) = outcome.stopped {
        let damage = Truncation {
            path: segment.log_path().to_owned(),
            position: stop.position,
            bytes_cut: 0,
            reason: stop.reason,
        };
        tracing::error!(
            path = %damage.path.display(), position = damage.position, cause = %damage.reason,
            "corrupt frame in a synced segment; kept on disk, reads of it fail"
        );
        report.corrupt_sealed.push(damage);
        // The frames after the damage are unreadable by a scan from the index; the segment
        // still ends where the next one begins.
        segment.set_next_offset(next_base);
    }
    Ok(())
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

fn file_names_in(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<String>> {
    fs.list(dir)
        .map_err(|e| Error::io("list directory", dir, e))
}
