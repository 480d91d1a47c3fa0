//! ApiVersions, Metadata, and what happens to requests the listener cannot serve.

use bytes::BufMut;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;
use nanokafka::AutoCreate;
use nanokafka::{ListenerConfig, TopicConfig};

use crate::client::{correlation_id, WireClient};
use crate::common::{listening_broker, listening_broker_with};

fn topic(name: &str) -> MetadataRequestTopic {
    MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(name.into()))))
}

#[test]
fn api_versions_lists_every_served_api_with_a_range_the_codec_supports() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    for version in 0..=4 {
        let response = client.call(&ApiVersionsRequest::default(), version);
        assert_eq!(response.error_code, 0, "v{version}");
        let metadata = response
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::Metadata as i16)
            .expect("Metadata is advertised");
        assert_eq!((metadata.min_version, metadata.max_version), (0, 12));
        for api in &response.api_keys {
            let key = ApiKey::try_from(api.api_key).expect("a known API");
            let codec = key.valid_versions();
            assert!(
                codec.min <= api.min_version && api.max_version <= codec.max,
                "{key:?} v{}..v{} is outside the codec's v{}..v{}",
                api.min_version,
                api.max_version,
                codec.min,
                codec.max
            );
        }
    }
}

#[test]
fn an_unsupported_api_versions_version_gets_error_35_in_v0_and_the_connection_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    // ApiVersions v99: a header the broker cannot know, from a client newer than it.
    let mut request = bytes::BytesMut::new();
    request.put_i16(ApiKey::ApiVersions as i16);
    request.put_i16(99);
    request.put_i32(7);
    request.put_slice(&[0, 0, 0, 0, 0, 0]);
    client.send_raw(&request);
    let mut frame = client
        .read_frame()
        .expect("an answer, not a closed connection");
    assert_eq!(correlation_id(&frame), 7);
    let _ = bytes::Buf::get_i32(&mut frame);
    let response = ApiVersionsResponse::decode(&mut frame, 0).unwrap();
    assert_eq!(
        response.error_code,
        ResponseError::UnsupportedVersion.code()
    );
    assert!(
        !response.api_keys.is_empty(),
        "the full table comes with the error"
    );
    // The connection still serves.
    let again = client.call(&ApiVersionsRequest::default(), 3);
    assert_eq!(again.error_code, 0);
}

#[test]
fn metadata_names_this_broker_as_leader_and_controller_of_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("orders", TopicConfig::default().partitions(3))
        .unwrap();
    let mut client = WireClient::connect(addr);
    for version in [0, 1, 4, 9, 12] {
        // Every topic: an empty list in v0, a null one later.
        let all = match version {
            0 => MetadataRequest::default().with_topics(Some(vec![])),
            _ => MetadataRequest::default().with_topics(None),
        };
        let response = client.call(&all, version);
        assert_eq!(response.brokers.len(), 1, "v{version}");
        assert_eq!(response.brokers[0].port, i32::from(addr.port()));
        assert_eq!(response.brokers[0].host.as_str(), "127.0.0.1");
        let orders = &response.topics[0];
        assert_eq!(orders.name.as_ref().unwrap().0.as_str(), "orders");
        assert_eq!(orders.error_code, 0);
        let partitions: Vec<i32> = orders
            .partitions
            .iter()
            .map(|p| p.partition_index)
            .collect();
        assert_eq!(partitions, [0, 1, 2], "v{version}");
        assert!(orders.partitions.iter().all(|p| p.leader_id.0 == 0));
        if version >= 7 {
            // Older versions do not carry the epoch.
            assert!(orders.partitions.iter().all(|p| p.leader_epoch == 0));
        }
        if version >= 1 {
            assert_eq!(response.controller_id.0, 0);
        }
    }
}

#[test]
fn metadata_creates_an_unknown_topic_when_the_client_allows_it_and_not_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let refused = MetadataRequest::default()
        .with_topics(Some(vec![topic("not-asked")]))
        .with_allow_auto_topic_creation(false);
    let response = client.call(&refused, 9);
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert!(!broker.stats().unwrap().topics.contains_key("not-asked"));

    let allowed = MetadataRequest::default()
        .with_topics(Some(vec![topic("made-on-demand")]))
        .with_allow_auto_topic_creation(true);
    let response = client.call(&allowed, 9);
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(response.topics[0].partitions.len(), 1);
    broker.produce("made-on-demand", &1u64).unwrap();

    let bad_name = MetadataRequest::default()
        .with_topics(Some(vec![topic("../escape")]))
        .with_allow_auto_topic_creation(true);
    let response = client.call(&bad_name, 9);
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::InvalidTopicException.code()
    );
}

#[test]
fn a_listener_without_auto_create_reports_unknown_topics() {
    let dir = tempfile::tempdir().unwrap();
    let config = ListenerConfig::new("127.0.0.1:0").auto_create_topics(AutoCreate::Off);
    let (broker, addr) = listening_broker_with(dir.path(), config);
    let mut client = WireClient::connect(addr);
    let request = MetadataRequest::default().with_topics(Some(vec![topic("nope")]));
    let response = client.call(&request, 12);
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert!(broker.stats().unwrap().topics.is_empty());
}

