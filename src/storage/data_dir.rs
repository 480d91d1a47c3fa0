//! `DataDir`: the broker's directory: its lock, its topics' configs, and the names that become
//! paths (validated before any path is built, so a name can never reach outside the
//! directory).
//!
//! A topic's config is stored as opaque bytes in `<topic>.json`: what they mean (the JSON of
//! `nanokafka::TopicConfig`) is the business of the layer above.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use super::error::{Result, StorageError};
use super::fs::OsFs;
use super::fsutil::{sync_dir, write_atomically_via};

mod delete;
mod topic_id;
pub use delete::DeleteError;
/// The steps of a topic delete, for the crash tests (`internals` feature).
#[cfg(feature = "internals")]
pub use delete::Step as DeleteStep;
pub use topic_id::TopicId;
// Named outside this module only by the `internals` feature's users and tests.
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use topic_id::PARTITION_METADATA_FILE;

pub const LOCK_FILE: &str = ".lock";
/// The file naming the format of the directory's segments; written when the directory is
/// first opened empty, checked on every later open.
pub const FORMAT_FILE: &str = "format";
/// What [`FORMAT_FILE`] holds: segments are Kafka log segments of RecordBatch v2.
pub const FORMAT: &str = "nanokafka data directory, segments: Kafka RecordBatch v2 (magic 2)\n";
/// Kafka's limit: a topic name plus `_<partition>` must fit a 255-byte file name.
pub const MAX_TOPIC_NAME_LEN: usize = 249;
const TOPIC_CONFIG_SUFFIX: &str = ".json";
/// The temporary file a topic config is written through. Not `<topic>.json.tmp`: with a
/// 249-byte topic name that is 258 bytes, over the 255-byte file-name limit. One fixed name
/// is safe because the broker creates topics one at a time (the data dir has one writer),
/// and a leftover is harmless: it is not a `.json` file, and the next creation truncates it.
const TOPIC_CONFIG_TMP: &str = ".topic-config.tmp";

