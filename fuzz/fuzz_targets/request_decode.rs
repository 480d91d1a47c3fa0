//! Arbitrary bytes as a Kafka request frame through the listener's request path (served API
//! and version, the shape check before decoding, header, body): no panic, no abort. Run with
//! libFuzzer's `-malloc_limit_mb` (default: the RSS limit, 2 GiB), so that a count that
//! slipped past the check and sized a huge allocation is reported, not just survived. The same
//! bytes are also read with their first four made a served API and version, so that most
//! inputs reach the check and the decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../src/request.rs"]
mod request;

fuzz_target!(|data: &[u8]| {
    request::check_request(data);
    if let Some(frame) = request::as_served_frame(data) {
        request::check_request(&frame);
    }
});
