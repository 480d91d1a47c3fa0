//! One client connection: read requests, answer them in order, close on a bad one.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;

use bytes::Bytes;
use futures::channel::mpsc;
use futures::future::{select, Either};
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tracing::Instrument;

use super::dispatch::{self, ConnectionState, Outcome};
use super::frame::{self, FrameError};
use super::metrics::OpenConnection;
use super::Shared;
use crate::async_handle::AsyncNanoKafka;

/// Serves `stream` until the client closes it, a request is bad, or the listener stops.
///
/// Two loops share the task: the reader decodes frames ahead into a bounded queue (so
/// reading overlaps answering), and the answerer handles them one at a time, writing each
/// response before taking the next request. A reader that meets a bad frame stops; the
/// requests read before it are still answered, then the connection closes.
pub async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    broker: AsyncNanoKafka,
    shared: Arc<Shared>,
    _open: OpenConnection,
) {
    let span = tracing::info_span!("kafka_connection", %peer);
    async move {
        // Responses are written whole; Nagle would only delay them.
        let _ = stream.set_nodelay(true);
        let (mut reader, mut writer) = stream.into_split();
        let (mut queue, mut requests) = mpsc::channel::<Bytes>(shared.config.max_in_flight - 1);
        let limit = shared.config.max_frame_bytes;
        let read = async move {
            loop {
                let request = frame::read_request(&mut reader, limit).await?;
                if queue.send(request).await.is_err() {
                    return Ok(());
                }
            }
        };
        let answer = async {
            let mut state = ConnectionState::new(&shared.config);
            while let Some(request) = requests.next().await {
                match dispatch::handle(&mut state, &broker, &shared, request).await {
                    Outcome::Respond(response) => {
                        if let Err(e) = writer.write_all(&response).await {
                            tracing::debug!(error = %e, "client went away before its response");
                            return;
                        }
                    }
                    Outcome::RespondAndClose(response, reason) => {
                        // The answer, then an orderly close (FIN after it), so the client
                        // reads the error before it sees the end of the stream.
                        if let Err(e) = writer.write_all(&response).await {
                            tracing::debug!(error = %e, "client went away before its response");
                        }
                        let _ = writer.shutdown().await;
                        tracing::info!(%reason, "closing the Kafka connection");
                        return;
                    }
                    Outcome::Silent => {}
                    Outcome::SilentAndClose(reason) => {
                        let _ = writer.shutdown().await;
                        tracing::info!(%reason, "closing the Kafka connection");
                        return;
                    }
                    Outcome::Close(reason) => {
                        shared.metrics.closed_bad_request();
                        tracing::warn!(%reason, "closing the Kafka connection");
                        return;
                    }
                }
            }
        };
        match select(pin!(read), pin!(answer)).await {
            Either::Left((read_end, answer)) => {
                match read_end {
                    Err(FrameError::Closed) | Ok(()) => {}
                    Err(e) => {
                        shared.metrics.closed_bad_request();
                        tracing::warn!(error = %e, "closing the Kafka connection");
                    }
                }
                answer.await;
            }
            Either::Right(((), _read)) => {}
        }
        tracing::debug!("Kafka connection closed");
    }
    .instrument(span)
    .await
}
