//! The cleaner's temporary files, the swap that replaces source segments with a cleaned
//! one, and how recovery finishes or undoes a swap a crash interrupted (Kafka's rules for
//! `.cleaned`, `.swap` and `.deleted` files).
//!
//! # Files
//! A cleaned segment named after its group's first source, `<base:020>`, is written as
//! `<base>.log.cleaned`, `<base>.index.cleaned` and `<base>.timeindex.cleaned` (the same
//! formats as a segment's: Kafka record batches, and the two indexes), then synced.
//!
//! # The swap (`PartitionLog::swap_in`, one group at a time, in offset order)
//! 1. **Commit**: `.index.cleaned` and `.timeindex.cleaned` are renamed to `.swap`, then
//!    `.log.cleaned` to `<base>.log.swap`, and the directory is synced. From the moment
//!    `<base>.log.swap` exists the swap is decided: its bytes were synced before the rename.
//! 2. Every source is renamed with its indexes to `.deleted` names (`<base>.log.deleted`,
//!    ...), and the directory is synced: the cleaned segment never shares the directory
//!    with live sources it overlaps unless `.log.swap` says which they are.
//! 3. `.index.swap` and `.timeindex.swap` are renamed to the first source's index names,
//!    then `<base>.log.swap` to `<base>.log`, and the directory is synced.
//! 4. The `.deleted` files are unlinked on the log's worker thread (as retention deletes
//!    segments), not on the thread that swaps: an unlink frees the file's page cache, which
//!    takes milliseconds for a large segment. A crash first leaves them to recovery.
//!
//! # Recovery ([`finish_interrupted`], before any segment is opened)
//! * Every `*.cleaned` file is deleted: a pass that had not committed is undone; its
//!   sources are all still there. Every `*.deleted` file is deleted: it is a source of a
//!   committed swap (renamed only after the commit point), superseded.
//! * For every `<base>.log.swap`: its extent is `[base, next offset of its last batch)`,
//!   which is exactly its sources' (a cleaned segment keeps its last batch, see
//!   `cleaner.rs`). Every segment whose base offset lies in it (the sources left) is deleted
//!   with its indexes, then `.index.swap` and `.timeindex.swap` (those still there) and
//!   `.log.swap` are renamed to their final names, and the directory synced: the swap is
//!   finished. A missing index is rebuilt by the later passes, as after any crash.
//! * A `*.swap` index left without its `.log.swap` belongs to a swap that had not committed:
//!   deleted.
//!
//! So after a crash at any step a directory holds either every source, or the cleaned
//! segment and none of its sources; never a half-written cleaned segment (it is synced
//! before it gets a name recovery reads), and never a key's older value after its newer
//! one next to the cleaned segment that dropped it.

use std::path::{Path, PathBuf};

use crate::storage::error::{Result, StorageError};
use crate::storage::format::{BatchHeader, HEADER_LEN};
use crate::storage::fs::{FileSystem, OpenMode};
use crate::storage::fsutil::sync_dir;
use crate::storage::segment::SegmentPaths;

/// An empty file in a partition's directory, created (and the directory synced) before the
/// first swap of the log's first cleaning, and never removed: the log's sealed segments may
/// hold gaps the cleaner left (see `LogSegment::may_have_gaps`). A log without it was never
/// cleaned, and a batch that does not follow the one before is damage there, as before
/// cleaning existed.
pub const CLEANED_MARKER: &str = "cleaner.marker";

/// Creates [`CLEANED_MARKER`] in `dir` durably, when it is not there yet.
///
/// # Errors
/// `Io` when the file cannot be created or the directory synced.
pub fn mark_cleaned(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    let path = dir.join(CLEANED_MARKER);
    if fs.exists(&path) {
        return Ok(());
    }
    fs.open(&path, OpenMode::CreateIfMissing)
        .map_err(|e| StorageError::io("create the cleaned marker", &path, e))?;
    sync_dir(fs, dir)
}

/// The suffix of a cleaned segment's files while it is written (Kafka's `.cleaned`).
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// The suffix of a cleaned segment's files once the swap is committed (Kafka's `.swap`).
pub const SWAP_SUFFIX: &str = ".swap";
/// The suffix a replaced source segment's files take until they are unlinked (Kafka's
/// `.deleted`).
pub const DELETED_SUFFIX: &str = ".deleted";

/// Unlinks the files of a replaced segment (those that exist), the last step of a swap.
///
/// # Errors
/// `Io` naming the first file that cannot be deleted (the next open deletes what is left).
pub fn remove_retired(fs: &dyn FileSystem, paths: &SegmentPaths) -> Result<()> {
    for path in [&paths.log, &paths.index, &paths.time_index] {
        match fs.remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(StorageError::io("delete a replaced segment", path, e))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Deletes a group's files, those that exist; failures are logged (the next open deletes
/// what is left).
pub fn remove_quietly(fs: &dyn FileSystem, paths: &SegmentPaths) {
    for path in [&paths.log, &paths.index, &paths.time_index] {
        match fs.remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(path = %path.display(), error = %e, "could not delete a cleaner's file");
            }
            _ => {}
        }
    }
}

