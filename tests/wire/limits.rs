//! The limits that keep clients from holding the listener's memory and connections: the
//! frame cap before SASL authentication, the authentication deadline, the idle limit, and
//! the bound on request bytes held across all connections.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use nanokafka::{ListenerConfig, ListenerStats, NanoKafka, TopicConfig};

use crate::client::WireClient;
use crate::common::listening_broker_with;
use crate::records::fetch;

/// Long enough for any close the listener owes to have happened on a loaded machine.
const PROMPTLY: Duration = Duration::from_secs(10);

fn listener() -> ListenerConfig {
    ListenerConfig::new("127.0.0.1:0")
}

fn stats(broker: &NanoKafka) -> ListenerStats {
    broker.stats().unwrap().listener.expect("listener stats")
}

/// Polls the listener's counters until `done` holds; panics naming `what` after `PROMPTLY`.
fn wait_for(broker: &NanoKafka, what: &str, done: impl Fn(&ListenerStats) -> bool) {
    let deadline = Instant::now() + PROMPTLY;
    loop {
        let now = stats(broker);
        if done(&now) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {now:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn authenticate(client: &mut WireClient) {
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    assert_eq!(client.call(&handshake, 1).error_code, 0);
    let plain =
        SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0alice\0s3cret"));
    assert_eq!(client.call(&plain, 2).error_code, 0);
}

/// A Metadata request of at least `bytes` that creates nothing: topic names none of which
/// exist.
fn big_metadata(bytes: usize) -> MetadataRequest {
    let topics = (0..bytes / 200 + 1)
        .map(|i| {
            let name = format!("{i:0>200}");
            MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(name))))
        })
        .collect();
    MetadataRequest::default()
        .with_topics(Some(topics))
        .with_allow_auto_topic_creation(false)
}

#[test]
fn before_authentication_a_frame_over_the_sasl_cap_closes_its_connection_unread() {
    let dir = tempfile::tempdir().unwrap();
    let config = listener().sasl_plain("alice", "s3cret");
    let (broker, addr) = listening_broker_with(dir.path(), config);
    // Frames claiming 2 MiB, far under the 100 MiB frame cap, each begun and held back.
    let mut clients: Vec<_> = (0..8)
        .map(|_| {
            let mut client = WireClient::connect(addr);
            let mut begun = (2i32 << 20).to_be_bytes().to_vec();
            begun.extend_from_slice(&[0, 3, 0, 12, 0, 0, 0, 1]);
            begun.extend_from_slice(&[0; 1000]);
            client.send_bytes(&begun);
            client
        })
        .collect();
    for client in &mut clients {
        assert!(
            client.closed_within(PROMPTLY),
            "closed before its body is read"
        );
    }
    assert_eq!(stats(&broker).connections_closed_bad_request, 8);
    assert_eq!(stats(&broker).request_bytes_held, 0);
    // Once authenticated, the connection reads frames up to `max_frame_bytes`.
    let mut client = WireClient::connect(addr);
    authenticate(&mut client);
    let response = client.call(&big_metadata(600 << 10), 12);
    assert!(response.topics.iter().all(|t| t.error_code != 0));
}

#[test]
fn a_connection_that_does_not_authenticate_in_time_is_closed_and_one_that_does_stays() {
    let dir = tempfile::tempdir().unwrap();
    let deadline = Duration::from_millis(300);
    let config = listener()
        .sasl_plain("alice", "s3cret")
        .sasl_authentication_timeout(deadline);
    let (broker, addr) = listening_broker_with(dir.path(), config);
    let mut authenticated = WireClient::connect(addr);
    authenticate(&mut authenticated);
    let mut silent = WireClient::connect(addr);
    // ApiVersions is answered, but does not count as authenticating.
    silent.call(&ApiVersionsRequest::default(), 3);
    assert!(silent.closed_within(PROMPTLY));
    assert_eq!(stats(&broker).connections_closed_idle, 1);
    // The deadline is long past for the connection opened first; it still serves.
    assert!(authenticated
        .call(&MetadataRequest::default(), 12)
        .topics
        .is_empty());
}

#[test]
fn an_idle_connection_is_closed_but_not_while_its_request_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let idle = Duration::from_millis(300);
    let (broker, addr) = listening_broker_with(dir.path(), listener().connections_max_idle(idle));
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let mut quiet = WireClient::connect(addr);
    quiet.call(&ApiVersionsRequest::default(), 3);
    // A frame begun and never finished is no activity either.
    let mut trickle = WireClient::connect(addr);
    trickle.send_bytes(&[0, 0, 1, 0, 0, 3]);
    // A fetch that waits for data longer than the idle limit is not idleness.
    let mut fetching = WireClient::connect(addr);
    let waited = Instant::now();
    let response = fetching.call(&fetch("t", &[(0, 0)], 1500), 12);
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    assert!(
        waited.elapsed() >= Duration::from_millis(1400),
        "the fetch waited its max_wait_ms"
    );
    for client in [&mut quiet, &mut trickle, &mut fetching] {
        assert!(client.closed_within(PROMPTLY));
    }
    assert_eq!(stats(&broker).connections_closed_idle, 3);
}

#[test]
fn frames_being_read_hold_at_most_queued_max_request_bytes_across_connections() {
    let dir = tempfile::tempdir().unwrap();
    // Sized so that one of these frames fits in the bound and two do not.
    let request = big_metadata(600 << 10);
    let size = crate::client::encode(&request, 12, 0).len();
    let config = listener()
        .max_frame_bytes(size + 1000)
        .queued_max_request_bytes(size + 1000);
    let (broker, addr) = listening_broker_with(dir.path(), config);
    let begin = |client: &mut WireClient| {
        let (correlation_id, body) = client.encode(&request, 12);
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        let rest = frame.split_off(frame.len() / 2);
        client.send_bytes(&frame);
        (correlation_id, rest)
    };
    let mut first = WireClient::connect(addr);
    let (first_id, first_rest) = begin(&mut first);
    wait_for(&broker, "the first frame reserves its size", |s| {
        s.request_bytes_held == size as u64
    });
    let mut second = WireClient::connect(addr);
    let (second_id, second_rest) = begin(&mut second);
    // The second frame waits unread: the bound holds while it does.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_millis(300) {
        assert_eq!(stats(&broker).request_bytes_held, size as u64);
    }
    for (client, id, rest) in [
        (&mut first, first_id, first_rest),
        (&mut second, second_id, second_rest),
    ] {
        client.send_bytes(&rest);
        let answer = client.read_frame().expect("answered");
        assert_eq!(crate::client::correlation_id(&answer), id);
    }
    wait_for(&broker, "answered frames release their bytes", |s| {
        s.request_bytes_held == 0
    });
}
