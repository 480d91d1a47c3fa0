//! The export's checkpoint: what lets a stopped export resume without duplicating a record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::refused;
use crate::error::{Error, Result};
use crate::storage::fs::OsFs;
use crate::storage::fsutil::{sync_dir, write_atomically_via};

/// The directory of the data directory that holds the checkpoints, one file per cluster.
pub const CHECKPOINT_DIR: &str = ".export";
/// The checkpoint format this code writes and reads.
const VERSION: u32 = 1;

/// Where one partition's export started: the two offsets that line the source up with the
/// target. Fixed when the export first meets the partition, never changed after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMark {
    /// The source offset of the first record exported: the partition's log start then.
    pub source_base: u64,
    /// The target partition's end offset then, where that record landed (0 for a topic the
    /// export created).
    pub target_base: i64,
}

/// The source partition's bounds (its log start and end offsets) as an export sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceBounds {
    pub start: u64,
    pub end: u64,
}

/// The checkpoint of a data directory's export to one Kafka cluster: every partition's
/// [`PartitionMark`], kept in `<data_dir>/.export/<cluster>.json` (`<cluster>` is the
/// cluster id the cluster reports, else its bootstrap address; characters outside
/// `[A-Za-z0-9._-]` become `_`).
///
/// # The resume rule
/// Nothing but the export writes to the target topics while it runs, its producer is
/// idempotent (a retry within a run never duplicates) and gapless (a record that fails
/// stops every later one of its partition), and records are sent in offset order, one
/// target partition per source partition. So at any moment, also after a kill, each target
/// partition holds a prefix of what the export sends it, and its end offset `E` says how
/// long: `E - target_base` records, the source's records `source_base ..
/// source_base + (E - target_base)`. A rerun resumes each partition at source offset
/// `source_base + E - target_base`. The target's log start plays no part: retention on the
/// target may delete exported records without changing what was exported (counting from
/// it would copy them again).
///
/// The marks are written (atomically, synced) before the first record of a partition is
/// sent, so a kill at any point leaves either no mark and an empty target partition, or a
/// mark that accounts for every record there. A rerun refuses, changing nothing, when the
/// counts cannot be right:
/// * no mark, and the target partition holds records (written by someone else, or by an
///   export whose checkpoint was lost): the export cannot know which records they are;
/// * a mark, and `E < target_base` (the topic was deleted or recreated on the target), or
///   the target holds more records than the source has from `source_base` (someone else
///   wrote to it), or the resume offset is below the source's log start (retention deleted
///   records on the source before they were exported);
/// * a mark for a topic the target no longer has, or has with another partition count.
///
/// Delete the file to start that cluster's export over (into empty topics).
///
/// A kill can leave produce requests of the stopped run queued in the cluster, still to be
/// appended. The file says whether the last run ended (`unfinished`); a run after one that
/// did not first waits until the target's end offsets stop moving, and every delivery is
/// checked against the offset the rule expects for it: a record landing anywhere else stops
/// the export with an error naming the partition.
///
/// # Format
/// JSON: `{"version": 1, "cluster": "...", "bootstrap": "host:port", "unfinished": false,
/// "topics": {"orders": [{"source_base": 0, "target_base": 0}, ...]}}`, one mark per
/// partition in partition order.
#[derive(Debug, Clone)]
pub struct ExportCheckpoint {
    path: PathBuf,
    file: CheckpointFile,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct CheckpointFile {
    version: u32,
    cluster: String,
    bootstrap: String,
    unfinished: bool,
    topics: BTreeMap<String, Vec<PartitionMark>>,
}

impl ExportCheckpoint {
    /// The checkpoint of `data_dir`'s export to `cluster`, or an empty one.
    ///
    /// # Errors
    /// `Io` when it cannot be read; `Corrupt` when it is not a checkpoint.
    pub fn load(data_dir: &Path, cluster: &str, bootstrap: &str) -> Result<Self> {
        let path = data_dir
            .join(CHECKPOINT_DIR)
            .join(format!("{}.json", file_name(cluster)));
        let file = match std::fs::read(&path) {
            Ok(bytes) => parse(&path, &bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => CheckpointFile {
                version: VERSION,
                cluster: cluster.to_owned(),
                bootstrap: bootstrap.to_owned(),
                unfinished: false,
                topics: BTreeMap::new(),
            },
            Err(e) => return Err(Error::io("read export checkpoint", &path, e)),
        };
        Ok(ExportCheckpoint { path, file })
    }

    /// The file it is kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The marks of `topic`'s partitions, when an earlier run exported it.
    pub fn marks(&self, topic: &str) -> Option<&[PartitionMark]> {
        self.file.topics.get(topic).map(Vec::as_slice)
    }

    /// Whether the last run stopped before it ended (killed, crashed).
    pub fn unfinished(&self) -> bool {
        self.file.unfinished
    }

    pub(super) fn set_marks(&mut self, topic: &str, marks: Vec<PartitionMark>) {
        self.file.topics.insert(topic.to_owned(), marks);
    }

    pub(super) fn set_unfinished(&mut self, unfinished: bool) {
        self.file.unfinished = unfinished;
    }

    /// Writes the checkpoint: atomically (a temporary file renamed over it) and synced.
    pub(super) fn save(&self) -> Result<()> {
        let dir = self
            .path
            .parent()
            .expect("the checkpoint is inside its directory");
        if !dir.is_dir() {
            std::fs::create_dir(dir).map_err(|e| Error::io("create export directory", dir, e))?;
            // The directory's entry must survive a power loss for the file in it to.
            sync_dir(&OsFs, dir.parent().unwrap_or(Path::new(".")))?;
        }
        let bytes = serde_json::to_vec_pretty(&self.file).map_err(|e| Error::Internal {
            actor: "export".into(),
            reason: format!("cannot encode the checkpoint: {e}"),
        })?;
        write_atomically_via(&OsFs, &dir.join(".checkpoint.tmp"), &self.path, &bytes)
            .map_err(Error::from)
    }
}

fn parse(path: &Path, bytes: &[u8]) -> Result<CheckpointFile> {
    let corrupt = |reason: String| Error::Corrupt {
        path: path.to_owned(),
        position: 0,
        reason,
    };
    let file: CheckpointFile = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(format!("not an export checkpoint: {e}")))?;
    if file.version != VERSION {
        return Err(corrupt(format!(
            "checkpoint version {}, this NanoKafka reads {VERSION}",
            file.version
        )));
    }
    Ok(file)
}

/// `name` as one safe file-name component.
fn file_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .take(200)
        .collect();
    match safe.trim_start_matches('.') {
        "" => "cluster".to_owned(),
        _ => safe,
    }
}

