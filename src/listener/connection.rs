//! One client connection: read requests, answer them in order, close on a bad one, and close
//! one that sits idle or does not authenticate in time.

use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::future::{select, Either};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tracing::Instrument;

use super::dispatch::{self, Outcome};
use super::frame::{self, Frame, FrameError};
use super::principal::Principal;
use super::request::ConnectionState;
use super::Shared;
use crate::async_handle::AsyncNanoKafka;
use crate::metrics::listener::OpenConnection;

/// A connection's byte stream, plaintext or TLS, split into halves that the reading and the
/// answering loop own.
pub trait Stream {
    type Reader: AsyncRead + Unpin;
    type Writer: AsyncWrite + Unpin;
    fn split(self) -> (Self::Reader, Self::Writer);
}

impl Stream for TcpStream {
    type Reader = tokio::net::tcp::OwnedReadHalf;
    type Writer = tokio::net::tcp::OwnedWriteHalf;
    fn split(self) -> (Self::Reader, Self::Writer) {
        self.into_split()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Stream for tokio_rustls::server::TlsStream<S> {
    type Reader = tokio::io::ReadHalf<Self>;
    type Writer = tokio::io::WriteHalf<Self>;
    fn split(self) -> (Self::Reader, Self::Writer) {
        tokio::io::split(self)
    }
}

/// Serves `stream` until the client closes it, a request is bad, the connection is idle for
/// `connections_max_idle`, or the listener stops. `principal` is the one its client
/// certificate gave (mutual TLS); SASL, when it authenticates, replaces it.
pub async fn serve(
    stream: impl Stream,
    peer: SocketAddr,
    principal: Option<Principal>,
    broker: AsyncNanoKafka,
    shared: Arc<Shared>,
    _open: OpenConnection,
) {
    let span = tracing::info_span!("kafka_connection", %peer);
    async move {
        let (reader, writer) = stream.split();
        let activity = Activity::default();
        let mut state = ConnectionState::new(&shared.config, peer);
        if let Some(principal) = principal {
            state.principal = principal;
        }
        let served = serve_requests(reader, writer, state, &activity, &broker, &shared);
        let idle = shared.config.connections_max_idle;
        // Dropping the loser closes the socket (or forgets the watch).
        if let Either::Right(_) = select(pin!(served), pin!(activity.idle_for(idle))).await {
            shared.metrics.closed_idle();
            tracing::info!(?idle, "closing an idle Kafka connection");
        }
        tracing::debug!("Kafka connection closed");
    }
    .instrument(span)
    .await
}

/// Whether a connection goes on after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

/// SASL authentication first, when required, then the pipelined requests.
async fn serve_requests(
    mut reader: impl AsyncRead + Unpin,
    mut writer: impl AsyncWrite + Unpin,
    mut state: ConnectionState,
    activity: &Activity,
    broker: &AsyncNanoKafka,
    shared: &Shared,
) {
    if !state.authenticated {
        let timeout = shared.config.sasl_authentication_timeout;
        let exchange = authenticate(
            &mut reader,
            &mut writer,
            &mut state,
            activity,
            broker,
            shared,
        );
        match within(timeout, exchange).await {
            Some(Flow::Continue) => {}
            Some(Flow::Close) => return,
            None => {
                shared.metrics.closed_idle();
                tracing::info!(
                    ?timeout,
                    "closing a Kafka connection that did not authenticate in time"
                );
                return;
            }
        }
    }
    pipeline(reader, writer, state, activity, broker, shared).await
}

/// Until the connection authenticates: one request at a time, each read whole under
/// `sasl_max_receive_bytes` and answered before the next is read, as Kafka mutes a connection
/// during its SASL exchange. Requests the client sent after its SaslAuthenticate wait in the
/// socket for `pipeline`, which reads them with the full frame cap.
async fn authenticate(
    reader: &mut (impl AsyncRead + Unpin),
    writer: &mut (impl AsyncWrite + Unpin),
    state: &mut ConnectionState,
    activity: &Activity,
    broker: &AsyncNanoKafka,
    shared: &Shared,
) -> Flow {
    let limit = shared.config.frame_limit_before_authentication();
    while !state.authenticated {
        let Frame { body, reservation } =
            match frame::read_request(reader, limit, &shared.memory).await {
                Ok(frame) => frame,
                Err(e) => {
                    reading_ended(e, shared);
                    return Flow::Close;
                }
            };
        activity.request_read();
        let outcome = dispatch::handle(state, broker, shared, body).await;
        let flow = deliver(writer, outcome, shared).await;
        activity.request_answered();
        drop(reservation);
        if flow == Flow::Close {
            return Flow::Close;
        }
    }
    Flow::Continue
}

/// Two loops share the task: the reader reads frames ahead into a bounded queue (so reading
/// overlaps answering), and the answerer handles them one at a time, writing each response
/// before taking the next request. A reader that meets a bad frame stops; the requests read
/// before it are still answered, then the connection closes. A response that throttles the
/// client (a quota) mutes the connection until the throttle ends: the answerer takes no
/// request and the reader reads no frame before then (Kafka mutes the channel the same way).
async fn pipeline(
    mut reader: impl AsyncRead + Unpin,
    mut writer: impl AsyncWrite + Unpin,
    mut state: ConnectionState,
    activity: &Activity,
    broker: &AsyncNanoKafka,
    shared: &Shared,
) {
    let (mut queue, mut requests) = mpsc::channel::<Frame>(shared.config.max_in_flight - 1);
    let limit = shared.config.frame_limit();
    let memory = &shared.memory;
    let muted_until: Cell<Option<Instant>> = Cell::new(None);
    let muted_until = &muted_until;
    let read = async move {
        loop {
            if let Some(until) = muted_until.get() {
                tokio::time::sleep_until(until).await;
            }
            let request = frame::read_request(&mut reader, limit, memory).await?;
            activity.request_read();
            if queue.send(request).await.is_err() {
                return Ok(());
            }
        }
    };
    let answer = async {
        while let Some(Frame { body, reservation }) = requests.next().await {
            let outcome = dispatch::handle(&mut state, broker, shared, body).await;
            let flow = deliver(&mut writer, outcome, shared).await;
            activity.request_answered();
            drop(reservation);
            if flow == Flow::Close {
                return;
            }
            if let Some(throttle) = state.throttle.take() {
                let until = Instant::now() + throttle;
                muted_until.set(Some(until));
                tokio::time::sleep_until(until).await;
            }
        }
    };
    match select(pin!(read), pin!(answer)).await {
        Either::Left((read_end, answer)) => {
            if let Err(e) = read_end {
                reading_ended(e, shared);
            }
            answer.await;
        }
        Either::Right(((), _read)) => {}
    };
}

/// Logs (and counts) why a connection stopped reading, unless the client simply closed it.
fn reading_ended(e: FrameError, shared: &Shared) {
    if !matches!(e, FrameError::Closed) {
        shared.metrics.closed_bad_request();
        tracing::warn!(error = %e, "closing the Kafka connection");
    }
}

/// Writes what a request came to, and says whether the connection goes on.
async fn deliver(
    writer: &mut (impl AsyncWrite + Unpin),
    outcome: Outcome,
    shared: &Shared,
) -> Flow {
    match outcome {
        // Flushed: a TLS stream holds what it has not yet written to the socket.
        Outcome::Respond(response) => match write_whole(writer, &response).await {
            Ok(()) => Flow::Continue,
            Err(e) => {
                tracing::debug!(error = %e, "client went away before its response");
                Flow::Close
            }
        },
        Outcome::RespondAndClose(response, reason) => {
            // The answer, then an orderly close (FIN after it), so the client reads the
            // error before it sees the end of the stream.
            if let Err(e) = write_whole(writer, &response).await {
                tracing::debug!(error = %e, "client went away before its response");
            }
            let _ = writer.shutdown().await;
            tracing::info!(%reason, "closing the Kafka connection");
            Flow::Close
        }
        Outcome::Silent => Flow::Continue,
        Outcome::SilentAndClose(reason) => {
            let _ = writer.shutdown().await;
            tracing::info!(%reason, "closing the Kafka connection");
            Flow::Close
        }
        Outcome::Close(reason) => {
            shared.metrics.closed_bad_request();
            tracing::warn!(%reason, "closing the Kafka connection");
            Flow::Close
        }
    }
}

async fn write_whole(writer: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> std::io::Result<()> {
    writer.write_all(bytes).await?;
    writer.flush().await
}

/// `work`'s output, or `None` when `limit` passes first; a limit too far off to be a time
/// (`Duration::MAX`) is none.
pub(super) async fn within<F: Future>(limit: Duration, work: F) -> Option<F::Output> {
    match Instant::now().checked_add(limit) {
        Some(deadline) => tokio::time::timeout_at(deadline, work).await.ok(),
        None => Some(work.await),
    }
}

/// What the idle limit (Kafka's `connections.max.idle.ms`) watches. A connection is active
/// while a request of its own is read and not yet answered, and idle from its last request
/// read or response written. Bytes of a frame not yet read whole do not count: a frame
/// trickled in over longer than the limit is cut off, so it cannot hold its reservation of
/// the request memory forever.
#[derive(Debug)]
struct Activity {
    last: Cell<Instant>,
    pending: Cell<usize>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            last: Cell::new(Instant::now()),
            pending: Cell::new(0),
        }
    }
}

impl Activity {
    fn request_read(&self) {
        self.pending.set(self.pending.get() + 1);
        self.last.set(Instant::now());
    }

    fn request_answered(&self) {
        self.pending.set(self.pending.get().saturating_sub(1));
        self.last.set(Instant::now());
    }

    /// Completes once the connection has been idle for `limit`; never for a limit too far
    /// off to be a time.
    async fn idle_for(&self, limit: Duration) {
        loop {
            // While a request is answered, look again a whole limit later: the answer bumps
            // `last`, and idleness is counted from it.
            let from = match self.pending.get() {
                0 => self.last.get(),
                _ => Instant::now(),
            };
            let Some(due) = from.checked_add(limit) else {
                return std::future::pending().await;
            };
            tokio::time::sleep_until(due).await;
            let idle_since = self.last.get().checked_add(limit);
            if self.pending.get() == 0 && idle_since.is_some_and(|due| due <= Instant::now()) {
                return;
            }
        }
    }
}
