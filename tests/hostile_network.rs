//! The listener beyond loopback, under clients that mean harm: each part of its security has
//! a module here, and in each a good client keeps being served while the hostile ones are
//! turned away at no cost but their own connections.
//!
//! * `tls`: what reaches a TLS port that is not a TLS client (garbage, plaintext requests,
//!   cut and stalled handshakes); every record of a good TLS client is delivered.
//! * `auth`: a flood of failed SASL authentications beside a well-behaved SCRAM client.
//! * `quota`: a producer over its client quota, ignoring its throttle time, does not starve a
//!   well-behaved one.

#[path = "common/clients.rs"]
mod clients;
#[path = "common/scram_client.rs"]
mod scram_client;
#[path = "common/tls.rs"]
mod tls_certs;

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

#[path = "hostile_network/auth.rs"]
mod auth;
#[path = "hostile_network/quota.rs"]
mod quota;
#[path = "hostile_network/tls.rs"]
mod tls;

/// Held by a test while it measures rates, and by the others while they load the host, so
/// that no other test of this binary runs meanwhile (cargo runs a binary's tests in parallel).
fn measuring_alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
