//! Deleting a topic from the data directory, crash-safe: after a crash at any point, the next
//! open finds the topic whole or gone, never half.
//!
//! # The trash
//! A delete moves the topic's files into the trash directory [`TRASH_DIR`] (`.deleted/`,
//! inside the data directory, so every move is a rename within one file system), then removes
//! the trash:
//! 1. `<topic>.json` → `.deleted/<topic>.json`, then both directories are synced. This is the
//!    commit point: a topic exists while its config is in the data directory.
//! 2. Each `<topic>_<partition>/` → `.deleted/<topic>_<partition>/`; the data directory is
//!    synced. The partitions' names are free again: a topic of the same name can be created
//!    even if step 3 fails.
//! 3. `.deleted/` is removed with everything in it; the data directory is synced.
//!
//! Finishing a delete ([`DataDir::finish_deletes`], run by every open, delete and create):
//! for each config in the trash, the topic's partition directories still in the data
//! directory are moved in (step 2 again), then the trash is removed (step 3). A crash before
//! the commit point leaves the topic whole (its config and every partition directory in
//! place); after it, the next open finishes the delete.
//!
//! The trash is one fixed name rather than a `.deleted` suffix on each file: with a 249-byte
//! topic name, `<topic>.json.deleted` would exceed the 255-byte limit on a file name.

use std::fs;
use std::io;
use std::path::Path;

use super::{validate_topic_name, DataDir, TOPIC_CONFIG_SUFFIX};
use crate::storage::error::{Result, StorageError};
use crate::storage::fs::OsFs;
use crate::storage::fsutil::sync_dir;

/// The trash directory of a data directory (see the module docs).
pub const TRASH_DIR: &str = ".deleted";

/// How far a delete got when it failed.
#[derive(Debug)]
pub enum DeleteError {
    /// Before the commit point: the topic is whole on disk.
    NotDeleted(StorageError),
    /// After it: the topic is deleted; leftovers in the trash are removed by the next open,
    /// delete or create.
    Leftovers(StorageError),
}

/// The steps of a delete, for tests that stop after one of them (a crash).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
pub enum Step {
    Commit,
    MovePartitions,
    EmptyTrash,
}

impl DataDir {
    /// Deletes `topic`'s config and partition directories (see the module docs). The
    /// partitions must be closed.
    ///
    /// # Errors
    /// `NotDeleted(InvalidTopicName)`; `NotDeleted(Io)` before the commit point (`NotFound`
    /// when the topic has no config); `Leftovers(Io)` after it.
    pub fn delete_topic(&self, topic: &str) -> std::result::Result<(), DeleteError> {
        self.delete_topic_until(topic, Step::EmptyTrash)
    }

    /// [`DataDir::delete_topic`] up to and including `last`: what a crash right after that
    /// step leaves (for the crash tests).
    ///
    /// # Errors
    /// As [`DataDir::delete_topic`].
    pub fn delete_topic_until(
        &self,
        topic: &str,
        last: Step,
    ) -> std::result::Result<(), DeleteError> {
        validate_topic_name(topic).map_err(DeleteError::NotDeleted)?;
        // An earlier delete that failed midway is finished first, so its leftovers cannot
        // collide with this one's in the trash.
        self.finish_deletes().map_err(DeleteError::NotDeleted)?;
        let trash = self.path.join(TRASH_DIR);
        let config = self.config_path(topic);
        let commit = || -> Result<()> {
            fs::create_dir_all(&trash).map_err(|e| StorageError::io("create trash", &trash, e))?;
            let to = trash.join(format!("{topic}{TOPIC_CONFIG_SUFFIX}"));
            fs::rename(&config, &to)
                .map_err(|e| StorageError::io("move topic config to trash", &config, e))?;
            sync_dir(&OsFs, &trash)?;
            sync_dir(&OsFs, &self.path)
        };
        commit().map_err(DeleteError::NotDeleted)?;
        if last == Step::Commit {
            return Ok(());
        }
        self.move_partitions(topic, &trash)
            .map_err(DeleteError::Leftovers)?;
        if last == Step::MovePartitions {
            return Ok(());
        }
        self.empty_trash(&trash).map_err(DeleteError::Leftovers)
    }

    /// Finishes every delete a crash or an error interrupted (see the module docs). A no-op
    /// when there is no trash.
    ///
    /// # Errors
    /// `Io`.
    pub fn finish_deletes(&self) -> Result<()> {
        let trash = self.path.join(TRASH_DIR);
        let names = match fs::read_dir(&trash) {
            Ok(entries) => entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect::<Vec<_>>(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StorageError::io("list trash", &trash, e)),
        };
        for name in &names {
            if let Some(topic) = name.strip_suffix(TOPIC_CONFIG_SUFFIX) {
                tracing::info!(topic, "finishing an interrupted topic delete");
                self.move_partitions(topic, &trash)?;
            }
        }
        self.empty_trash(&trash)
    }

