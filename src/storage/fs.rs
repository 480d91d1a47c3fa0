//! The file layer under the storage engine: every byte the engine reads or writes goes
//! through [`FileSystem`] and [`StorageFile`], so tests can swap the operating system for
//! [`super::sim::SimFs`], which loses unsynced writes, tears the last one, and fails writes or
//! syncs on demand (power loss and I/O faults).
//!
//! The contract is POSIX's, reduced to what the engine uses: positional reads and writes,
//! `set_len`, `fdatasync`/`fsync` of a file, `fsync` of a directory to make its entries
//! durable, atomic `rename`. A write returns once the bytes are in the OS (the page cache);
//! only a sync makes them durable. A failed sync may have dropped the written pages: the
//! engine never retries a sync and trusts it (it reopens from what is on disk instead).

use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One open file.
pub trait StorageFile: Send + Sync + Debug {
    fn size(&self) -> io::Result<u64>;
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()>;
    /// Appends exactly `len` bytes read at `position` to `buf`; on an error `buf` is as it was.
    /// This default zeroes the space before reading into it; the operating system's file reads
    /// into the vector's spare capacity instead, since a fetch reads into a fresh buffer every
    /// time and zeroing it cost half as much as the read's copy.
    fn read_exact_at_appending(
        &self,
        buf: &mut Vec<u8>,
        len: usize,
        position: u64,
    ) -> io::Result<()> {
        let start = buf.len();
        buf.resize(start + len, 0);
        let read = self.read_exact_at(&mut buf[start..], position);
        if read.is_err() {
            buf.truncate(start);
        }
        read
    }
    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// `fdatasync`: the file's bytes are durable when it returns `Ok`.
    fn sync_data(&self) -> io::Result<()>;
    /// `fsync`: bytes and metadata.
    fn sync_all(&self) -> io::Result<()>;
}

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// An existing file; `NotFound` otherwise.
    Existing,
    /// The file, created empty if absent.
    CreateIfMissing,
    /// A new empty file, replacing any file of that name.
    Truncate,
}

/// The directory operations the engine uses.
pub trait FileSystem: Send + Sync + Debug {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>>;
    /// The whole file (small files: checkpoints, journals, configs).
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    fn exists(&self, path: &Path) -> bool;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Atomic replace of `to` by `from` (durable once the directory is synced).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The names of the entries of a directory.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Makes the directory's entries (created, renamed, removed files) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// A file system shared by the storage objects of a broker.
pub type SharedFs = Arc<dyn FileSystem>;

/// The operating system's file system.
pub fn os() -> SharedFs {
    Arc::new(OsFs)
}

/// [`FileSystem`] over `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

impl StorageFile for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, position)
    }
    fn read_exact_at_appending(
        &self,
        buf: &mut Vec<u8>,
        len: usize,
        position: u64,
    ) -> io::Result<()> {
        buf.reserve(len);
        let mut filled = 0;
        while filled < len {
            let spare = &mut buf.spare_capacity_mut()[filled..len];
            let at = libc::off_t::try_from(position + filled as u64)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "position too large"))?;
            // SAFETY: `pread` writes at most `spare.len()` bytes through the pointer, which is
            // valid for that many writes (spare capacity of `buf`, reserved above).
            let n = unsafe {
                libc::pread(self.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), at)
            };
            match n {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n if n > 0 => filled += n as usize,
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        // SAFETY: the loop above initialised the first `len` bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + len) };
        Ok(())
    }
    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, position)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn sync_all(&self) -> io::Result<()> {
        File::sync_all(self)
    }
}

impl FileSystem for OsFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        match mode {
            OpenMode::Existing => {}
            OpenMode::CreateIfMissing => {
                options.create(true).truncate(false);
            }
            OpenMode::Truncate => {
                options.create(true).truncate(true);
            }
        }
        Ok(Box::new(options.open(path)?))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// `path` with `suffix` appended to its file name.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OS file's read into spare capacity appends exactly the bytes at the position, and a
    /// read past the end leaves the vector as it was; the default (zeroing) read agrees.
    #[test]
    fn an_appending_read_appends_the_bytes_at_the_position_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        let wrapped: Box<dyn StorageFile> = Box::new(Zeroing(File::open(&path).unwrap()));
        for reader in [&file as &dyn StorageFile, &*wrapped] {
            let mut buf = vec![7u8; 3];
            reader
                .read_exact_at_appending(&mut buf, 5000, 4321)
                .unwrap();
            assert_eq!(buf[..3], [7, 7, 7]);
            assert_eq!(buf[3..], data[4321..9321]);
            let err = reader
                .read_exact_at_appending(&mut buf, 100, 9950)
                .unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
            assert_eq!(buf.len(), 5003, "a failed read appends nothing");
        }
    }

    /// A file with only the required methods: the trait's default appending read.
    #[derive(Debug)]
    struct Zeroing(File);

    impl StorageFile for Zeroing {
        fn size(&self) -> io::Result<u64> {
            StorageFile::size(&self.0)
        }
        fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
            StorageFile::read_exact_at(&self.0, buf, position)
        }
        fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
            StorageFile::write_all_at(&self.0, buf, position)
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            StorageFile::set_len(&self.0, len)
        }
        fn sync_data(&self) -> io::Result<()> {
            StorageFile::sync_data(&self.0)
        }
        fn sync_all(&self) -> io::Result<()> {
            StorageFile::sync_all(&self.0)
        }
    }
}