/// Renames `from` to `to`.
///
/// # Errors
/// `Io`.
pub fn rename(fs: &dyn FileSystem, from: &Path, to: &Path) -> Result<()> {
    fs.rename(from, to)
        .map_err(|e| StorageError::io("rename a cleaned segment's file", from, e))
}

/// Renames `from` to `to` when `from` exists.
fn rename_if_present(fs: &dyn FileSystem, from: &Path, to: &Path) -> Result<()> {
    match fs.rename(from, to) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other.map_err(|e| StorageError::io("rename a cleaned segment's file", from, e)),
    }
}

/// The offset after the last batch of the segment file at `path` (`base` when it holds
/// none), from the batches' headers. The file was synced whole before it got its name.
///
/// # Errors
/// `Io`.
pub fn swap_end(fs: &dyn FileSystem, path: &Path, base: u64) -> Result<u64> {
    let file = fs
        .open(path, OpenMode::Existing)
        .map_err(|e| StorageError::io("open a swap file", path, e))?;
    let size = file
        .size()
        .map_err(|e| StorageError::io("stat a swap file", path, e))?;
    let (mut position, mut end) = (0u64, base);
    let mut header = [0u8; HEADER_LEN];
    while position + HEADER_LEN as u64 <= size {
        file.read_exact_at(&mut header, position)
            .map_err(|e| StorageError::io("read a swap file", path, e))?;
        let Some(parsed) = BatchHeader::parse(&header) else {
            break;
        };
        if parsed.batch_len < HEADER_LEN || position + parsed.batch_len as u64 > size {
            break;
        }
        end = parsed.next_offset();
        position += parsed.batch_len as u64;
    }
    Ok(end)
}

/// The base offset of a segment file name `<base:020><suffix>`.
fn base_of(name: &str, suffix: &str) -> Option<u64> {
    let stem = name.strip_suffix(suffix)?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// Recovery's pass for the cleaner's files in `dir` (see the module docs), given the
/// directory's `names` (listed again here when anything changed). Returns the files deleted
/// or renamed.
///
/// # Errors
/// `Io` when a file cannot be read, deleted or renamed, or the directory synced.
pub fn finish_interrupted(
    fs: &dyn FileSystem,
    dir: &Path,
    names: &mut Vec<String>,
) -> Result<Vec<PathBuf>> {
    let mut touched = Vec::new();
    let remove = |name: &str, touched: &mut Vec<PathBuf>| -> Result<()> {
        let path = dir.join(name);
        match fs.remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StorageError::io("remove a cleaner's file", &path, e))
            }
            _ => {
                touched.push(path);
                Ok(())
            }
        }
    };
    for name in names.iter().filter(|n| n.ends_with(CLEANED_SUFFIX)) {
        tracing::info!(path = %dir.join(name).display(), "deleting a cleaned segment whose swap had not begun");
        remove(name, &mut touched)?;
    }
    for name in names.iter().filter(|n| n.ends_with(DELETED_SUFFIX)) {
        tracing::info!(path = %dir.join(name).display(), "deleting a segment a cleaned one replaced");
        remove(name, &mut touched)?;
    }
    let log_swap = format!(".log{SWAP_SUFFIX}");
    let mut swaps: Vec<u64> = names.iter().filter_map(|n| base_of(n, &log_swap)).collect();
    swaps.sort_unstable();
    for base in swaps {
        let swap = SegmentPaths::new(dir, base).with_suffix(SWAP_SUFFIX);
        let end = swap_end(fs, &swap.log, base)?.max(base + 1);
        for name in names.iter() {
            let replaced = [".log", ".index", ".timeindex"]
                .iter()
                .filter_map(|suffix| base_of(name, suffix))
                .any(|b| (base..end).contains(&b));
            if replaced {
                remove(name, &mut touched)?;
            }
        }
        let fin = SegmentPaths::new(dir, base);
        rename_if_present(fs, &swap.index, &fin.index)?;
        rename_if_present(fs, &swap.time_index, &fin.time_index)?;
        rename(fs, &swap.log, &fin.log)?;
        tracing::warn!(
            path = %fin.log.display(), from = base, to = end,
            "finished swapping in a cleaned segment (a crash interrupted it)"
        );
        touched.push(fin.log);
    }
    // Listed again: the swaps renamed files.
    if !touched.is_empty() {
        *names = fs
            .list(dir)
            .map_err(|e| StorageError::io("list directory", dir, e))?;
    }
    let orphans: Vec<String> = names
        .iter()
        .filter(|n| n.ends_with(SWAP_SUFFIX))
        .cloned()
        .collect();
    for name in &orphans {
        remove(name, &mut touched)?;
    }
    if !touched.is_empty() {
        names.retain(|n| !orphans.contains(n));
        sync_dir(fs, dir)?;
    }
    Ok(touched)
}
