//! A topic's id (Kafka's topic id, KIP-516) and the file that keeps it.
//!
//! # Format: `partition.metadata`
//! Every partition directory of a topic holds the same id in Kafka's own file, so a Kafka
//! broker given the directory reads the same id:
//!
//! ```text
//! version: 0
//! topic_id: <the id in Kafka's text form: 16 bytes, base64url, no padding (22 characters)>
//! ```
//!
//! The id is random, made when the topic is created (or, for a topic created by a version
//! that wrote no such file, when it is first asked for), so a topic deleted and created again
//! under the same name has a new one, and a client holding the old id learns it is gone.
//! Partition 0's file is the one read; the others are written with it so every directory is
//! whole on its own.

use std::fmt;
use std::fs;
use std::io;
use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::storage::error::{Result, StorageError};
use crate::storage::fs::OsFs;
use crate::storage::fsutil::write_atomically_via;

/// Kafka's name for the file, in each partition directory.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";
/// The temporary file it is written through (in the same directory).
const PARTITION_METADATA_TMP: &str = "partition.metadata.tmp";

/// A topic's id: 16 bytes, never all zeros or Kafka's reserved `1` (see [`TopicId::random`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicId([u8; 16]);

impl TopicId {
    /// A new random id (a version 4 UUID), as Kafka makes one: never Kafka's reserved
    /// zero or one ids, and never one whose text form starts with `-` (Kafka's tools would
    /// read it as an option).
    pub fn random() -> Self {
        loop {
            let id = TopicId(*uuid::Uuid::new_v4().as_bytes());
            if !id.is_reserved() && !id.to_string().starts_with('-') {
                return id;
            }
        }
    }

    /// Kafka's reserved ids: zero ("no id") and one (the metadata topic's).
    fn is_reserved(self) -> bool {
        self.0 == [0; 16] || u128::from_be_bytes(self.0) == 1
    }

    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        TopicId(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Parses Kafka's text form (22 characters of base64url).
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        let id = TopicId(bytes.try_into().ok()?);
        (!id.is_reserved()).then_some(id)
    }

    /// The id kept in `partition_dir`, if its file exists.
    ///
    /// # Errors
    /// `Corrupt` when the file is not Kafka's `partition.metadata` with a valid id; `Io`.
    pub(super) fn read(partition_dir: &Path) -> Result<Option<Self>> {
        let path = partition_dir.join(PARTITION_METADATA_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StorageError::io("read topic id", &path, e)),
        };
        let mut version = None;
        let mut id = None;
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("version: ") {
                version = Some(v.trim());
            } else if let Some(v) = line.strip_prefix("topic_id: ") {
                id = Some(v.trim());
            }
        }
        let corrupt = |reason: &str| StorageError::Corrupt {
            path: path.clone(),
            position: 0,
            reason: reason.to_owned(),
        };
        if version != Some("0") {
            return Err(corrupt("not a version 0 partition.metadata"));
        }
        let id = id.ok_or_else(|| corrupt("no topic_id line"))?;
        TopicId::parse(id)
            .map(Some)
            .ok_or_else(|| corrupt("topic_id is not a topic id in Kafka's text form"))
    }

    /// Keeps this id in `partition_dir` (atomically: a crash leaves the old file or the new
    /// one, never a torn one).
    ///
    /// # Errors
    /// `Io`.
    pub(super) fn write(self, partition_dir: &Path) -> Result<()> {
        let text = format!("version: 0\ntopic_id: {self}\n");
        write_atomically_via(
            &OsFs,
            &partition_dir.join(PARTITION_METADATA_TMP),
            &partition_dir.join(PARTITION_METADATA_FILE),
            text.as_bytes(),
        )
    }
}

impl fmt::Display for TopicId {
    /// Kafka's text form: base64url without padding.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&URL_SAFE_NO_PAD.encode(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_and_rejects_what_is_not_an_id() {
        let id = TopicId::random();
        let text = id.to_string();
        assert_eq!(text.len(), 22);
        assert_eq!(TopicId::parse(&text), Some(id));
        assert_eq!(
            TopicId::parse("AAAAAAAAAAAAAAAAAAAAAA"),
            None,
            "zero is reserved"
        );
        assert_eq!(
            TopicId::parse("AAAAAAAAAAAAAAAAAAAAAQ"),
            None,
            "one is reserved"
        );
        assert_eq!(TopicId::parse("short"), None);
        assert_eq!(TopicId::parse("!!!!!!!!!!!!!!!!!!!!!!"), None);
    }

    #[test]
    fn file_round_trips_and_damage_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(TopicId::read(dir.path()).unwrap(), None);
        let id = TopicId::random();
        id.write(dir.path()).unwrap();
        assert_eq!(TopicId::read(dir.path()).unwrap(), Some(id));
        let text = fs::read_to_string(dir.path().join(PARTITION_METADATA_FILE)).unwrap();
        assert_eq!(text, format!("version: 0\ntopic_id: {id}\n"));

        fs::write(dir.path().join(PARTITION_METADATA_FILE), "version: 0\n").unwrap();
        let err = TopicId::read(dir.path()).unwrap_err();
        assert!(err.to_string().contains("no topic_id line"), "{err}");
        fs::write(
            dir.path().join(PARTITION_METADATA_FILE),
            "version: 1\ntopic_id: x\n",
        )
        .unwrap();
        let err = TopicId::read(dir.path()).unwrap_err();
        assert!(err.to_string().contains("version 0"), "{err}");
    }
}