/// The source offset partition `topic[partition]` resumes at, by the resume rule of
/// [`ExportCheckpoint`], given its mark, the target partition's end offset and the
/// source's bounds now.
///
/// # Errors
/// `Transfer` when the target or the source no longer agree with the mark.
pub(super) fn resume_offset(
    at: (&str, u32),
    mark: PartitionMark,
    target_end: i64,
    source: SourceBounds,
    checkpoint: &Path,
) -> Result<u64> {
    let (topic, partition) = at;
    let start_over = format!(
        "delete {} to export to this cluster from scratch, into empty topics",
        checkpoint.display()
    );
    let Ok(copied) = u64::try_from(target_end - mark.target_base) else {
        return Err(refused(
            "export",
            format!(
                "target partition {topic}[{partition}] ends at offset {target_end}, before \
                 offset {} where this export began writing it: the topic was deleted or \
                 recreated on the target; {start_over}",
                mark.target_base
            ),
        ));
    };
    let resume = mark.source_base + copied;
    if resume > source.end {
        return Err(refused(
            "export",
            format!(
                "target partition {topic}[{partition}] holds {copied} records from offset {} \
                 on, but the source has only {} from offset {} on: someone else wrote to the \
                 target topic; {start_over}",
                mark.target_base,
                source.end.saturating_sub(mark.source_base),
                mark.source_base
            ),
        ));
    }
    if resume < source.start {
        return Err(refused(
            "export",
            format!(
                "source partition {topic}[{partition}] now starts at offset {}: retention \
                 deleted records {resume}..{} before they were exported, so the target would \
                 have a gap; {start_over}",
                source.start, source.start
            ),
        ));
    }
    Ok(resume)
}

