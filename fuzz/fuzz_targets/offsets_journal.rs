//! Arbitrary bytes as `offsets.journal`: `OffsetStore::open` keeps the valid entries, never
//! panics, and a commit made afterwards survives a reopen.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    journal: Vec<u8>,
    /// Index of an existing group to overwrite, or a new group when out of range.
    group: u8,
    offset: u64,
}

fuzz_target!(|input: Input| {
    let dir = nanokafka_fuzz::scratch_dir();
    let groups = nanokafka_fuzz::replay_journal(&input.journal);
    let group = groups
        .keys()
        .nth(usize::from(input.group))
        .cloned()
        .unwrap_or_else(|| "fuzz-group".to_owned());
    nanokafka_fuzz::check_offsets_journal(dir.path(), &input.journal, &group, input.offset);
});
