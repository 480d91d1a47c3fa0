//! A minimal Kafka client for the listener's protocol tests: it encodes requests and decodes
//! responses with kafka-protocol (an independent codec), over a blocking socket with a
//! timeout, so a test can send exactly the bytes it means, including bad ones.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// How long any read waits before the test fails: a broker that never answers is a bug.
const READ_TIMEOUT: Duration = Duration::from_secs(20);

pub struct WireClient {
    stream: TcpStream,
    next_correlation_id: i32,
    /// The `client.id` every request carries (quotas are keyed on it).
    client_id: &'static str,
}

impl WireClient {
    pub fn connect(addr: SocketAddr) -> Self {
        Self::connect_as(addr, "wire-test")
    }

    /// A client whose requests carry `client_id`.
    pub fn connect_as(addr: SocketAddr, client_id: &'static str) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        WireClient {
            stream,
            next_correlation_id: 1,
            client_id,
        }
    }

    /// Sends `request` as version `version` and reads its response.
    pub fn call<R: Request>(&mut self, request: &R, version: i16) -> R::Response
    where
        R::Response: Decodable,
    {
        let correlation_id = self.send(request, version);
        let mut body = self.read_frame().expect("the broker answered");
        let header_version = match R::KEY {
            k if k == ApiKey::ApiVersions as i16 => 0,
            _ => R::Response::header_version(version),
        };
        let header = ResponseHeader::decode(&mut body, header_version).unwrap();
        assert_eq!(
            header.correlation_id, correlation_id,
            "responses come back in order"
        );
        R::Response::decode(&mut body, version).unwrap()
    }

    /// Sends `request` without reading; returns its correlation id.
    pub fn send<R: Request>(&mut self, request: &R, version: i16) -> i32 {
        let (correlation_id, body) = self.encode(request, version);
        self.send_raw(&body);
        correlation_id
    }

    /// The next request's correlation id and its frame body (without the size), unsent.
    pub fn encode<R: Request>(&mut self, request: &R, version: i16) -> (i32, BytesMut) {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let body = encode_as(request, version, correlation_id, self.client_id);
        (correlation_id, body)
    }

    /// Sends `body` with its size prefix, as it is.
    pub fn send_raw(&mut self, body: &[u8]) {
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.put_slice(body);
        self.stream.write_all(&frame).unwrap();
    }

    /// Sends bytes that need not be a frame at all.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next response frame, or `None` when the broker closed the connection.
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        if self.stream.read_exact(&mut size).is_err() {
            return None;
        }
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }

    /// True when the broker closes the connection (end of file or a reset) within `wait`;
    /// false when the connection is still open after it, or sends a byte.
    pub fn closed_within(&mut self, wait: Duration) -> bool {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let mut byte = [0u8; 1];
        let closed = match self.stream.read(&mut byte) {
            Ok(n) => n == 0,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        };
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        closed
    }

    /// True when the broker has closed the connection (a read returns end of file).
    pub fn closed_by_broker(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0) | Err(_))
    }
}

/// The correlation id at the start of a response frame.
pub fn correlation_id(frame: &Bytes) -> i32 {
    frame.clone().get_i32()
}

/// A request's frame body (without the size) as this client sends it.
pub fn encode<R: Request>(request: &R, version: i16, correlation_id: i32) -> BytesMut {
    encode_as(request, version, correlation_id, "wire-test")
}

/// As [`encode`], from a client that calls itself `client_id`.
pub fn encode_as<R: Request>(
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: &'static str,
) -> BytesMut {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(client_id)));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, R::header_version(version))
        .unwrap();
    request.encode(&mut body, version).unwrap();
    body
}
