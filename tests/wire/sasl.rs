//! SASL/PLAIN: the handshake, authentication, and what a connection may do before it.

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use nanokafka::ListenerConfig;

use crate::client::WireClient;
use crate::common::{listening_broker, listening_broker_with};

fn with_sasl() -> ListenerConfig {
    ListenerConfig::new("127.0.0.1:0").sasl_plain("alice", "s3cret")
}

fn handshake(mechanism: &'static str) -> SaslHandshakeRequest {
    SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism))
}

fn plain(message: &'static [u8]) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(message))
}

#[test]
fn api_versions_offers_handshake_v0_to_v1_and_authenticate_v0_to_v2() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = listening_broker_with(dir.path(), with_sasl());
    let mut client = WireClient::connect(addr);
    // Before authenticating, ApiVersions is allowed.
    let response = client.call(&ApiVersionsRequest::default(), 3);
    let range = |api: ApiKey| {
        let k = response
            .api_keys
            .iter()
            .find(|k| k.api_key == api as i16)
            .unwrap_or_else(|| panic!("{api:?} advertised"));
        (k.min_version, k.max_version)
    };
    // librdkafka enables SASL only when v0 is listed (its SASL_HANDSHAKE feature).
    assert_eq!(range(ApiKey::SaslHandshake), (0, 1));
    assert_eq!(range(ApiKey::SaslAuthenticate), (0, 2));
}

#[test]
fn plain_with_the_right_password_authenticates_at_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = listening_broker_with(dir.path(), with_sasl());
    for version in 0..=2 {
        let mut client = WireClient::connect(addr);
        let response = client.call(&handshake("PLAIN"), 1);
        assert_eq!(response.error_code, 0);
        assert_eq!(response.mechanisms, [StrBytes::from_static_str("PLAIN")]);
        let response = client.call(&plain(b"\0alice\0s3cret"), version);
        assert_eq!(
            response.error_code, 0,
            "v{version}: {:?}",
            response.error_message
        );
        assert_eq!(response.session_lifetime_ms, 0, "no re-authentication");
        let metadata = client.call(&MetadataRequest::default(), 12);
        assert!(metadata.topics.is_empty());
    }
}

#[test]
fn a_wrong_password_is_answered_58_then_the_connection_closes() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = listening_broker_with(dir.path(), with_sasl());
    for message in [&b"\0alice\0wrong"[..], b"\0mallory\0s3cret", b"garbage"] {
        let mut client = WireClient::connect(addr);
        client.call(&handshake("PLAIN"), 1);
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message));
        let response = client.call(&request, 2);
        assert_eq!(
            response.error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
        let text = response.error_message.expect("a message").to_string();
        assert!(text.contains("Authentication failed"), "{text}");
        assert!(client.closed_by_broker());
    }
}

#[test]
fn another_mechanism_is_refused_with_the_ones_offered_and_plain_still_works_after() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = listening_broker_with(dir.path(), with_sasl());
    let mut client = WireClient::connect(addr);
    for other in ["SCRAM-SHA-256", "plain", "GSSAPI"] {
        let response = client.call(
            &SaslHandshakeRequest::default().with_mechanism(other.into()),
            1,
        );
        assert_eq!(
            response.error_code,
            ResponseError::UnsupportedSaslMechanism.code()
        );
        assert_eq!(response.mechanisms, [StrBytes::from_static_str("PLAIN")]);
    }
    assert_eq!(client.call(&handshake("PLAIN"), 1).error_code, 0);
    assert_eq!(client.call(&plain(b"\0alice\0s3cret"), 1).error_code, 0);
}

#[test]
fn before_authentication_only_api_versions_and_sasl_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker_with(dir.path(), with_sasl());
    let mut client = WireClient::connect(addr);
    client.send(&MetadataRequest::default(), 12);
    assert!(client.closed_by_broker());
    // Handshake done, not yet authenticated: still closed.
    let mut client = WireClient::connect(addr);
    client.call(&handshake("PLAIN"), 1);
    client.send(&MetadataRequest::default(), 12);
    assert!(client.closed_by_broker());
    // Authenticate without a handshake: out of order, answered 34 and closed.
    let mut client = WireClient::connect(addr);
    let response = client.call(&plain(b"\0alice\0s3cret"), 2);
    assert_eq!(response.error_code, ResponseError::IllegalSaslState.code());
    assert!(client.closed_by_broker());
    // Handshake v0 (raw tokens would follow) is refused with a reason, and does not count as
    // a handshake.
    let mut client = WireClient::connect(addr);
    let response = client.call(&handshake("PLAIN"), 0);
    assert_eq!(response.error_code, ResponseError::IllegalSaslState.code());
    assert_eq!(client.call(&handshake("PLAIN"), 1).error_code, 0);
    assert!(broker.stats().unwrap().topics.is_empty());
}

#[test]
fn a_listener_without_sasl_answers_both_illegal_state_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let response = client.call(&handshake("PLAIN"), 1);
    assert_eq!(response.error_code, ResponseError::IllegalSaslState.code());
    assert!(response.mechanisms.is_empty());
    let response = client.call(&plain(b"\0alice\0s3cret"), 2);
    assert_eq!(response.error_code, ResponseError::IllegalSaslState.code());
    assert!(client
        .call(&MetadataRequest::default(), 12)
        .topics
        .is_empty());
}
