//! The listener beyond loopback, under clients that mean harm: each part of its security has
//! a module here (`tls`: what reaches a TLS port that is not a TLS client), and in each a good
//! client keeps being served, every record delivered, while the hostile ones are turned away
//! at no cost but their own connections.

#[path = "common/clients.rs"]
mod clients;
#[path = "common/tls.rs"]
mod tls_certs;

#[path = "hostile_network/tls.rs"]
mod tls;
