//! The TLS handshake of an accepted connection, under its deadline: the stream and the
//! mutual-TLS principal, or the connection closed and logged once.

use std::sync::Arc;

use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::principal::Principal;
use super::tls::certificate_principal;
use super::ListenerMetrics;

/// A handshake's failure as logged: rustls names what went wrong in a line; anything longer
/// (an I/O error's text) is cut here, so a client cannot fill the log.
const MAX_REASON_CHARS: usize = 200;

/// The TLS handshake of an accepted connection, within `deadline`: the stream and, under
/// mutual TLS, the principal its certificate names. A failed or late handshake closes only
/// its connection (dropping the stream), logged once, and counted as a bad request or an
/// idle close.
pub(crate) async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    config: &Arc<ServerConfig>,
    stream: S,
    deadline: std::time::Duration,
    metrics: &ListenerMetrics,
    peer: std::net::SocketAddr,
) -> Option<(TlsStream<S>, Option<Principal>)> {
    let acceptor = TlsAcceptor::from(config.clone());
    match super::connection::within(deadline, acceptor.accept(stream)).await {
        Some(Ok(stream)) => {
            let principal = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(|cert| certificate_principal(cert));
            Some((stream, principal))
        }
        Some(Err(e)) => {
            metrics.closed_bad_request();
            let reason: String = e.to_string().chars().take(MAX_REASON_CHARS).collect();
            tracing::info!(%peer, %reason, "closing a Kafka connection: TLS handshake failed");
            None
        }
        None => {
            metrics.closed_idle();
            tracing::info!(%peer, ?deadline, "closing a Kafka connection: no TLS handshake in time");
            None
        }
    }
}

/// The accept path of a TLS address on bytes from anywhere, for fuzzing (`internals`
/// feature): what [`TlsAcceptCheck::accept`] found.
#[cfg(feature = "internals")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsAccepted {
    /// Whether the handshake completed.
    pub handshake: bool,
    /// Whether the client's end saw the connection close.
    pub closed: bool,
}

/// Runs [`accept`] over an in-memory stream, for fuzzing (`internals` feature).
#[cfg(feature = "internals")]
#[derive(Debug)]
pub struct TlsAcceptCheck {
    config: Arc<ServerConfig>,
    runtime: tokio::runtime::Runtime,
    metrics: ListenerMetrics,
}

#[cfg(feature = "internals")]
impl TlsAcceptCheck {
    /// # Errors
    /// As the listener's bind for bad certificate files.
    pub fn new(tls: &super::tls::TlsConfig) -> crate::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| crate::Error::io("start a runtime", std::path::Path::new(""), e))?;
        Ok(TlsAcceptCheck {
            config: tls.server_config(&[])?,
            runtime,
            metrics: ListenerMetrics::default(),
        })
    }

    /// `bytes` as everything a client sends, then the end of its stream; the server's
    /// handshake (deadline one second) and whether the connection then closes. A client
    /// that never sees the close is cut off after two seconds (`closed` false).
    pub fn accept(&self, bytes: &[u8]) -> TlsAccepted {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let second = std::time::Duration::from_secs(1);
        let peer = std::net::SocketAddr::from(([127, 0, 0, 1], 9));
        self.runtime.block_on(async {
            let (mut client, server) = tokio::io::duplex(64 << 10);
            let server = async {
                // Dropped at once: the connection's end after the handshake, either way.
                accept(&self.config, server, second, &self.metrics, peer)
                    .await
                    .is_some()
            };
            let client = async {
                let _ = client.write_all(bytes).await;
                let _ = client.shutdown().await;
                let mut sink = Vec::new();
                let mut bounded = (&mut client).take(1 << 20);
                let read = bounded.read_to_end(&mut sink);
                matches!(
                    super::connection::within(2 * second, read).await,
                    Some(Ok(_))
                )
            };
            let (handshake, closed) = futures::join!(server, client);
            TlsAccepted { handshake, closed }
        })
    }
}
