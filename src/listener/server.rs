//! Binding, accepting, and stopping the listener.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use actix::Arbiter;

use super::fetch_session::FetchSessions;
use super::memory::RequestMemory;
use super::{connection, ListenerConfig, ListenerMetrics, Shared};
use crate::async_handle::AsyncNanoKafka;
use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::security::scram::LiveScramStore;

/// A socket bound by the builder before the broker starts, so that a taken port fails
/// `build()` with nothing started.
#[derive(Debug)]
pub struct BoundListener {
    socket: std::net::TcpListener,
    addr: SocketAddr,
    config: ListenerConfig,
    scram: Option<Arc<LiveScramStore>>,
}

/// Binds `config`'s address. Anything but loopback is logged as a warning: it exposes the
/// broker to the network.
///
/// # Errors
/// `InvalidArgument` for a bad address or cap; `Io` when the bind fails.
pub fn bind(config: &ListenerConfig) -> Result<BoundListener> {
    config.validate()?;
    let socket = std::net::TcpListener::bind(config.addr()).map_err(|e| {
        Error::io(
            "bind the Kafka listener",
            std::path::Path::new(config.addr()),
            e,
        )
    })?;
    let addr = socket
        .local_addr()
        .and_then(|addr| socket.set_nonblocking(true).map(|()| addr))
        .map_err(|e| {
            Error::io(
                "set up the Kafka listener",
                std::path::Path::new(config.addr()),
                e,
            )
        })?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the Kafka listener is bound to a non-loopback address: \
            any host that can reach it can read and write every topic");
    }
    Ok(BoundListener {
        socket,
        addr,
        config: config.clone(),
        scram: None,
    })
}

impl BoundListener {
    /// Opens the SCRAM credential store of `data_dir`, which Describe/AlterUserScramCredentials
    /// manage whether or not SCRAM logins are on. With SCRAM on, a missing store is written
    /// empty: the listener starts with no users yet.
    ///
    /// # Errors
    /// `InvalidConfig` naming the store file when it cannot be read or is damaged.
    pub fn open_security(mut self, data_dir: &std::path::Path) -> Result<Self> {
        let scram = self.config.sasl_scram;
        let store =
            LiveScramStore::open(data_dir, scram).map_err(|reason| Error::InvalidConfig {
                field: "sasl_scram",
                reason,
            })?;
        if scram && store.current().users().next().is_none() {
            tracing::warn!(path = %store.path().display(), "SCRAM is on but no user has \
                credentials yet: add them with `nanokafka users add` (no restart needed)");
        }
        self.scram = Some(Arc::new(store));
        Ok(self)
    }

    /// Starts serving on a new arbiter. Call on a thread with a running actix System.
    ///
    /// # Errors
    /// `Io` when the socket cannot join the arbiter's runtime.
    pub fn start(
        self,
        broker: AsyncNanoKafka,
        cluster_id: String,
        clock: SharedClock,
    ) -> Result<ListenerHandle> {
        let metrics = Arc::new(ListenerMetrics::default());
        let advertised_host = match self.addr.ip() {
            ip if ip.is_unspecified() => "localhost".to_owned(),
            ip => ip.to_string(),
        };
        let shared = Arc::new(Shared {
            metrics: metrics.clone(),
            advertised_host,
            advertised_port: i32::from(self.addr.port()),
            cluster_id,
            groups: Default::default(),
            memory: RequestMemory::new(self.config.queued_max_request_bytes, metrics.clone()),
            clock,
            fetch_sessions: Mutex::new(FetchSessions::new(self.config.fetch_sessions)),
            scram: self.scram,
            config: self.config,
        });
        let arbiter = Arbiter::with_tokio_rt(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .thread_name("nanokafka-listener")
                .build()
                .expect("a current-thread runtime with I/O and timers builds")
        });
        let (socket, addr) = (self.socket, self.addr);
        let kept = shared.clone();
        let spawned = arbiter.spawn(async move {
            match tokio::net::TcpListener::from_std(socket) {
                Ok(listener) => accept_loop(listener, broker, shared).await,
                Err(e) => tracing::error!(%addr, error = %e, "the Kafka listener cannot start"),
            }
        });
        if !spawned {
            return Err(Error::BrokerStopped);
        }
        tracing::info!(%addr, "Kafka listener serving");
        Ok(ListenerHandle {
            addr,
            shared: kept,
            arbiter,
        })
    }
}

/// A running listener. Stopping it closes the socket and every connection.
#[derive(Debug)]
pub struct ListenerHandle {
    addr: SocketAddr,
    /// What its connections share: its metrics, and its Kafka clients' groups (which the
    /// web console reads).
    shared: Arc<Shared>,
    arbiter: Arbiter,
}

impl ListenerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn metrics(&self) -> Arc<ListenerMetrics> {
        self.shared.metrics.clone()
    }

    /// The Kafka clients' groups, read-only (the web console's Groups view).
    #[cfg(feature = "console")]
    pub fn kafka_groups(&self) -> super::KafkaGroupsReader {
        super::KafkaGroupsReader(self.shared.clone())
    }

    /// Stops accepting and drops every connection (their runtime goes with the arbiter), then
    /// waits for the listener's thread. A request being answered is abandoned: its client sees
    /// the connection close, as when a Kafka broker stops.
    pub fn stop(self) {
        self.arbiter.stop();
        let _ = self.arbiter.join();
        tracing::info!(addr = %self.addr, "Kafka listener stopped");
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    broker: AsyncNanoKafka,
    shared: Arc<Shared>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // EMFILE and friends: keep serving the connections we have; the next accept
                // may succeed once one closes. Back off so a persistent error does not spin.
                tracing::warn!(error = %e, "accepting a Kafka connection failed");
                actix_rt::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        shared.metrics.accepted();
        if shared.metrics.open_connections() >= shared.config.max_connections as u64 {
            shared.metrics.refused();
            tracing::warn!(%peer, max_connections = shared.config.max_connections,
                "refusing a Kafka connection: too many open");
            drop(stream);
            continue;
        }
        let open = shared.metrics.open_connection();
        actix_rt::spawn(connection::serve(
            stream,
            peer,
            broker.clone(),
            shared.clone(),
            open,
        ));
    }
}
