//! The listener beyond loopback, facing clients that misbehave on purpose, one module per
//! part: `auth` (a flood of failed SASL authentications beside a well-behaved client).

#[path = "wire/client.rs"]
#[allow(dead_code)] // the part these tests use
mod client;
#[path = "common/clients.rs"]
mod clients;
#[path = "common/scram_client.rs"]
mod scram_client;

#[path = "hostile_network/auth.rs"]
mod auth;
