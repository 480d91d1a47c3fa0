//! The listener's request path on arbitrary frames: served API and version, the shape check
//! before decoding, header, body (`nanokafka::internals::listener::read_request`, what a
//! connection does before it calls a handler). No input may panic or abort; the cargo-fuzz target
//! `request_decode` also runs under libFuzzer's `-malloc_limit_mb`, which reports any single
//! allocation over the limit, and `tests/request_sanity.rs` runs the same checks under
//! proptest with an allocator that records the largest allocation.
//!
//! Included with `#[path]` by both, so it depends only on nanokafka and bytes.

use nanokafka::internals::listener::{read_request, SERVED};

/// Reads `frame` as a connection would. Returns whether it was read.
pub fn check_request(frame: &[u8]) -> bool {
    read_request(bytes::Bytes::copy_from_slice(frame)).is_ok()
}

/// `data` with its first four bytes made a served API and a version in its range, so that
/// most inputs reach the shape check and the decoder rather than stopping at the API table.
pub fn as_served_frame(data: &[u8]) -> Option<Vec<u8>> {
    let (&pick, rest) = data.split_first()?;
    let (&version_pick, rest) = rest.split_first()?;
    let (api, min, max) = SERVED[usize::from(pick) % SERVED.len()];
    let span = (max - min + 1) as u8;
    let version = min + i16::from(version_pick % span);
    let mut frame = Vec::with_capacity(rest.len() + 4);
    frame.extend_from_slice(&(api as i16).to_be_bytes());
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(rest);
    Some(frame)
}
