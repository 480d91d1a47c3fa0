//! The listener beyond loopback, against clients that misbehave on the network: one module
//! per defence.
//!
//! * `quota`: a producer over its client quota, ignoring its throttle time, does not starve a
//!   well-behaved one.

// Shared with the wire tests: each binary uses the part it needs.
#[allow(dead_code)]
#[path = "wire/client.rs"]
mod client;
#[path = "common/client_batch.rs"]
mod client_batch;
#[allow(dead_code)]
#[path = "wire/common.rs"]
mod common;
#[allow(dead_code)]
#[path = "wire/records.rs"]
mod records;

#[path = "hostile_network/quota.rs"]
mod quota;
