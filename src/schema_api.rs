//! The schema registry's REST API (`schema-registry` feature): Confluent Schema Registry's
//! endpoints over the registry of [`crate::schemas`], served by actix-web on the broker's
//! actix-rt System (as the console is), started by the composition root when the builder has
//! [`crate::NanoKafkaBuilder::schema_registry`]. docs/schema-registry.md is the reference.
//!
//! The registry's state is the broker's [`SchemaStore`] (the replay of `_schemas`): every
//! request first catches up with the topic, and a change appends its records, then applies
//! them; one request at a time holds the state, so ids and versions are taken in order.
//!
//! The parts: `routes` (the server, its routes and Confluent's JSON shapes), and here the
//! binding.

mod routes;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::async_handle::SchemaStore;
use crate::error::{Error, Result};

/// The registry's settings, from the builder.
#[derive(Debug, Clone)]
pub(crate) struct SchemaRegistryConfig {
    /// `host:port`, or a bare port (on loopback).
    pub addr: String,
}

/// A registry bound to its address, not serving yet.
#[derive(Debug)]
pub(crate) struct BoundRegistry {
    socket: std::net::TcpListener,
    addr: SocketAddr,
}

/// Binds the registry's address: `host:port`, or a bare port on loopback. `InvalidArgument`
/// for anything else, `Io` when the bind fails; anything but loopback is logged as a warning.
pub(crate) fn bind(config: &SchemaRegistryConfig) -> Result<BoundRegistry> {
    let Some(to_bind) = crate::listener::http_bind_addr(&config.addr) else {
        return Err(Error::InvalidArgument {
            name: "schema_registry",
            reason: format!(
                "{:?} is neither host:port nor a port (e.g. 127.0.0.1:8081, or 8081 for loopback)",
                config.addr
            ),
        });
    };
    let path = std::path::Path::new(&config.addr);
    let socket = std::net::TcpListener::bind(&to_bind)
        .map_err(|e| Error::io("bind the schema registry", path, e))?;
    let addr = socket
        .local_addr()
        .and_then(|addr| socket.set_nonblocking(true).map(|()| addr))
        .map_err(|e| Error::io("set up the schema registry", path, e))?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the schema registry is bound to a non-loopback address: \
            any host that can reach it can register and delete schemas");
    }
    Ok(BoundRegistry { socket, addr })
}

impl BoundRegistry {
    /// Starts serving. Call on a thread with a running actix System (the broker's).
    ///
    /// # Errors
    /// `Io` when the server cannot take the socket.
    pub fn start(self, store: Arc<SchemaStore>) -> Result<RegistryHandle> {
        let server = routes::server(store, self.socket)
            .map_err(|e| Error::io("start the schema registry", std::path::Path::new(""), e))?;
        let handle = server.handle();
        actix_rt::spawn(server);
        tracing::info!(addr = %self.addr, "schema registry serving");
        Ok(RegistryHandle {
            addr: self.addr,
            handle,
        })
    }
}

/// A running registry.
pub(crate) struct RegistryHandle {
    addr: SocketAddr,
    handle: actix_web::dev::ServerHandle,
}

impl std::fmt::Debug for RegistryHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryHandle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RegistryHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server and waits for it. Call off the broker's threads, while its System
    /// still runs.
    pub fn stop(self) {
        futures::executor::block_on(self.handle.stop(false));
        tracing::info!(addr = %self.addr, "schema registry stopped");
    }
}