/// The mark of a partition the export meets for the first time: its target partition must
/// hold no record (`low == high`).
///
/// # Errors
/// `Transfer` when it holds some.
pub(super) fn first_mark(
    at: (&str, u32),
    target: (i64, i64),
    source: SourceBounds,
    checkpoint: &Path,
) -> Result<PartitionMark> {
    let (topic, partition) = at;
    let (low, high) = target;
    if low != high {
        return Err(refused(
            "export",
            format!(
                "target partition {topic}[{partition}] already holds records (offsets \
                 {low}..{high}) that this export did not write ({} has no mark for it): \
                 export into a new or empty topic",
                checkpoint.display()
            ),
        ));
    }
    Ok(PartitionMark {
        source_base: source.start,
        target_base: high,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: (&str, u32) = ("orders", 1);

    fn resume(mark: (u64, i64), target_end: i64, source: (u64, u64)) -> Result<u64> {
        let mark = PartitionMark {
            source_base: mark.0,
            target_base: mark.1,
        };
        let source = SourceBounds {
            start: source.0,
            end: source.1,
        };
        resume_offset(AT, mark, target_end, source, Path::new("c.json"))
    }

    #[test]
    fn a_rerun_resumes_after_the_records_the_target_holds() {
        assert_eq!(resume((0, 0), 0, (0, 10)).unwrap(), 0);
        assert_eq!(resume((0, 0), 4, (0, 10)).unwrap(), 4);
        assert_eq!(resume((0, 0), 10, (0, 10)).unwrap(), 10, "all exported");
        // The source's log started at 100, the target topic already ended at 7.
        assert_eq!(resume((100, 7), 12, (100, 150)).unwrap(), 105);
        // Retention on the source since then is fine while it did not reach the resume point.
        assert_eq!(resume((100, 7), 12, (105, 150)).unwrap(), 105);
    }

    #[test]
    fn counts_the_mark_cannot_account_for_are_refused() {
        let err = |r: Result<u64>| match r {
            Err(Error::Transfer { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        assert!(err(resume((0, 5), 3, (0, 10))).contains("deleted or recreated"));
        assert!(err(resume((0, 0), 11, (0, 10))).contains("someone else wrote"));
        assert!(err(resume((0, 0), 4, (6, 10))).contains("retention deleted records 4..6"));
    }

    #[test]
    fn a_first_export_needs_an_empty_target_partition() {
        let source = SourceBounds { start: 3, end: 9 };
        let mark = first_mark(AT, (40, 40), source, Path::new("c.json")).unwrap();
        assert_eq!(
            mark,
            PartitionMark {
                source_base: 3,
                target_base: 40
            }
        );
        let refused = first_mark(AT, (0, 2), source, Path::new("c.json"));
        assert!(matches!(refused, Err(Error::Transfer { reason, .. }) if reason.contains("0..2")));
    }

    #[test]
    fn checkpoints_round_trip_and_cluster_ids_become_safe_file_names() {
        let dir = tempfile::tempdir().unwrap();
        let mut checkpoint = ExportCheckpoint::load(dir.path(), "a/b:c", "h:1").unwrap();
        assert!(checkpoint.path().ends_with(".export/a_b_c.json"));
        assert_eq!(checkpoint.marks("orders"), None);
        let marks = vec![PartitionMark {
            source_base: 1,
            target_base: 2,
        }];
        checkpoint.set_marks("orders", marks.clone());
        checkpoint.set_unfinished(true);
        checkpoint.save().unwrap();
        let again = ExportCheckpoint::load(dir.path(), "a/b:c", "h:1").unwrap();
        assert_eq!(again.marks("orders"), Some(&marks[..]));
        assert!(again.unfinished());
        assert_eq!(file_name(".."), "cluster");

        std::fs::write(checkpoint.path(), b"{}").unwrap();
        let broken = ExportCheckpoint::load(dir.path(), "a/b:c", "h:1");
        assert!(matches!(broken, Err(Error::Corrupt { .. })), "{broken:?}");
    }
}
