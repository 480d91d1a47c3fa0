//! The client side of a SCRAM login (RFC 5802), over the wire client (`tests/wire/client.rs`,
//! mounted as the test crate's `client` module): what the hostile-network flood and the
//! `nanokafka users` tests log in with, independently of the broker's own exchange code.

#![allow(dead_code)] // each test binary uses the part it needs

use std::net::SocketAddr;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use nanokafka::ScramMechanism;

use crate::client::WireClient;

pub fn authenticate(bytes: Vec<u8>) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes))
}

/// The client-final message for `password`, after `client_first_bare` and `server_first`.
pub fn client_final(
    mechanism: ScramMechanism,
    password: &str,
    client_first_bare: &str,
    server_first: &str,
) -> String {
    let field = |name: &str| {
        server_first
            .split(',')
            .find_map(|f| f.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {server_first}"))
    };
    let salt = BASE64.decode(field("s=")).unwrap();
    let iterations: u32 = field("i=").parse().unwrap();
    let without_proof = format!("c=biws,r={}", field("r="));
    let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
    let client_key = mechanism.hmac_of(&salted, b"Client Key");
    let auth = format!("{client_first_bare},{server_first},{without_proof}");
    let signature = mechanism.hmac_of(&mechanism.hash(&client_key), auth.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(k, s)| k ^ s)
        .collect();
    format!("{without_proof},p={}", BASE64.encode(proof))
}

/// Logs in as `user` with `password`: the connection, authenticated, or the error code of
/// the step that failed.
pub fn login(
    addr: SocketAddr,
    mechanism: ScramMechanism,
    user: &str,
    password: &str,
) -> Result<WireClient, i16> {
    let mut client = WireClient::connect(addr);
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism.name()));
    let answer = client.call(&handshake, 1);
    if answer.error_code != 0 {
        return Err(answer.error_code);
    }
    let bare = format!("n={user},r=testnonce");
    let answer = client.call(&authenticate(format!("n,,{bare}").into_bytes()), 2);
    if answer.error_code != 0 {
        return Err(answer.error_code);
    }
    let server_first = String::from_utf8(answer.auth_bytes.to_vec()).unwrap();
    let last = client_final(mechanism, password, &bare, &server_first);
    let answer = client.call(&authenticate(last.into_bytes()), 2);
    match answer.error_code {
        0 => Ok(client),
        code => Err(code),
    }
}