#[test]
fn bad_requests_close_only_their_own_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let mut bystander = WireClient::connect(addr);
    let bad: Vec<(&str, Vec<u8>)> = vec![
        (
            "unknown API key",
            [&[0x7f, 0x00, 0, 0][..], &[0, 0, 0, 1, 0xff, 0xff]].concat(),
        ),
        (
            "unserved version",
            [&[0, 3, 0x40, 0][..], &[0, 0, 0, 1, 0xff, 0xff]].concat(),
        ),
        ("truncated body", vec![0, 3, 0, 9, 0, 0, 0, 1, 0, 4, b'a']),
        (
            "frame over the cap",
            ((200u32 << 20).to_be_bytes()).to_vec(),
        ),
        ("negative size", (-5i32).to_be_bytes().to_vec()),
    ];
    for (what, bytes) in bad {
        let mut client = WireClient::connect(addr);
        if what.contains("size") || what.contains("cap") {
            client.send_bytes(&bytes);
        } else {
            client.send_raw(&bytes);
        }
        assert!(
            client.closed_by_broker(),
            "{what}: the connection is closed"
        );
    }
    let response = bystander.call(&MetadataRequest::default(), 12);
    assert!(response.topics.is_empty());
    let stats = broker.stats().unwrap().listener.expect("listener stats");
    assert_eq!(stats.connections_closed_bad_request, 5);
    assert_eq!(stats.requests.get("Metadata"), Some(&1));
}

#[test]
fn extreme_caps_serve_or_are_refused_at_build() {
    // No frame cap beyond the wire's own: requests are still read.
    let dir = tempfile::tempdir().unwrap();
    let config = ListenerConfig::new("127.0.0.1:0")
        .max_frame_bytes(usize::MAX)
        .max_connections(usize::MAX)
        .max_in_flight(nanokafka::MAX_IN_FLIGHT);
    let (_broker, addr) = listening_broker_with(dir.path(), config);
    let response = WireClient::connect(addr).call(&MetadataRequest::default(), 12);
    assert!(response.topics.is_empty());

    for config in [
        ListenerConfig::new("127.0.0.1:0").max_in_flight(usize::MAX),
        ListenerConfig::new("127.0.0.1:0").max_in_flight(0),
        ListenerConfig::new("127.0.0.1:0").max_frame_bytes(0),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let built = nanokafka::NanoKafka::builder()
            .data_dir(dir.path())
            .listener(config.clone())
            .build();
        assert!(
            matches!(built, Err(nanokafka::Error::InvalidArgument { .. })),
            "{config:?}"
        );
    }
}

#[test]
fn num_partitions_sizes_the_topics_the_listener_creates_without_a_count() {
    let dir = tempfile::tempdir().unwrap();
    let broker = nanokafka::NanoKafka::builder()
        .data_dir(dir.path())
        .listen("127.0.0.1:0")
        .num_partitions(4)
        .build()
        .unwrap();
    let mut client = WireClient::connect(broker.listener_addr().unwrap());
    let allowed = MetadataRequest::default()
        .with_topics(Some(vec![topic("auto")]))
        .with_allow_auto_topic_creation(true);
    let response = client.call(&allowed, 9);
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(response.topics[0].partitions.len(), 4);
    assert_eq!(broker.list_topics().unwrap()["auto"].partitions, 4);

    // CreateTopics with -1 takes it too; an explicit count is kept.
    let request = crate::admin::create(vec![
        crate::admin::creatable("defaulted", -1),
        crate::admin::creatable("explicit", 2),
    ]);
    let response = client.call(&request, 4);
    assert!(response.topics.iter().all(|t| t.error_code == 0));
    let topics = broker.list_topics().unwrap();
    assert_eq!(topics["defaulted"].partitions, 4);
    assert_eq!(topics["explicit"].partitions, 2);
    // The broker's configs say so, in Kafka's name.
    let described = client.call(
        &crate::admin::describe(vec![crate::admin::resource(4, "0", None)], false),
        4,
    );
    let num_partitions = crate::admin::value_of(&described.results[0], "num.partitions");
    assert_eq!(num_partitions, Some("4"));
    // Topics created through the API name their own count.
    broker
        .create_topic("native", TopicConfig::default())
        .unwrap();
    assert_eq!(broker.list_topics().unwrap()["native"].partitions, 1);

    for refused in [0, nanokafka::MAX_PARTITIONS + 1] {
        let dir = tempfile::tempdir().unwrap();
        let built = nanokafka::NanoKafka::builder()
            .data_dir(dir.path())
            .listen("127.0.0.1:0")
            .num_partitions(refused)
            .build();
        match built {
            Err(nanokafka::Error::InvalidArgument { name, reason }) => {
                assert_eq!(name, "num_partitions");
                assert!(reason.contains(&refused.to_string()), "{reason}");
            }
            other => panic!(
                "num_partitions({refused}) was not refused: {:?}",
                other.is_ok()
            ),
        }
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "a refused build leaves the data directory untouched"
        );
    }
}
