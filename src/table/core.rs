//! What a table keeps, and how each record read from its topic changes it: the part of a
//! table with no I/O and no actor in it, tested on its own.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use super::{TableChange, TableKey};
use crate::types::TableRecord;

/// Where a key's latest record lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Location {
    pub partition: u32,
    pub offset: u64,
}

/// What a table keeps per key: the value itself ([`Kept`], a `Table`) or only where it lies
/// ([`Located`], a `LogTable`).
pub(crate) trait Slot<V>: Sized + Send + Sync + 'static {
    /// Whether the table decodes and keeps every value.
    const KEEPS_VALUES: bool;
    /// The slot of a record at `at` whose value decoded as `value` (always decoded when the
    /// table keeps values), and the value a change reports when `want_change`. `None` when
    /// a value to keep is missing.
    fn make(value: Option<V>, at: Location, want_change: bool) -> Option<(Self, Option<V>)>;
    /// The value, when kept.
    fn into_value(self) -> Option<V>;
}

/// A decoded value, kept in memory.
#[derive(Debug)]
pub(crate) struct Kept<V>(pub V);

impl<V: Clone + Send + Sync + 'static> Slot<V> for Kept<V> {
    const KEEPS_VALUES: bool = true;

    fn make(value: Option<V>, _: Location, want_change: bool) -> Option<(Self, Option<V>)> {
        let value = value?;
        let reported = want_change.then(|| value.clone());
        Some((Kept(value), reported))
    }

    fn into_value(self) -> Option<V> {
        Some(self.0)
    }
}

/// Where the value lies in the log (12 bytes a key, 16 with padding).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located(pub Location);

impl<V> Slot<V> for Located {
    const KEEPS_VALUES: bool = false;

    fn make(value: Option<V>, at: Location, _: bool) -> Option<(Self, Option<V>)> {
        Some((Located(at), value))
    }

    fn into_value(self) -> Option<V> {
        None
    }
}

/// The keys of a table, and how far it has read each partition of its topic.
#[derive(Debug)]
pub(crate) struct State<K, S> {
    pub entries: BTreeMap<K, S>,
    /// Per partition, the offset after the last record applied.
    pub positions: Vec<u64>,
    /// Records skipped: keyless, a key that is no `K`, a value that is no `V`.
    pub skipped: u64,
}

impl<K: TableKey, S> State<K, S> {
    pub fn new(positions: Vec<u64>) -> Self {
        State {
            entries: BTreeMap::new(),
            positions,
            skipped: 0,
        }
    }

    /// Applies `record`, the next of its partition. Returns the change it made when
    /// `want_change` (a subscriber is listening); `None` otherwise, and for a record that
    /// changed nothing (skipped, or a tombstone of a key the table does not hold).
    pub fn apply<V>(
        &mut self,
        topic: &str,
        mut record: TableRecord,
        want_change: bool,
    ) -> Option<TableChange<K, V>>
    where
        V: DeserializeOwned + Send + Sync + 'static,
        S: Slot<V>,
    {
        let p = record.partition as usize;
        if self.positions.len() <= p {
            self.positions.resize(p + 1, 0);
        }
        self.positions[p] = self.positions[p].max(record.offset + 1);
        let Some(key) = record.key.as_deref().and_then(K::from_key_bytes) else {
            self.skip(
                topic,
                &record,
                "its key is missing or not a key of the table",
            );
            return None;
        };
        let Some(bytes) = record.value.take() else {
            let old = self.entries.remove(&key)?;
            return want_change.then(|| TableChange::Deleted {
                key,
                old: old.into_value(),
            });
        };
        let value = match S::KEEPS_VALUES || want_change {
            true => match rmp_serde::from_slice::<V>(&bytes) {
                Ok(value) => Some(value),
                Err(_) => {
                    self.skip(topic, &record, "its value is not the table's value type");
                    return None;
                }
            },
            false => None,
        };
        let at = Location {
            partition: record.partition,
            offset: record.offset,
        };
        let (slot, new) = S::make(value, at, want_change)?;
        let old = self.entries.insert(key.clone(), slot);
        Some(TableChange::Updated {
            key,
            old: old.and_then(Slot::into_value),
            new: new?,
        })
    }

    fn skip(&mut self, topic: &str, record: &TableRecord, why: &str) {
        self.skipped += 1;
        tracing::warn!(
            topic,
            partition = record.partition,
            offset = record.offset,
            "table skips a record: {why}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partition: u32, offset: u64, key: &str, value: Option<u64>) -> TableRecord {
        TableRecord {
            partition,
            offset,
            key: Some(key.as_bytes().to_vec()),
            value: value.map(|v| rmp_serde::to_vec_named(&v).unwrap()),
        }
    }

    #[test]
    fn values_replace_tombstones_remove_and_positions_follow_each_partition() {
        let mut state: State<String, Kept<u64>> = State::new(vec![0, 0]);
        let mut apply = |r| state.apply::<u64>("t", r, true);
        assert_eq!(
            apply(record(0, 0, "a", Some(1))),
            Some(TableChange::Updated {
                key: "a".into(),
                old: None,
                new: 1
            })
        );
        assert_eq!(
            apply(record(1, 4, "a", Some(2))),
            Some(TableChange::Updated {
                key: "a".into(),
                old: Some(1),
                new: 2
            })
        );
        // A tombstone of a key the table does not hold changes nothing.
        assert_eq!(apply(record(0, 1, "b", None)), None);
        assert_eq!(
            apply(record(0, 2, "a", None)),
            Some(TableChange::Deleted {
                key: "a".into(),
                old: Some(2)
            })
        );
        assert!(state.entries.is_empty());
        assert_eq!(state.positions, [3, 5]);
        assert_eq!(state.skipped, 0);
    }

    #[test]
    fn a_located_table_decodes_values_only_for_its_subscribers() {
        let mut state: State<String, Located> = State::new(vec![0]);
        let not_a_number = TableRecord {
            value: Some(rmp_serde::to_vec_named("text").unwrap()),
            ..record(0, 0, "a", None)
        };
        // Nobody listens: the value is not read, only where it lies.
        assert_eq!(state.apply::<u64>("t", not_a_number.clone(), false), None);
        assert_eq!(
            state.entries.get("a").map(|l| l.0),
            Some(Location {
                partition: 0,
                offset: 0
            })
        );
        // A subscriber listens: the value is decoded for it, and one that is no `u64` is
        // skipped (the key keeps its last good location).
        let skipped = TableRecord {
            offset: 1,
            ..not_a_number
        };
        assert_eq!(state.apply::<u64>("t", skipped, true), None);
        assert_eq!(state.skipped, 1);
        assert_eq!(state.entries["a"].0.offset, 0);
        assert_eq!(
            state.apply::<u64>("t", record(0, 2, "a", Some(7)), true),
            Some(TableChange::Updated {
                key: "a".into(),
                old: None,
                new: 7
            })
        );
    }
}
