//! `cleaner.totals`: what the log cleaner did to a partition over its life (passes, bytes
//! read and written, records removed, when the last pass ran, the dirty share it left), so
//! that a restarted broker's `stats()`, and `nanokafka topics describe` on a stopped data
//! directory, still show it.
//!
//! Replaced atomically (temp file, fsync, rename, fsync of the directory) after every pass
//! the partition swapped in, so a crash leaves the totals of the last pass or of the one
//! before. Nothing decides anything from them: a file that is missing (no pass yet) or does
//! not verify (logged) reads as no totals, and the next pass starts them again. 56 bytes,
//! little-endian:
//!
//! ```text
//! offset  size  field
//!      0     4  magic            b"NKCT"
//!      4     1  version          1
//!      5     3  reserved         0
//!      8     8  passes           passes swapped in
//!     16     8  bytes_read       bytes the passes read
//!     24     8  bytes_written    bytes the passes wrote
//!     32     8  records_removed  records the passes removed
//!     40     8  last_pass_ms     when the last pass was swapped in (ms since the epoch)
//!     48     4  dirty_permille   the dirty share of the cleanable bytes the last pass left
//!     52     4  crc              CRC32C of bytes [0, 52)
//! ```

use std::io::ErrorKind;
use std::path::Path;

use crate::storage::error::Result;
use crate::storage::fs::FileSystem;
use crate::storage::fsutil::{u32_at, u64_at, write_atomically};

/// The file's name in a partition's directory.
pub const TOTALS_FILE: &str = "cleaner.totals";

const MAGIC: &[u8; 4] = b"NKCT";
const VERSION: u8 = 1;
const LEN: usize = 56;
/// Where the CRC is, and what it covers (the bytes before it).
const CRC_AT: usize = 52;

/// The decoded `cleaner.totals` (see the module docs for each field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CleanerTotals {
    pub passes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_removed: u64,
    pub last_pass_ms: u64,
    pub dirty_permille: u32,
}

impl CleanerTotals {
    /// Reads `dir/cleaner.totals`; `None` when it is absent, cannot be read or does not
    /// verify (the last two logged): they are statistics, never a reason to fail an open.
    pub fn read(fs: &dyn FileSystem, dir: &Path) -> Option<CleanerTotals> {
        let path = dir.join(TOTALS_FILE);
        let bytes = match fs.read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read the cleaner's totals; they start again");
                return None;
            }
        };
        let valid = bytes.len() == LEN
            && &bytes[0..4] == MAGIC
            && bytes[4] == VERSION
            && u32_at(&bytes, CRC_AT) == crc32c::crc32c(&bytes[..CRC_AT]);
        if !valid {
            tracing::warn!(path = %path.display(), "the cleaner's totals do not verify; they start again");
            return None;
        }
        Some(CleanerTotals {
            passes: u64_at(&bytes, 8),
            bytes_read: u64_at(&bytes, 16),
            bytes_written: u64_at(&bytes, 24),
            records_removed: u64_at(&bytes, 32),
            last_pass_ms: u64_at(&bytes, 40),
            dirty_permille: u32_at(&bytes, 48),
        })
    }

    /// Replaces `dir/cleaner.totals` atomically and durably.
    ///
    /// # Errors
    /// `Io` naming the step and the file.
    pub fn write(&self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        let mut bytes = [0u8; LEN];
        bytes[0..4].copy_from_slice(MAGIC);
        bytes[4] = VERSION;
        for (at, value) in [
            (8, self.passes),
            (16, self.bytes_read),
            (24, self.bytes_written),
            (32, self.records_removed),
            (40, self.last_pass_ms),
        ] {
            bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        bytes[48..52].copy_from_slice(&self.dirty_permille.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[..CRC_AT]);
        bytes[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        write_atomically(fs, &dir.join(TOTALS_FILE), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::OsFs;

    #[test]
    fn totals_round_trip_and_a_flipped_byte_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(CleanerTotals::read(&OsFs, dir.path()), None);
        let totals = CleanerTotals {
            passes: 3,
            bytes_read: 1 << 40,
            bytes_written: 12_345,
            records_removed: 678,
            last_pass_ms: 1_700_000_000_123,
            dirty_permille: 250,
        };
        totals.write(&OsFs, dir.path()).unwrap();
        assert_eq!(CleanerTotals::read(&OsFs, dir.path()), Some(totals));
        let path = dir.path().join(TOTALS_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), LEN);
        bytes[41] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(CleanerTotals::read(&OsFs, dir.path()), None);
        std::fs::write(&path, &bytes[..20]).unwrap();
        assert_eq!(CleanerTotals::read(&OsFs, dir.path()), None);
    }
}
