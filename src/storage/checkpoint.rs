//! The two small per-partition state files besides segments and offsets.
//!
//! # `checkpoint` — what recovery may trust
//! Written atomically (temp file, fsync, rename, fsync dir) after every segment roll once the
//! sealed segment and the directory are synced (on a background thread unless
//! `FsyncPolicy::Always`: see `PartitionLog::roll`), at clean shutdown, and unclean
//! (`clean` 0, `recovery_point` the log end) before the first change to the log's files after
//! an open. An open that trusted a clean checkpoint and changed nothing leaves it as it is:
//! it still describes the files, so a crash before the first append, roll or retention is
//! recovered as clean (correctly: nothing changed), and its clean shutdown writes nothing.
//! An open that recovered anything (an unclean or missing checkpoint, a scan, a created
//! segment, removed leftovers) writes the unclean one at once. 40 bytes, little-endian:
//!
//! ```text
//! offset  size  field
//!      0     4  magic            b"NKCP"
//!      4     1  version          1
//!      5     1  clean            1 after a clean shutdown, 0 while the partition is open
//!      6     2  reserved         0
//!      8     8  recovery_point   every segment wholly below this offset was synced and valid
//!     16     8  log_end_offset   at a clean shutdown; 0 otherwise
//!     24     8  active_size      bytes of the active segment at a clean shutdown
//!     32     4  crc              CRC32C of bytes [0, 32)
//!     36     4  reserved         0
//! ```
//!
//! After a clean shutdown, recovery trusts every segment if the active segment still has
//! `active_size` bytes (anything else means it was written after the marker). Otherwise it
//! scans every segment from the one holding `recovery_point` on. A missing or invalid
//! checkpoint means "scan everything".
//!
//! # `log_start_offset` — the first readable offset
//! 16 bytes rewritten in place (one `pwrite`) whenever retention advances the log start, so
//! that it costs one syscall per append at most:
//!
//! ```text
//! offset  size  field
//!      0     8  log_start_offset
//!      8     4  crc     CRC32C of bytes [0, 8)
//!     12     4  magic   b"NKLS"
//! ```
//!
//! It is not synced: a value lost or torn by a power failure is recomputed on open from the
//! first segment's base offset and the retention rules, which re-derive the same start.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::error::{Result, StorageError};
use super::fs::{FileSystem, OpenMode, StorageFile};
use super::fsutil::write_atomically;
use super::fsutil::{u32_at, u64_at};

pub const CHECKPOINT_FILE: &str = "checkpoint";
pub const LOG_START_FILE: &str = "log_start_offset";

const CHECKPOINT_MAGIC: &[u8; 4] = b"NKCP";
const CHECKPOINT_VERSION: u8 = 1;
const CHECKPOINT_LEN: usize = 40;
const LOG_START_MAGIC: &[u8; 4] = b"NKLS";

/// The decoded `checkpoint` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Checkpoint {
    pub clean: bool,
    pub recovery_point: u64,
    pub log_end_offset: u64,
    pub active_size: u64,
}

impl Checkpoint {
    /// Reads `dir/checkpoint`; `Ok(None)` when it is absent or does not verify (logged).
    pub fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Option<Checkpoint>> {
        let path = dir.join(CHECKPOINT_FILE);
        let bytes = match fs.read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StorageError::io("read checkpoint", path, e)),
        };
        let valid = bytes.len() == CHECKPOINT_LEN
            && &bytes[0..4] == CHECKPOINT_MAGIC
            && bytes[4] == CHECKPOINT_VERSION
            && u32_at(&bytes, 32) == crc32c::crc32c(&bytes[..32]);
        if !valid {
            tracing::warn!(path = %path.display(), "checkpoint does not verify; scanning every segment");
            return Ok(None);
        }
        Ok(Some(Checkpoint {
            clean: bytes[5] == 1,
            recovery_point: u64_at(&bytes, 8),
            log_end_offset: u64_at(&bytes, 16),
            active_size: u64_at(&bytes, 24),
        }))
    }

    /// Replaces `dir/checkpoint` atomically and durably.
    pub fn write(&self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        let mut bytes = [0u8; CHECKPOINT_LEN];
        bytes[0..4].copy_from_slice(CHECKPOINT_MAGIC);
        bytes[4] = CHECKPOINT_VERSION;
        bytes[5] = u8::from(self.clean);
        bytes[8..16].copy_from_slice(&self.recovery_point.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.log_end_offset.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.active_size.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[..32]);
        bytes[32..36].copy_from_slice(&crc.to_le_bytes());
        write_atomically(fs, &dir.join(CHECKPOINT_FILE), &bytes)
    }
}

