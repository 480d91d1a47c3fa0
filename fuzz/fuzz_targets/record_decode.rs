//! Arbitrary bytes into `record::decode`: no panic, and an accepted frame re-encodes to itself.
//! The same bytes are also decoded with their CRC recomputed, so that the checks after the CRC
//! (version, attributes, key length) are reached too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nanokafka_fuzz::check_record_decode(data);
    if let Some(fixed) = nanokafka_fuzz::with_valid_crc(data) {
        nanokafka_fuzz::check_record_decode(&fixed);
    }
});
