//! Kafka's framing: every request and response is a 4-byte big-endian size, then that many
//! bytes. A request's bytes start with its header: api key (i16), api version (i16),
//! correlation id (i32), then the client id and, in flexible versions, tagged fields.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::memory::{RequestMemory, Reservation};

/// The smallest request: api key, api version and correlation id.
pub const MIN_REQUEST_BYTES: usize = 8;

/// Why a connection stops reading.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The client closed the connection between requests: a normal end.
    #[error("connection closed by the client")]
    Closed,
    #[error("request of {size} bytes is over the {limit}-byte limit")]
    TooLarge { size: i64, limit: usize },
    #[error("request of {size} bytes is shorter than a request header")]
    TooSmall { size: i64 },
    #[error("connection closed inside a request ({read} of {size} bytes read)")]
    Truncated { read: usize, size: usize },
    #[error("reading the socket: {0}")]
    Io(#[source] std::io::Error),
}

/// A request frame read whole, with its share of the request memory.
#[derive(Debug)]
pub struct Frame {
    /// The frame's bytes after the size.
    pub body: Bytes,
    /// Held until the request has been answered.
    pub reservation: Reservation,
}

/// Reads one request frame (its body, without the size) of at most `limit` bytes, after
/// reserving its size in `memory` (which may wait for other frames to be answered).
///
/// The buffer grows as bytes arrive rather than being sized from the claimed length, so a
/// client that announces 100 MiB and sends nothing holds no more memory than it sent.
pub async fn read_request<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit: usize,
    memory: &RequestMemory,
) -> Result<Frame, FrameError> {
    let mut size = [0u8; 4];
    match reader.read_exact(&mut size).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(FrameError::Io(e)),
    }
    let size = i32::from_be_bytes(size) as i64;
    if size < MIN_REQUEST_BYTES as i64 {
        return Err(FrameError::TooSmall { size });
    }
    // A limit past what an i32 size can say is no limit beyond the wire's own.
    if size > i64::try_from(limit).unwrap_or(i64::MAX) {
        return Err(FrameError::TooLarge { size, limit });
    }
    // Checked above: 8 to 2^31 - 1.
    let reservation = memory.reserve(size as u32).await;
    let size = size as usize;
    // Start small; `read_buf` grows the buffer with what actually arrives.
    let mut body = BytesMut::with_capacity(size.min(64 << 10));
    while body.len() < size {
        if body.capacity() == body.len() {
            body.reserve((size - body.len()).min(body.len().max(64 << 10)));
        }
        let want = size - body.len();
        let mut limited = (&mut *reader).take(want as u64);
        match limited.read_buf(&mut body).await {
            Ok(0) => {
                return Err(FrameError::Truncated {
                    read: body.len(),
                    size,
                })
            }
            Ok(_) => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(Frame {
        body: body.freeze(),
        reservation,
    })
}

/// Prefixes `body` (already encoded after 4 reserved bytes) with its size.
pub fn seal_response(mut frame: BytesMut) -> Bytes {
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(size: i32, body: &[u8]) -> Vec<u8> {
        let mut bytes = size.to_be_bytes().to_vec();
        bytes.extend_from_slice(body);
        bytes
    }

    fn memory() -> RequestMemory {
        RequestMemory::new(usize::MAX, Default::default())
    }

    fn read(bytes: Vec<u8>, limit: usize) -> Result<Bytes, FrameError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(read_request(&mut bytes.as_slice(), limit, &memory()))
            .map(|frame| frame.body)
    }

    #[test]
    fn a_whole_frame_is_read() {
        let body = [7u8; 20];
        assert_eq!(read(framed(20, &body), 100).unwrap().as_ref(), &body);
    }

    #[test]
    fn sizes_outside_the_limits_are_refused_before_the_body_is_read() {
        assert!(matches!(
            read(framed(101, &[]), 100),
            Err(FrameError::TooLarge { size: 101, .. })
        ));
        assert!(matches!(
            read(framed(-1, &[]), 100),
            Err(FrameError::TooSmall { size: -1 })
        ));
        assert!(matches!(
            read(framed(3, &[1, 2, 3]), 100),
            Err(FrameError::TooSmall { .. })
        ));
    }

    #[test]
    fn a_connection_closed_mid_frame_is_truncated_and_between_frames_is_closed() {
        assert!(matches!(
            read(framed(50, &[1; 10]), 100),
            Err(FrameError::Truncated { read: 10, size: 50 })
        ));
        assert!(matches!(read(vec![], 100), Err(FrameError::Closed)));
        assert!(matches!(read(vec![0, 0], 100), Err(FrameError::Closed)));
    }

    #[test]
    fn a_large_claim_with_little_data_holds_little_memory() {
        let bytes = framed(90 << 20, &[1; 1000]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let err = rt.block_on(read_request(&mut bytes.as_slice(), 100 << 20, &memory()));
        assert!(matches!(err, Err(FrameError::Truncated { read: 1000, .. })));
    }

    #[test]
    fn a_frame_holds_its_size_of_the_request_memory_until_dropped() {
        let metrics = std::sync::Arc::new(super::super::ListenerMetrics::default());
        let memory = RequestMemory::new(1000, metrics.clone());
        let bytes = framed(20, &[7; 20]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let frame = rt
            .block_on(read_request(&mut bytes.as_slice(), 100, &memory))
            .unwrap();
        assert_eq!(metrics.snapshot().request_bytes_held, 20);
        drop(frame);
        assert_eq!(metrics.snapshot().request_bytes_held, 0);
        // Refused before its body is read: nothing reserved.
        let too_large = framed(101, &[]);
        let refused = rt.block_on(read_request(&mut too_large.as_slice(), 100, &memory));
        assert!(refused.is_err());
        assert_eq!(metrics.snapshot().request_bytes_held, 0);
    }
}