/// The open `log_start_offset` file.
#[derive(Debug)]
pub struct LogStartFile {
    path: PathBuf,
    file: Box<dyn StorageFile>,
}

impl LogStartFile {
    /// Opens (creating) `dir/log_start_offset` and returns the stored value if it verifies.
    pub fn open(fs: &dyn FileSystem, dir: &Path) -> Result<(Self, Option<u64>)> {
        let path = dir.join(LOG_START_FILE);
        let file = fs
            .open(&path, OpenMode::CreateIfMissing)
            .map_err(|e| StorageError::io("open", &path, e))?;
        let mut bytes = [0u8; 16];
        let stored = match file.read_exact_at(&mut bytes, 0) {
            Ok(())
                if &bytes[12..16] == LOG_START_MAGIC
                    && u32_at(&bytes, 8) == crc32c::crc32c(&bytes[..8]) =>
            {
                Some(u64_at(&bytes, 0))
            }
            Ok(()) => {
                tracing::warn!(path = %path.display(), "log start offset does not verify; recomputing it");
                None
            }
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => None,
            Err(e) => return Err(StorageError::io("read", &path, e)),
        };
        Ok((LogStartFile { path, file }, stored))
    }

    /// Overwrites the stored value (one `pwrite`, not synced: see the module docs).
    pub fn store(&self, log_start_offset: u64) -> Result<()> {
        let mut bytes = [0u8; 16];
        bytes[0..8].copy_from_slice(&log_start_offset.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[..8]);
        bytes[8..12].copy_from_slice(&crc.to_le_bytes());
        bytes[12..16].copy_from_slice(LOG_START_MAGIC);
        self.file
            .write_all_at(&bytes, 0)
            .map_err(|e| StorageError::io("write", &self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::storage::fs::OsFs;

    #[test]
    fn checkpoint_round_trips_and_rejects_a_flipped_byte() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Checkpoint::read(&OsFs, dir.path()).unwrap(), None);
        let cp = Checkpoint {
            clean: true,
            recovery_point: 77,
            log_end_offset: 99,
            active_size: 4242,
        };
        cp.write(&OsFs, dir.path()).unwrap();
        assert_eq!(Checkpoint::read(&OsFs, dir.path()).unwrap(), Some(cp));
        let path = dir.path().join(CHECKPOINT_FILE);
        let mut bytes = fs::read(&path).unwrap();
        bytes[10] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert_eq!(Checkpoint::read(&OsFs, dir.path()).unwrap(), None);
    }

    #[test]
    fn log_start_round_trips_and_a_torn_value_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let (file, stored) = LogStartFile::open(&OsFs, dir.path()).unwrap();
        assert_eq!(stored, None);
        file.store(12345).unwrap();
        drop(file);
        assert_eq!(
            LogStartFile::open(&OsFs, dir.path()).unwrap().1,
            Some(12345)
        );
        let path = dir.path().join(LOG_START_FILE);
        let mut bytes = fs::read(&path).unwrap();
        bytes[3] ^= 0xff;
        fs::write(&path, bytes).unwrap();
        assert_eq!(LogStartFile::open(&OsFs, dir.path()).unwrap().1, None);
    }
}