    /// Step 2: every `<topic>_<partition>` directory left in the data directory goes to the
    /// trash (found by name, so a config that is damaged or gone does not matter).
    fn move_partitions(&self, topic: &str, trash: &Path) -> Result<()> {
        let entries = fs::read_dir(&self.path)
            .map_err(|e| StorageError::io("list data directory", &self.path, e))?;
        let mut moved = false;
        for entry in entries {
            let entry =
                entry.map_err(|e| StorageError::io("list data directory", &self.path, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !is_partition_of(&name, topic) {
                continue;
            }
            let from = entry.path();
            fs::rename(&from, trash.join(&name))
                .map_err(|e| StorageError::io("move partition to trash", &from, e))?;
            moved = true;
        }
        match moved {
            true => sync_dir(&OsFs, &self.path),
            false => Ok(()),
        }
    }

    /// Step 3: the trash and everything in it.
    fn empty_trash(&self, trash: &Path) -> Result<()> {
        match fs::remove_dir_all(trash) {
            Ok(()) => sync_dir(&OsFs, &self.path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StorageError::io("remove trash", trash, e)),
        }
    }
}

/// Whether `name` is `<topic>_<digits>`. Unambiguous: a partition number has no `_`, so the
/// name splits at its last `_` into one topic and one partition.
fn is_partition_of(name: &str, topic: &str) -> bool {
    name.rsplit_once('_')
        .is_some_and(|(t, p)| t == topic && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::super::PARTITION_METADATA_FILE;
    use super::*;

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != ".lock" && n != super::super::FORMAT_FILE)
            .collect();
        names.sort();
        names
    }

    fn with_topics(dir: &Path) -> DataDir {
        let data = DataDir::open(dir).unwrap();
        data.create_topic("t", 3, b"config of t").unwrap();
        // Names that share a prefix with `t` must survive its delete.
        data.create_topic("t_1", 1, b"config of t_1").unwrap();
        data.create_topic("t2", 1, b"config of t2").unwrap();
        fs::write(data.partition_dir("t", 0).join("00.log"), b"records").unwrap();
        data
    }

    const OTHERS: [&str; 4] = ["t2.json", "t2_0", "t_1.json", "t_1_0"];

    #[test]
    fn a_delete_removes_the_config_and_every_partition_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let data = with_topics(dir.path());
        let old_id = data.topic_id("t").unwrap();
        data.delete_topic("t").unwrap();
        assert_eq!(files(dir.path()), OTHERS);
        let names: Vec<String> = data.topics().unwrap().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["t2", "t_1"]);
        // The name is free: a new topic of that name starts empty, with a new id.
        let id = data.create_topic("t", 1, b"new").unwrap();
        assert_eq!(
            files(&data.partition_dir("t", 0)),
            [PARTITION_METADATA_FILE]
        );
        assert_eq!(data.topic_id("t").unwrap(), id);
        assert_ne!(id, old_id);
        assert!(matches!(
            data.delete_topic("missing"),
            Err(DeleteError::NotDeleted(StorageError::Io { .. }))
        ));
    }

    #[test]
    fn a_crash_at_any_step_leaves_the_topic_gone_after_the_next_open() {
        for last in [Step::Commit, Step::MovePartitions] {
            let dir = tempfile::tempdir().unwrap();
            let data = with_topics(dir.path());
            data.delete_topic_until("t", last).unwrap();
            // What the crash left: the config in the trash, the partitions in place or not.
            assert!(dir.path().join(TRASH_DIR).join("t.json").exists());
            assert!(data.topics().unwrap().iter().all(|t| t.name != "t"));
            drop(data);
            let data = DataDir::open(dir.path()).unwrap();
            assert_eq!(files(dir.path()), OTHERS, "after {last:?}");
            drop(data);
        }
    }

    #[test]
    fn a_crash_before_the_commit_point_leaves_the_topic_whole() {
        let dir = tempfile::tempdir().unwrap();
        let data = with_topics(dir.path());
        // A crash after the trash was made, before the config moved.
        fs::create_dir(dir.path().join(TRASH_DIR)).unwrap();
        drop(data);
        let data = DataDir::open(dir.path()).unwrap();
        assert_eq!(
            files(dir.path()),
            ["t.json", "t2.json", "t2_0", "t_0", "t_1", "t_1.json", "t_1_0", "t_2"]
        );
        assert_eq!(
            fs::read(data.partition_dir("t", 0).join("00.log")).unwrap(),
            b"records"
        );
    }

    #[test]
    fn a_create_after_an_interrupted_delete_finishes_it_first() {
        let dir = tempfile::tempdir().unwrap();
        let data = with_topics(dir.path());
        data.delete_topic_until("t", Step::Commit).unwrap();
        // Without finishing, the new topic would reuse the old partition directories.
        data.create_topic("t", 3, b"new").unwrap();
        assert_eq!(
            files(&data.partition_dir("t", 0)),
            [PARTITION_METADATA_FILE]
        );
        assert!(!dir.path().join(TRASH_DIR).exists());
    }

    #[test]
    fn partition_names_split_at_the_last_underscore() {
        assert!(is_partition_of("t_0", "t"));
        assert!(is_partition_of("t_1_12", "t_1"));
        assert!(!is_partition_of("t_1_12", "t"));
        assert!(!is_partition_of("t_", "t"));
        assert!(!is_partition_of("t_x", "t"));
        assert!(!is_partition_of("t2_0", "t"));
    }
}
