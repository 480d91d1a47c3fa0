//! Binding, accepting, and stopping the listener.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use actix::Arbiter;

use super::fetch_session::FetchSessions;
use super::memory::RequestMemory;
use super::{connection, handshake, ListenerConfig, ListenerMetrics, Shared};
use crate::async_handle::AsyncNanoKafka;
use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::security::acl::Authorizer;
use crate::security::scram::LiveScramStore;

/// The sockets bound by the builder before the broker starts, so that a taken port (or a bad
/// certificate file) fails `build()` with nothing started.
#[derive(Debug)]
pub struct BoundListener {
    /// The first address (plaintext, or TLS when there is no second), then the TLS one.
    sockets: Vec<BoundSocket>,
    config: ListenerConfig,
    scram: Option<Arc<LiveScramStore>>,
}

#[derive(Debug)]
struct BoundSocket {
    socket: std::net::TcpListener,
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
}

/// Binds `config`'s addresses and reads its certificates. Anything but loopback is logged as
/// a warning: it exposes the broker to the network.
///
/// # Errors
/// `InvalidArgument` for a bad address or cap; `InvalidConfig` naming a certificate file
/// that cannot be used; `Io` when a bind fails.
pub fn bind(config: &ListenerConfig) -> Result<BoundListener> {
    config.validate()?;
    let tls = config
        .tls
        .as_ref()
        .map(|tls| tls.server_config(&[]))
        .transpose()?;
    let mut sockets = Vec::with_capacity(2);
    match &config.tls_addr {
        Some(tls_addr) => {
            sockets.push(bind_socket(config.addr(), None)?);
            sockets.push(bind_socket(tls_addr, tls)?);
        }
        None => sockets.push(bind_socket(config.addr(), tls)?),
    }
    Ok(BoundListener {
        sockets,
        config: config.clone(),
        scram: None,
    })
}

fn bind_socket(at: &str, tls: Option<Arc<rustls::ServerConfig>>) -> Result<BoundSocket> {
    let socket = std::net::TcpListener::bind(at)
        .map_err(|e| Error::io("bind the Kafka listener", std::path::Path::new(at), e))?;
    let addr = socket
        .local_addr()
        .and_then(|addr| socket.set_nonblocking(true).map(|()| addr))
        .map_err(|e| Error::io("set up the Kafka listener", std::path::Path::new(at), e))?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, tls = tls.is_some(), "the Kafka listener is bound to a \
            non-loopback address: any host that can reach it can read and write every topic");
    }
    Ok(BoundSocket { socket, addr, tls })
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

    /// Starts serving every address on a new arbiter. Call on a thread with a running actix
    /// System.
    ///
    /// # Errors
    /// `BrokerStopped` when the arbiter cannot take the accept loops.
    pub fn start(
        self,
        broker: AsyncNanoKafka,
        cluster_id: String,
        clock: SharedClock,
        quotas: crate::security::quota::ClientQuotas,
        authorizer: Option<Authorizer>,
    ) -> Result<ListenerHandle> {
        let metrics = Arc::new(ListenerMetrics::default());
        let config = self.config;
        let memory = Arc::new(RequestMemory::new(
            config.queued_max_request_bytes,
            metrics.clone(),
        ));
        let fetch_sessions = Arc::new(Mutex::new(FetchSessions::new(config.fetch_sessions)));
        let groups = Arc::new(super::groups::KafkaGroups::default());
        let quotas = Arc::new(quotas);
        let authorizer = authorizer.map(Arc::new);
        let scram = self.scram;
        let arbiter = Arbiter::with_tokio_rt(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .thread_name("nanokafka-listener")
                .build()
                .expect("a current-thread runtime with I/O and timers builds")
        });
        let mut served = Vec::with_capacity(self.sockets.len());
        for BoundSocket { socket, addr, tls } in self.sockets {
            let advertised_host = match addr.ip() {
                ip if ip.is_unspecified() => "localhost".to_owned(),
                ip => ip.to_string(),
            };
            let shared = Arc::new(Shared {
                metrics: metrics.clone(),
                advertised_host,
                advertised_port: i32::from(addr.port()),
                cluster_id: cluster_id.clone(),
                groups: groups.clone(),
                memory: memory.clone(),
                clock: clock.clone(),
                fetch_sessions: fetch_sessions.clone(),
                tls,
                config: config.clone(),
                quotas: quotas.clone(),
                authorizer: authorizer.clone(),
                scram: scram.clone(),
            });
            let (kept, broker) = (shared.clone(), broker.clone());
            let spawned = arbiter.spawn(async move {
                match tokio::net::TcpListener::from_std(socket) {
                    Ok(listener) => accept_loop(listener, broker, shared).await,
                    Err(e) => tracing::error!(%addr, error = %e, "the Kafka listener cannot start"),
                }
            });
            if !spawned {
                return Err(Error::BrokerStopped);
            }
            tracing::info!(%addr, tls = kept.tls.is_some(), "Kafka listener serving");
            served.push((addr, kept));
        }
        Ok(ListenerHandle {
            addrs: served.iter().map(|(a, s)| (*a, s.tls.is_some())).collect(),
            shared: served.swap_remove(0).1,
            arbiter,
        })
    }
}

/// A running listener. Stopping it closes the socket and every connection.
#[derive(Debug)]
pub struct ListenerHandle {
    /// Every address served, and whether it is TLS.
    addrs: Vec<(SocketAddr, bool)>,
    /// What its connections share: its metrics, and its Kafka clients' groups (which the
    /// web console reads).
    shared: Arc<Shared>,
    arbiter: Arbiter,
}

impl ListenerHandle {
    /// The first address: plaintext, or TLS when it is the only one.
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0].0
    }

    pub fn metrics(&self) -> Arc<ListenerMetrics> {
        self.shared.metrics.clone()
    }

    /// The SCRAM users, when the listener takes SCRAM logins (the web console asks for them
    /// too).
    #[cfg(feature = "console")]
    pub fn scram_users(&self) -> Option<Arc<LiveScramStore>> {
        let config = &self.shared.config;
        config
            .sasl_scram
            .then(|| self.shared.scram.clone())
            .flatten()
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
        tracing::info!(addrs = ?self.addrs, "Kafka listener stopped");
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
        // Responses are written whole; Nagle would only delay them.
        let _ = stream.set_nodelay(true);
        let (broker, shared) = (broker.clone(), shared.clone());
        match shared.tls.clone() {
            None => actix_rt::spawn(connection::serve(stream, peer, None, broker, shared, open)),
            Some(tls_config) => actix_rt::spawn(async move {
                let timeout = shared.config.sasl_authentication_timeout;
                if let Some((stream, principal)) =
                    handshake::accept(&tls_config, stream, timeout, &shared.metrics, peer).await
                {
                    connection::serve(stream, peer, principal, broker, shared, open).await;
                }
            }),
        };
    }
}
