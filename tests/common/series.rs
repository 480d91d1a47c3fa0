//! A metric's identity in the metrics tests: its name and its labels, sorted.

use std::collections::BTreeMap;

/// A metric's name and labels.
pub type Series = (String, BTreeMap<String, String>);

/// The series `name` with `labels`.
pub fn series(name: &str, labels: &[(&str, &str)]) -> Series {
    let labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (name.to_owned(), labels)
}
