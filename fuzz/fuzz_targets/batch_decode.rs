//! Arbitrary bytes into `format::decode`: no panic; an accepted batch verifies by the documented
//! layout, its records parse as this crate's own parser reads them, and a batch laid out as the
//! crate writes it re-encodes to itself. The same bytes are also decoded made into a batch
//! envelope (length, magic and CRC fixed), so that the checks after the CRC (record count,
//! codec, the records section) are reached too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nanokafka_fuzz::check_batch_decode(data);
    if let Some(batch) = nanokafka_fuzz::as_batch(data) {
        nanokafka_fuzz::check_batch_decode(&batch);
    }
});
