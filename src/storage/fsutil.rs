//! Small file-system helpers shared by the storage modules: atomic replacement, directory
//! sync, and page-aligned read buffers.

use std::io;
use std::path::Path;

use super::error::{Result, StorageError};
use super::fs::{with_suffix, FileSystem, OpenMode, StorageFile};

/// Suffix of a file being written for an atomic replace; leftovers are removed on open.
pub const TMP_SUFFIX: &str = ".tmp";

/// Replaces `path` with `bytes` atomically: write `path.tmp`, fsync it, rename over `path`,
/// fsync the directory. After a crash the file holds either the old or the new bytes.
pub fn write_atomically(fs: &dyn FileSystem, path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically_via(fs, &with_suffix(path, TMP_SUFFIX), path, bytes)
}

/// As [`write_atomically`], through the temporary file `tmp` (same directory as `path`):
/// for files whose name plus [`TMP_SUFFIX`] could exceed the file-name limit.
pub fn write_atomically_via(
    fs: &dyn FileSystem,
    tmp: &Path,
    path: &Path,
    bytes: &[u8],
) -> Result<()> {
    write_synced(fs, tmp, bytes)?;
    fs.rename(tmp, path)
        .map_err(|e| StorageError::io("rename", path, e))?;
    sync_dir(fs, path.parent().unwrap_or(Path::new(".")))
}

/// Creates `path` (replacing any file of that name) holding `bytes`, fsynced, and returns it
/// open. The first step of an atomic replace; a failure leaves a file nothing trusts (it is
/// never renamed, and recovery removes `*.tmp` leftovers), so a failed fsync here needs no
/// rewrite.
///
/// # Errors
/// `Io` naming the step and `path`.
pub fn write_synced(
    fs: &dyn FileSystem,
    path: &Path,
    bytes: &[u8],
) -> Result<Box<dyn StorageFile>> {
    let file = fs
        .open(path, OpenMode::Truncate)
        .map_err(|e| StorageError::io("create", path, e))?;
    file.write_all_at(bytes, 0)
        .map_err(|e| StorageError::io("write", path, e))?;
    file.sync_all()
        .map_err(|e| StorageError::io("fsync", path, e))?;
    Ok(file)
}

/// Bytes rewritten per step by [`rewrite_unsynced`]: bounds its buffer however much is unsynced.
const REWRITE_CHUNK: u64 = 1 << 20;

/// After a failed sync of `file`, writes its bytes `[from, to)` again, in place, so that the
/// next sync really persists them. Every caller whose sync fails calls it before reporting
/// the failure, with `from` the size its last successful sync proved durable.
///
/// Why: the kernel may have marked the pages of a failed `fsync`/`fdatasync` clean without
/// writing them (fsyncgate, Rebello et al. ATC'20). No later sync would then write them, yet
/// one would succeed, and a power loss would leave a hole before every byte written after.
/// Writing the same bytes again makes their pages dirty. The bytes are rewritten in place,
/// never cut first, so the rewrite cannot lose what was durable, even when `from` is 0.
/// Best effort: a failure is logged, and the owner's reopen validates the file.
pub fn rewrite_unsynced(file: &dyn StorageFile, path: &Path, from: u64, to: u64) {
    let mut buf = Vec::new();
    let mut at = from;
    while at < to {
        let len = (to - at).min(REWRITE_CHUNK) as usize;
        buf.resize(len, 0);
        let rewritten = file
            .read_exact_at(&mut buf, at)
            .and_then(|()| file.write_all_at(&buf, at));
        if let Err(e) = rewritten {
            tracing::error!(
                path = %path.display(), position = at, error = %e,
                "cannot rewrite unsynced bytes after a failed sync"
            );
            return;
        }
        at += len as u64;
    }
}

/// Makes a directory's entries (created, renamed, deleted files) durable.
pub fn sync_dir(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs.sync_dir(dir)
        .map_err(|e| StorageError::io("fsync directory", dir, e))
}

/// Page size assumed for buffer alignment (x86-64 and most ARM64 Linux kernels).
pub(crate) const PAGE: usize = 4096;

/// A reusable read buffer whose data starts on a page boundary when the read is a page or
/// more.
///
/// Reads into a buffer that starts mid-page were ~4x slower than into a page-aligned one in
/// our measurements (Linux, `pread` of large reads), and glibc hands large `Vec`s out 16
/// bytes into a page. For such reads the buffer over-allocates one page and starts its slice
/// at the first aligned byte. A read shorter than a page gets exactly its length: it spans at
/// most two pages wherever it starts, and the page of padding (allocated on every fetch of a
/// low-rate consumer, whose reads are a record or two) cost more than the read itself. The
/// read bytes are not zeroed first: the file reads into the spare capacity.
#[derive(Debug, Default)]
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// Fills the buffer with exactly `len` bytes from `read`, which appends them to the vector
    /// it is given (see `StorageFile::read_exact_at_appending`); page-aligned when `len` is at
    /// least a page, reusing the allocation. On an error the buffer holds nothing.
    pub fn read(
        &mut self,
        len: usize,
        read: impl FnOnce(&mut Vec<u8>) -> io::Result<()>,
    ) -> io::Result<&[u8]> {
        self.raw.clear();
        self.len = 0;
        if len < PAGE {
            self.start = 0;
        } else {
            // The allocation does not move once it holds the padding and `len`.
            self.raw.reserve(len + PAGE);
            self.start = self.raw.as_ptr().align_offset(PAGE).min(PAGE);
            self.raw.resize(self.start, 0);
        }
        read(&mut self.raw)?;
        debug_assert_eq!(self.raw.len(), self.start + len);
        self.len = len;
        Ok(self.as_slice())
    }

    /// The bytes of the last `read`.
    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    /// The bytes its allocation holds.
    pub fn capacity(&self) -> usize {
        self.raw.capacity()
    }
}

/// The little-endian `u32` at `buf[at..at + 4]` (the checkpoint and offsets formats).
pub(crate) fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

/// The little-endian `u64` at `buf[at..at + 8]`.
pub(crate) fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::storage::fs::OsFs;

    #[test]
    fn aligned_buf_starts_a_read_of_a_page_or_more_on_a_page() {
        let mut buf = AlignedBuf::default();
        for len in [PAGE, 70_000, 5000, 1, 100, 3 * PAGE] {
            let slice = buf
                .read(len, |raw| {
                    raw.resize(raw.len() + len, 7);
                    Ok(())
                })
                .unwrap();
            assert_eq!(slice.len(), len);
            assert!(slice.iter().all(|&b| b == 7));
            if len >= PAGE {
                assert_eq!(slice.as_ptr() as usize % PAGE, 0, "len {len}");
            }
        }
    }

    #[test]
    fn aligned_buf_gives_a_short_read_only_its_length() {
        let mut buf = AlignedBuf::default();
        let read = buf.read(180, |raw| {
            raw.resize(raw.len() + 180, 0);
            Ok(())
        });
        assert_eq!(read.unwrap().len(), 180);
        assert!(buf.raw.len() < PAGE, "no page of padding for a short read");
    }

    #[test]
    fn write_atomically_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write_atomically(&OsFs, &path, b"one").unwrap();
        write_atomically(&OsFs, &path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
