//! The web console (`console` feature): pages and a JSON API over a running embedded broker's
//! topics, records and groups, served by actix-web on the broker's own actix-rt System (its
//! HTTP workers are actix arbiters; no second runtime). Started by the composition root when
//! the builder has [`crate::NanoKafkaBuilder::console`], bound before anything starts (a taken
//! port fails `build`), stopped with the broker. docs/console.md is the API reference.
//!
//! It reads the broker through an [`AsyncNanoKafka`] (stats, batch fetches, offsets for
//! timestamps), never through the Kafka protocol, and every read is bounded by a record count
//! and a byte budget. Writes (`console_writes`) are refused with 403 unless enabled.
//!
//! The parts: `routes` (the server, its routes and limits), `request` (errors, and HTTP Basic
//! when the listener has SASL/PLAIN), `views` (overview, topics, groups), `records` (record pages and search),
//! `field` (how a key, value or header is rendered), `sampler` (the charts' series, sampled
//! only while the API is used), `writes`, `schemas` (the Schemas view and the decoding of
//! framed values, with the `schema-registry` feature), and `assets` (the embedded pages).

mod assets;
mod field;
mod records;
mod request;
mod routes;
mod sampler;
mod schemas;
mod views;
mod writes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::async_handle::AsyncNanoKafka;
use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::listener::PlainCredentials;

pub(crate) use sampler::Sampler;

/// How long after the API's last request the sampler that feeds the charts keeps running
/// (on the broker's clock); the next request starts it again.
pub const CONSOLE_IDLE_AFTER: Duration = Duration::from_secs(60);
/// How often the sampler takes a sample.
pub const CONSOLE_SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// The console's settings, from the builder.
#[derive(Debug, Clone)]
pub(crate) struct ConsoleConfig {
    /// `host:port`, or a bare port (on loopback).
    pub addr: String,
    /// Whether the write routes (create/alter/delete topic, produce, reset, delete records)
    /// are served; 403 otherwise.
    pub writes: bool,
    /// The sampler's period (tests shorten it).
    pub sample_every: Duration,
    /// How long the sampler runs after the last API request.
    pub idle_after: Duration,
    /// HTTPS with these certificates ([`crate::NanoKafkaBuilder::tls`]); HTTP without.
    pub tls: Option<crate::listener::TlsConfig>,
}

impl ConsoleConfig {
    pub fn new(addr: String) -> Self {
        ConsoleConfig {
            addr,
            writes: false,
            sample_every: CONSOLE_SAMPLE_EVERY,
            idle_after: CONSOLE_IDLE_AFTER,
            tls: None,
        }
    }
}

/// What the console reports about the broker beside what its handle answers.
#[derive(Debug, Clone)]
pub(crate) struct BrokerFacts {
    pub data_dir: PathBuf,
    /// The fsync policy in `FsyncPolicy`'s `Display` form (as `serve --fsync` takes it).
    pub fsync: String,
    pub listener: Option<SocketAddr>,
    /// The listener's SASL/PLAIN user: the console then asks for it with HTTP Basic.
    pub credentials: Option<PlainCredentials>,
    /// The listener's SCRAM users, when it takes SCRAM logins: the console then asks for one
    /// of them with HTTP Basic.
    pub scram: Option<Arc<crate::security::scram::LiveScramStore>>,
    pub clock: SharedClock,
    /// When the broker started, on `clock`.
    pub started_ms: u64,
    /// The listener's Kafka client groups (their members, protocol and state), when it runs.
    pub kafka_groups: Option<crate::listener::KafkaGroupsReader>,
}

/// A socket bound before the broker starts.
#[derive(Debug)]
pub(crate) struct BoundConsole {
    socket: std::net::TcpListener,
    addr: SocketAddr,
    config: ConsoleConfig,
    /// Read from the certificate files at bind, so a bad one fails the build.
    tls: Option<Arc<rustls::ServerConfig>>,
}

/// Binds the console's address: `host:port`, or a bare port (`8080`, `:8080`) on loopback
/// (`127.0.0.1`): the console is reachable from other hosts only when an address says so.
/// `InvalidArgument` for anything else, `Io` when the bind fails. Anything but loopback is
/// logged as a warning.
pub(crate) fn bind(config: &ConsoleConfig) -> Result<BoundConsole> {
    let tls = config
        .tls
        .as_ref()
        .map(|tls| tls.server_config(&[b"http/1.1"]))
        .transpose()?;
    let Some(to_bind) = crate::listener::http_bind_addr(&config.addr) else {
        return Err(Error::InvalidArgument {
            name: "console",
            reason: format!(
                "{:?} is neither host:port nor a port (e.g. 127.0.0.1:8080, or 8080 for loopback)",
                config.addr
            ),
        });
    };
    let path = std::path::Path::new(&config.addr);
    let socket = std::net::TcpListener::bind(&to_bind)
        .map_err(|e| Error::io("bind the web console", path, e))?;
    let addr = socket
        .local_addr()
        .and_then(|addr| socket.set_nonblocking(true).map(|()| addr))
        .map_err(|e| Error::io("set up the web console", path, e))?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the web console is bound to a non-loopback address: \
            any host that can reach it can read every topic");
    }
    Ok(BoundConsole {
        socket,
        addr,
        config: config.clone(),
        tls,
    })
}

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct Console {
    pub broker: AsyncNanoKafka,
    pub facts: BrokerFacts,
    pub writes: bool,
    pub sampler: Arc<Sampler>,
    /// Bound to a loopback address: requests must name a loopback host (`request::admit`).
    pub loopback: bool,
    /// The last SCRAM user admitted (`request::ScramLogin`).
    pub scram_login: request::ScramLogin,
}

impl BoundConsole {
    /// Starts serving. Call on a thread with a running actix System (the broker's).
    ///
    /// # Errors
    /// `Io` when the server cannot take the socket.
    pub fn start(self, broker: AsyncNanoKafka, facts: BrokerFacts) -> Result<ConsoleHandle> {
        let sampler = Arc::new(Sampler::new(
            broker.clone(),
            facts.clock.clone(),
            self.config.sample_every,
            self.config.idle_after,
        ));
        let console = Arc::new(Console {
            broker,
            facts,
            writes: self.config.writes,
            sampler,
            loopback: self.addr.ip().is_loopback(),
            scram_login: request::ScramLogin::default(),
        });
        let addr = self.addr;
        let server = routes::server(console, self.socket, self.tls)
            .map_err(|e| Error::io("start the web console", std::path::Path::new(""), e))?;
        let handle = server.handle();
        actix_rt::spawn(server);
        let https = self.config.tls.is_some();
        tracing::info!(%addr, writes = self.config.writes, https, "web console serving");
        Ok(ConsoleHandle { addr, handle })
    }
}

/// A running console.
pub(crate) struct ConsoleHandle {
    addr: SocketAddr,
    handle: actix_web::dev::ServerHandle,
}

impl std::fmt::Debug for ConsoleHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleHandle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ConsoleHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server (requests in flight are dropped) and waits for it. Call off the
    /// broker's threads, while its System still runs.
    pub fn stop(self) {
        futures::executor::block_on(self.handle.stop(false));
        tracing::info!(addr = %self.addr, "web console stopped");
    }
}