/// Checks a topic name: `[A-Za-z0-9._-]{1,249}`, and not `.` or `..`, so it is always one safe
/// path component.
///
/// # Errors
/// [`StorageError::InvalidTopicName`] saying what is wrong.
pub fn validate_topic_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("must not be empty")
    } else if name.len() > MAX_TOPIC_NAME_LEN {
        Some("longer than 249 bytes")
    } else if name == "." || name == ".." {
        Some("'.' and '..' are not allowed")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        Some("only ASCII letters, digits, '.', '_' and '-' are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(StorageError::InvalidTopicName {
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The directory of partition `partition` of `topic` in `data_dir`: `<topic>_<partition>`
/// (the one place the name is made).
pub fn partition_dir(data_dir: &Path, topic: &str, partition: u32) -> PathBuf {
    data_dir.join(format!("{topic}_{partition}"))
}

/// Checks the format of the locked data directory at `path`: [`FORMAT_FILE`] must say
/// [`FORMAT`]. A directory without one is new when it holds nothing but the lock and the
/// security settings an admin may write before its first start (`security/`: SCRAM users);
/// the file is then written), and otherwise was written by an earlier version in its one-frame-per-record
/// format, which this one must not misread.
///
/// # Errors
/// `UnsupportedFormat` naming what was found; `Io`.
fn check_format(path: &Path) -> Result<()> {
    /// The listener's security files (`crate::security`), which `nanokafka users` may write
    /// before the directory is first served.
    const SECURITY_DIR: &str = "security";
    let format_path = path.join(FORMAT_FILE);
    match fs::read(&format_path) {
        Ok(found) if found == FORMAT.as_bytes() => return Ok(()),
        Ok(found) => {
            return Err(StorageError::UnsupportedFormat {
                path: path.to_owned(),
                found: format!(
                    "{FORMAT_FILE} says {:?}",
                    String::from_utf8_lossy(&found).trim()
                ),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StorageError::io("read format file", &format_path, e)),
    }
    let entries =
        fs::read_dir(path).map_err(|e| StorageError::io("list data directory", path, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StorageError::io("list data directory", path, e))?;
        let name = entry.file_name();
        if name != LOCK_FILE && name != TOPIC_CONFIG_TMP && name != SECURITY_DIR {
            return Err(StorageError::UnsupportedFormat {
                path: path.to_owned(),
                found: format!(
                    "no {FORMAT_FILE} file beside {:?}: written by an earlier NanoKafka in its \
                     one-frame-per-record segment format, which this version does not read",
                    name.to_string_lossy()
                ),
            });
        }
    }
    write_atomically_via(
        &OsFs,
        &path.join(TOPIC_CONFIG_TMP),
        &format_path,
        FORMAT.as_bytes(),
    )
}

/// An open, locked data directory. Opening it finishes any topic delete a crash
/// interrupted (see `delete`).
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    /// Held for the lifetime of the broker: the OS releases the lock when it is closed, also
    /// when the process dies.
    _lock: File,
}

/// How long `open` keeps trying a lock that is taken before it reports `DataDirLocked`.
///
/// The lock is `flock(2)`, which belongs to the open file, not the process: when any thread of
/// the process that holds it starts a child (`fork` then `exec`), the child shares the open
/// lock file until its `exec` closes it (close-on-exec). A broker closed and reopened in
/// that window would find its own, released, lock still held. The window is the time a
/// child takes to reach `exec`, far below this bound even on a loaded machine; a lock held
/// by a live broker is still refused, only 200 ms later.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(200);

/// `try_lock`, retried every few milliseconds for up to [`LOCK_PATIENCE`] while the lock is
/// taken.
fn try_lock_patiently(lock: &fs::File) -> std::result::Result<(), std::fs::TryLockError> {
    let deadline = std::time::Instant::now() + LOCK_PATIENCE;
    loop {
        match lock.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

impl DataDir {
    /// Creates `path` if needed and takes its exclusive lock.
    ///
    /// A lock still held for a moment after its broker closed is waited for, briefly: see
    /// [`try_lock_patiently`].
    ///
    /// # Errors
    /// `DataDirLocked` when another broker holds it; `Io` when it cannot be created (e.g. the
    /// path is a file, or read-only).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_owned();
        fs::create_dir_all(&path)
            .map_err(|e| StorageError::io("create data directory", &path, e))?;
        let lock_path = path.join(LOCK_FILE);
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| StorageError::io("open lock file", &lock_path, e))?;
        match try_lock_patiently(&lock) {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = lock.read_to_string(&mut holder);
                let holder = match holder.trim() {
                    "" => "unknown holder".to_owned(),
                    pid => format!("pid {pid}"),
                };
                return Err(StorageError::DataDirLocked { path, holder });
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(StorageError::io("lock", &lock_path, e))
            }
        }
        // Record who holds it, for the error message a second broker will show.
        let record_pid = lock
            .set_len(0)
            .and_then(|()| lock.rewind())
            .and_then(|()| write!(lock, "{}", std::process::id()));
        record_pid.map_err(|e| StorageError::io("write lock file", &lock_path, e))?;
        check_format(&path)?;
        let data_dir = DataDir { path, _lock: lock };
        data_dir.finish_deletes()?;
        Ok(data_dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory of one partition: `<data_dir>/<topic>_<partition>`.
    pub fn partition_dir(&self, topic: &str, partition: u32) -> PathBuf {
        partition_dir(&self.path, topic, partition)
    }

    fn config_path(&self, topic: &str) -> PathBuf {
        self.path.join(format!("{topic}{TOPIC_CONFIG_SUFFIX}"))
    }

    /// Every topic with a config file, sorted by name, with the config's bytes.
    ///
    /// # Errors
    /// `Io` when the directory or a config cannot be read.
    pub fn topics(&self) -> Result<Vec<StoredTopic>> {
        let entries = fs::read_dir(&self.path)
            .map_err(|e| StorageError::io("list data directory", &self.path, e))?;
        let mut topics = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| StorageError::io("list data directory", &self.path, e))?;
            let Ok(file_name) = entry.file_name().into_string() else {
                continue;
            };
            let Some(topic) = file_name.strip_suffix(TOPIC_CONFIG_SUFFIX) else {
                continue;
            };
            if validate_topic_name(topic).is_err() {
                continue;
            }
            let path = entry.path();
            let config =
                fs::read(&path).map_err(|e| StorageError::io("read topic config", &path, e))?;
            topics.push(StoredTopic {
                name: topic.to_owned(),
                path,
                config,
            });
        }
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(topics)
    }

    /// Creates the directories of `partitions` partitions, then the config file holding
    /// `config` (atomically, last: a topic exists once its config does). Partition
    /// directories left by a creation that crashed before its config was written are reused
    /// (an interrupted delete's are not: it is finished first). The caller has checked the
    /// config itself.
    ///
    /// # Errors
    /// `InvalidTopicName` (nothing created), `TopicExists`, `Io`.
    pub fn create_topic(&self, topic: &str, partitions: u32, config: &[u8]) -> Result<TopicId> {
        validate_topic_name(topic)?;
        // A delete of this name that did not finish must not leave it its old partitions.
        self.finish_deletes()?;
        let config_path = self.config_path(topic);
        if config_path.exists() {
            return Err(StorageError::TopicExists {
                topic: topic.to_owned(),
            });
        }
        // A new id even when directories of a crashed creation are reused: no client can
        // have learnt the old one, since the topic never existed.
        let id = TopicId::random();
        for partition in 0..partitions {
            let dir = self.partition_dir(topic, partition);
            fs::create_dir_all(&dir)
                .map_err(|e| StorageError::io("create partition directory", &dir, e))?;
            id.write(&dir)?;
        }
        sync_dir(&OsFs, &self.path)?;
        write_atomically_via(
            &OsFs,
            &self.path.join(TOPIC_CONFIG_TMP),
            &config_path,
            config,
        )?;
        Ok(id)
    }

    /// `topic`'s id (see [`TopicId`]): the one its partition 0 keeps. A topic created by a
    /// version that kept none gets one now, written to every partition directory.
    ///
    /// The caller knows the topic exists (it has a config).
    ///
    /// # Errors
    /// `InvalidTopicName`; `Corrupt` when the file is damaged; `Io`.
    pub fn topic_id(&self, topic: &str) -> Result<TopicId> {
        validate_topic_name(topic)?;
        if let Some(id) = TopicId::read(&self.partition_dir(topic, 0))? {
            return Ok(id);
        }
        let id = TopicId::random();
        // Partition 0 last: until it has the file, the next call starts over.
        let mut partition = 1;
        while self.partition_dir(topic, partition).is_dir() {
            id.write(&self.partition_dir(topic, partition))?;
            partition += 1;
        }
        id.write(&self.partition_dir(topic, 0))?;
        Ok(id)
    }

    /// Replaces `topic`'s config with `config`, creating the directories of the partitions
    /// `added` first (as a creation does: a crash in between leaves the old config and
    /// empty directories, which the next alter reuses). The config is replaced atomically,
    /// so a reopen finds the old config or the new one, whole.
    ///
    /// # Errors
    /// `Io`.
    pub fn alter_topic(
        &self,
        topic: &str,
        added: std::ops::Range<u32>,
        config: &[u8],
    ) -> Result<()> {
        validate_topic_name(topic)?;
        if !added.is_empty() {
            let id = self.topic_id(topic)?;
            for partition in added {
                let dir = self.partition_dir(topic, partition);
                fs::create_dir_all(&dir)
                    .map_err(|e| StorageError::io("create partition directory", &dir, e))?;
                id.write(&dir)?;
            }
            sync_dir(&OsFs, &self.path)?;
        }
        write_atomically_via(
            &OsFs,
            &self.path.join(TOPIC_CONFIG_TMP),
            &self.config_path(topic),
            config,
        )
    }
}

/// A topic found in the data directory by [`DataDir::topics`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTopic {
    pub name: String,
    /// The config file, `<data_dir>/<name>.json` (for errors about its content).
    pub path: PathBuf,
    /// The config file's bytes, as given to [`DataDir::create_topic`].
    pub config: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_keeps_the_topic_id_and_added_partitions_get_it() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open(dir.path()).unwrap();
        let id = data.create_topic("t", 2, b"{}").unwrap();
        data.alter_topic("t", 2..3, b"{}").unwrap();
        for partition in 0..3 {
            let kept = TopicId::read(&data.partition_dir("t", partition)).unwrap();
            assert_eq!(kept, Some(id), "partition {partition}");
        }
        drop(data);
        let data = DataDir::open(dir.path()).unwrap();
        assert_eq!(data.topic_id("t").unwrap(), id, "kept across a reopen");
    }

    #[test]
    fn a_topic_without_an_id_gets_one_once_in_every_partition() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open(dir.path()).unwrap();
        data.create_topic("t", 2, b"{}").unwrap();
        // As a version that kept no ids left it.
        for partition in 0..2 {
            fs::remove_file(
                data.partition_dir("t", partition)
                    .join(PARTITION_METADATA_FILE),
            )
            .unwrap();
        }
        let id = data.topic_id("t").unwrap();
        assert_eq!(data.topic_id("t").unwrap(), id, "made once");
        let kept = TopicId::read(&data.partition_dir("t", 1)).unwrap();
        assert_eq!(kept, Some(id));
    }

    #[test]
    fn a_damaged_id_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open(dir.path()).unwrap();
        data.create_topic("t", 1, b"{}").unwrap();
        let path = data.partition_dir("t", 0).join(PARTITION_METADATA_FILE);
        fs::write(&path, "version: 0\ntopic_id: nonsense\n").unwrap();
        let err = data.topic_id("t").unwrap_err();
        assert!(matches!(err, StorageError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("partition.metadata"), "{err}");
    }

    #[test]
    fn a_new_directory_gets_the_format_file_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        drop(DataDir::open(dir.path()).unwrap());
        assert_eq!(
            fs::read_to_string(dir.path().join(FORMAT_FILE)).unwrap(),
            FORMAT
        );
        fs::create_dir(dir.path().join("orders_0")).unwrap();
        assert!(DataDir::open(dir.path()).is_ok());
    }

    #[test]
    fn a_new_directory_may_hold_security_files_written_before_its_first_start() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("security")).unwrap();
        fs::write(dir.path().join("security/scram-credentials"), b"users").unwrap();
        drop(DataDir::open(dir.path()).unwrap());
        assert!(dir.path().join(FORMAT_FILE).exists());
    }

    #[test]
    fn a_directory_of_the_old_format_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        // What an earlier version left: topic configs and partition directories, no format file.
        fs::write(dir.path().join("orders.json"), b"{}").unwrap();
        fs::create_dir(dir.path().join("orders_0")).unwrap();
        let err = DataDir::open(dir.path()).unwrap_err();
        assert!(
            matches!(&err, StorageError::UnsupportedFormat { found, .. } if found.contains("one-frame-per-record")),
            "{err}"
        );
        assert!(!dir.path().join(FORMAT_FILE).exists());
        fs::write(dir.path().join(FORMAT_FILE), b"something else\n").unwrap();
        let err = DataDir::open(dir.path()).unwrap_err();
        assert!(
            matches!(&err, StorageError::UnsupportedFormat { found, .. } if found.contains("something else")),
            "{err}"
        );
    }

    #[test]
    fn topic_names_follow_kafkas_rule() {
        for ok in ["orders", "a", "A.b_c-9", &"x".repeat(249)] {
            assert!(validate_topic_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "../etc", "a b", "ü", &"x".repeat(250)] {
            assert!(
                matches!(
                    validate_topic_name(bad),
                    Err(StorageError::InvalidTopicName { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_second_open_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDir::open(dir.path()).unwrap();
        match DataDir::open(dir.path()) {
            Err(StorageError::DataDirLocked { path, holder }) => {
                assert_eq!(path, dir.path());
                assert_eq!(holder, format!("pid {}", std::process::id()));
            }
            other => panic!("expected DataDirLocked, got {other:?}"),
        }
        drop(first);
        assert!(DataDir::open(dir.path()).is_ok());
    }

    #[test]
    fn topics_persist_and_duplicates_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open(dir.path()).unwrap();
        data.create_topic("orders", 2, b"config of orders").unwrap();
        assert!(data.partition_dir("orders", 1).is_dir());
        assert!(matches!(
            data.create_topic("orders", 2, b"again"),
            Err(StorageError::TopicExists { .. })
        ));
        assert!(matches!(
            data.create_topic("bad/name", 1, b""),
            Err(StorageError::InvalidTopicName { .. })
        ));
        drop(data);
        let data = DataDir::open(dir.path()).unwrap();
        let topics = data.topics().unwrap();
        assert_eq!(topics.len(), 1);
        assert_eq!(topics[0].name, "orders");
        assert_eq!(topics[0].path, dir.path().join("orders.json"));
        assert_eq!(topics[0].config, b"config of orders");
    }

    #[test]
    fn a_topic_with_the_longest_allowed_name_can_be_created_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open(dir.path()).unwrap();
        let name = "x".repeat(MAX_TOPIC_NAME_LEN);
        data.create_topic(&name, 1, b"{}").unwrap();
        // So does the longest partition directory name: four digits (made by hand, creating
        // 10,000 is slow).
        let last = data.partition_dir(&name, 9999);
        fs::create_dir(&last).unwrap();
        drop(data);
        let data = DataDir::open(dir.path()).unwrap();
        let names: Vec<String> = data.topics().unwrap().into_iter().map(|t| t.name).collect();
        assert_eq!(names, vec![name]);
    }

    #[test]
    fn a_data_dir_that_is_a_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(DataDir::open(&file), Err(StorageError::Io { .. })));
    }
}
