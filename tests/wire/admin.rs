//! CreateTopics, DeleteTopics, DescribeConfigs, CreatePartitions and IncrementalAlterConfigs
//! through the socket, each error included.

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, BrokerId, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use nanokafka::AutoCreate;
use nanokafka::{CompressionType, ListenerConfig, TimestampType, TopicConfig};

use crate::client::WireClient;
use crate::common::{listening_broker, listening_broker_with};

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.into()))
}

pub fn creatable(topic: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(-1)
}

pub fn with_config(topic: CreatableTopic, key: &str, value: &str) -> CreatableTopic {
    let mut configs = topic.configs.clone();
    configs.push(
        CreatableTopicConfig::default()
            .with_name(StrBytes::from_string(key.into()))
            .with_value(Some(StrBytes::from_string(value.into()))),
    );
    topic.with_configs(configs)
}

pub fn create(topics: Vec<CreatableTopic>) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5000)
}

pub fn code(error: ResponseError) -> i16 {
    error.code()
}

#[test]
fn create_topics_creates_with_kafka_configs_and_v5_describes_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    for version in 2..=5 {
        let topic = format!("made-v{version}");
        let request = create(vec![with_config(
            with_config(creatable(&topic, 3), "retention.ms", "60000"),
            "message.timestamp.type",
            "LogAppendTime",
        )]);
        let response = client.call(&request, version);
        let result = &response.topics[0];
        assert_eq!(result.name.0.as_str(), topic);
        assert_eq!(
            result.error_code, 0,
            "v{version}: {:?}",
            result.error_message
        );
        let config = &broker.list_topics().unwrap()[&topic];
        assert_eq!(config.partitions, 3);
        assert_eq!(config.retention_ms, Some(60_000));
        assert_eq!(config.timestamp_type, TimestampType::LogAppendTime);
        if version == 5 {
            assert_eq!((result.num_partitions, result.replication_factor), (3, 1));
            let configs = result.configs.as_ref().expect("v5 lists the configs");
            let retention = configs.iter().find(|c| c.name.as_str() == "retention.ms");
            let retention = retention.expect("retention.ms is listed");
            assert_eq!(retention.value.as_deref(), Some("60000"));
            assert_eq!(retention.config_source, 1); // TOPIC_CONFIG
            let segment = configs.iter().find(|c| c.name.as_str() == "segment.bytes");
            assert_eq!(segment.unwrap().config_source, 5); // DEFAULT_CONFIG
        }
    }
    // -1 partitions: the default, one.
    let response = client.call(&create(vec![creatable("defaulted", -1)]), 4);
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(broker.list_topics().unwrap()["defaulted"].partitions, 1);
    broker.produce("defaulted", &1u64).unwrap();
}

#[test]
fn create_topics_refuses_what_it_cannot_honour_each_topic_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("exists", TopicConfig::default())
        .unwrap();
    let mut client = WireClient::connect(addr);
    // A replica assignment as librdkafka's admin test sends one: every partition on the
    // one broker, the count and replication factor -1.
    let assign = |topic: &str, partitions: &[(i32, &[i32])]| {
        let assignments = partitions
            .iter()
            .map(|&(p, brokers)| {
                CreatableReplicaAssignment::default()
                    .with_partition_index(p)
                    .with_broker_ids(brokers.iter().map(|&b| BrokerId(b)).collect())
            })
            .collect();
        creatable(topic, -1).with_assignments(assignments)
    };
    let cases: Vec<(CreatableTopic, ResponseError)> = vec![
        (creatable("exists", 1), ResponseError::TopicAlreadyExists),
        (
            creatable("bad/name", 1),
            ResponseError::InvalidTopicException,
        ),
        (
            creatable("replicated", 1).with_replication_factor(3),
            ResponseError::InvalidReplicationFactor,
        ),
        (creatable("zero", 0), ResponseError::InvalidPartitions),
        (
            creatable("too-many", 10_001),
            ResponseError::InvalidPartitions,
        ),
        (
            with_config(creatable("compacted", 1), "cleanup.policy", "compacted"),
            ResponseError::InvalidConfig,
        ),
        (
            with_config(creatable("min-isr", 1), "min.insync.replicas", "2"),
            ResponseError::InvalidConfig,
        ),
        (
            with_config(creatable("tiny-segments", 1), "segment.bytes", "100"),
            ResponseError::InvalidConfig,
        ),
        (
            with_config(creatable("zero-retention", 1), "retention.ms", "0"),
            ResponseError::InvalidConfig,
        ),
        (
            assign("other-broker", &[(0, &[0]), (1, &[3])]),
            ResponseError::InvalidReplicaAssignment,
        ),
        (
            assign("replicated-assignment", &[(0, &[0, 0])]),
            ResponseError::InvalidReplicaAssignment,
        ),
        (
            assign("gap", &[(0, &[0]), (2, &[0])]),
            ResponseError::InvalidReplicaAssignment,
        ),
        (
            assign("counted-too", &[(0, &[0])]).with_num_partitions(1),
            ResponseError::InvalidRequest,
        ),
        (
            with_config(assign("bad-config", &[(0, &[0])]), "dummy.doesntexist", "x"),
            ResponseError::InvalidConfig,
        ),
    ];
    let (topics, errors): (Vec<_>, Vec<_>) = cases.into_iter().unzip();
    // One good topic among them is created all the same; min.insync.replicas=1 is the
    // replication factor, so a single broker can honour it.
    let mut all = topics.clone();
    all.push(assign("assigned", &[(1, &[0]), (0, &[0]), (2, &[0])]));
    all.push(with_config(
        with_config(creatable("fine", 2), "cleanup.policy", "delete"),
        "min.insync.replicas",
        "1",
    ));
    let response = client.call(&create(all), 5);
    for (result, error) in response.topics.iter().zip(&errors) {
        assert_eq!(
            result.error_code,
            code(*error),
            "{}: {:?}",
            result.name.0.as_str(),
            result.error_message
        );
        let message = result.error_message.as_ref().expect("a message says why");
        assert!(!message.is_empty());
        assert_eq!(result.num_partitions, -1);
    }
    let fine = response.topics.last().unwrap();
    assert_eq!((fine.name.0.as_str(), fine.error_code), ("fine", 0));
    let assigned = &response.topics[errors.len()];
    assert_eq!(
        (assigned.name.0.as_str(), assigned.error_code),
        ("assigned", 0)
    );
    assert_eq!(assigned.num_partitions, 3, "the assignment's count");
    let min_isr = response
        .topics
        .iter()
        .find(|t| t.name.0.as_str() == "min-isr");
    let min_isr = min_isr.unwrap().error_message.as_ref().unwrap();
    assert!(
        min_isr.contains("min.insync.replicas") && min_isr.contains("replication factor"),
        "{min_isr}"
    );
    let names: Vec<String> = broker.list_topics().unwrap().into_keys().collect();
    assert_eq!(
        names,
        ["assigned", "exists", "fine"],
        "nothing else was created"
    );
    assert_eq!(broker.list_topics().unwrap()["assigned"].partitions, 3);
    assert!(!dir.path().join("compacted_0").exists());

    // The same name twice in one request: both refused, nothing created.
    let twice = create(vec![creatable("twice", 1), creatable("twice", 2)]);
    let response = client.call(&twice, 3);
    assert!(response
        .topics
        .iter()
        .all(|t| t.error_code == code(ResponseError::InvalidRequest)));
    assert!(!broker.list_topics().unwrap().contains_key("twice"));
}

#[test]
fn create_topics_validate_only_checks_everything_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("exists", TopicConfig::default())
        .unwrap();
    let mut client = WireClient::connect(addr);
    let request = create(vec![
        creatable("would-be", 4),
        creatable("exists", 1),
        with_config(creatable("compacted", 1), "cleanup.policy", "compacted"),
    ])
    .with_validate_only(true);
    let response = client.call(&request, 5);
    let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        [
            0,
            code(ResponseError::TopicAlreadyExists),
            code(ResponseError::InvalidConfig)
        ]
    );
    assert_eq!(response.topics[0].num_partitions, 4);
    let names: Vec<String> = broker.list_topics().unwrap().into_keys().collect();
    assert_eq!(names, ["exists"]);
    assert!(!dir.path().join("would-be_0").exists());
}

#[test]
fn delete_topics_deletes_by_name_and_reports_unknown_ones() {
    let dir = tempfile::tempdir().unwrap();
    // Without auto-creation, so the Metadata below cannot bring a deleted topic back.
    let config = ListenerConfig::new("127.0.0.1:0").auto_create_topics(AutoCreate::Off);
    let (broker, addr) = listening_broker_with(dir.path(), config);
    let mut client = WireClient::connect(addr);
    for version in 1..=5 {
        let topic = format!("doomed-v{version}");
        broker
            .create_topic(&topic, TopicConfig::default().partitions(2))
            .unwrap();
        broker.produce(&topic, &1u64).unwrap();
        let request = DeleteTopicsRequest::default()
            .with_topic_names(vec![name(&topic), name("never-was")])
            .with_timeout_ms(5000);
        let response = client.call(&request, version);
        let doomed = &response.responses[0];
        assert_eq!(doomed.name.as_ref().unwrap().0.as_str(), topic);
        assert_eq!(doomed.error_code, 0, "v{version}");
        let missing = &response.responses[1];
        assert_eq!(
            missing.error_code,
            code(ResponseError::UnknownTopicOrPartition)
        );
        assert_eq!(missing.error_message.is_some(), version >= 5, "v{version}");
        assert!(!broker.list_topics().unwrap().contains_key(&topic));
        assert!(!dir.path().join(format!("{topic}_0")).exists());
    }
    // A deleted topic can be created again over the wire, empty.
    let response = client.call(&create(vec![creatable("doomed-v1", 1)]), 5);
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(broker.produce("doomed-v1", &2u64).unwrap().offset, 0);
}

pub fn describe(resources: Vec<DescribeConfigsResource>, synonyms: bool) -> DescribeConfigsRequest {
    DescribeConfigsRequest::default()
        .with_resources(resources)
        .with_include_synonyms(synonyms)
}

pub fn resource(resource_type: i8, name: &str, keys: Option<&[&str]>) -> DescribeConfigsResource {
    DescribeConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(name.into()))
        .with_configuration_keys(keys.map(|k| {
            k.iter()
                .map(|k| StrBytes::from_string((*k).into()))
                .collect()
        }))
}

pub fn value_of<'a>(result: &'a DescribeConfigsResult, key: &str) -> Option<&'a str> {
    let config = result.configs.iter().find(|c| c.name.as_str() == key)?;
    config.value.as_deref()
}

#[test]
fn describe_configs_reports_a_topics_configs_in_kafkas_names_and_sources() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let config = TopicConfig::default()
        .retention_bytes(1 << 20)
        .segment_bytes(1 << 16);
    broker.create_topic("described", config).unwrap();
    let mut client = WireClient::connect(addr);
    for version in 1..=4 {
        let response = client.call(
            &describe(vec![resource(2, "described", None)], true),
            version,
        );
        let result = &response.results[0];
        assert_eq!(result.error_code, 0, "v{version}");
        assert_eq!(value_of(result, "retention.bytes"), Some("1048576"));
        assert_eq!(value_of(result, "segment.bytes"), Some("65536"));
        assert_eq!(value_of(result, "retention.ms"), Some("-1"));
        assert_eq!(value_of(result, "cleanup.policy"), Some("delete"));
        assert_eq!(
            value_of(result, "message.timestamp.type"),
            Some("CreateTime")
        );
        for config in &result.configs {
            assert!(
                !config.read_only,
                "{} is settable by CreateTopics",
                config.name.as_str()
            );
            let expected = match config.name.as_str() {
                "retention.bytes" | "segment.bytes" => 1, // TOPIC_CONFIG
                _ => 5,                                   // DEFAULT_CONFIG
            };
            assert_eq!(config.config_source, expected, "{}", config.name.as_str());
        }
        // Synonyms: the topic's own value, then the broker default it overrides.
        let segment = result
            .configs
            .iter()
            .find(|c| c.name.as_str() == "segment.bytes")
            .unwrap();
        let synonyms: Vec<(&str, i8)> = segment
            .synonyms
            .iter()
            .map(|s| (s.name.as_str(), s.source))
            .collect();
        assert_eq!(synonyms, [("segment.bytes", 1), ("log.segment.bytes", 5)]);
    }
    // The keys filter, and no synonyms unless asked.
    let keys: &[&str] = &["retention.ms", "no.such.key"];
    let response = client.call(
        &describe(vec![resource(2, "described", Some(keys))], false),
        4,
    );
    let result = &response.results[0];
    let names: Vec<&str> = result.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["retention.ms"]);
    assert!(result.configs[0].synonyms.is_empty());
}

#[test]
fn describe_configs_reports_the_brokers_read_only_configs_and_refuses_other_resources() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let request = describe(
        vec![
            resource(4, "0", None),
            resource(2, "missing", None),
            resource(4, "7", None),
            resource(8, "0", None), // BROKER_LOGGER
        ],
        false,
    );
    let response = client.call(&request, 4);
    let broker = &response.results[0];
    assert_eq!(broker.error_code, 0);
    assert_eq!(
        value_of(broker, "log.dirs"),
        Some(dir.path().to_str().unwrap())
    );
    assert_eq!(value_of(broker, "auto.create.topics.enable"), Some("true"));
    assert_eq!(
        value_of(broker, "socket.request.max.bytes"),
        Some("104857600")
    );
    // The test listener does not wait for more members.
    assert_eq!(
        value_of(broker, "group.initial.rebalance.delay.ms"),
        Some("0")
    );
    assert!(value_of(broker, "message.max.bytes").is_some());
    assert!(broker.configs.iter().all(|c| c.read_only));
    let codes: Vec<i16> = response.results[1..].iter().map(|r| r.error_code).collect();
    assert_eq!(
        codes,
        [
            code(ResponseError::UnknownTopicOrPartition),
            code(ResponseError::InvalidRequest),
            code(ResponseError::InvalidRequest)
        ]
    );
    assert!(response.results[1..]
        .iter()
        .all(|r| r.error_message.is_some() && r.configs.is_empty()));
}

fn grow_to(topic: &str, count: i32) -> CreatePartitionsTopic {
    CreatePartitionsTopic::default()
        .with_name(name(topic))
        .with_count(count)
}

fn create_partitions(topics: Vec<CreatePartitionsTopic>) -> CreatePartitionsRequest {
    CreatePartitionsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5000)
}

#[test]
fn create_partitions_grows_a_topic_that_is_served_at_once_and_refuses_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    let mut client = WireClient::connect(addr);
    let mut count = 2;
    for version in 0..=3 {
        count += 1;
        // validate_only checks and changes nothing.
        let check = create_partitions(vec![grow_to("t", count)]).with_validate_only(true);
        let response = client.call(&check, version);
        assert_eq!(response.results[0].error_code, 0, "v{version}");
        assert_eq!(
            broker.list_topics().unwrap()["t"].partitions as i32,
            count - 1
        );

        let response = client.call(&create_partitions(vec![grow_to("t", count)]), version);
        let result = &response.results[0];
        assert_eq!(result.name.0.as_str(), "t");
        assert_eq!(
            result.error_code, 0,
            "v{version}: {:?}",
            result.error_message
        );
        assert_eq!(broker.list_topics().unwrap()["t"].partitions as i32, count);
        // The newest partition takes records now.
        let record = nanokafka::ProduceRecord {
            key: None,
            value: nanokafka::encode(&1u64).unwrap(),
        };
        let delivered = broker
            .produce_batch_raw("t", Some(count as u32 - 1), vec![record])
            .unwrap();
        assert_eq!(delivered[0].offset, 0);
    }

    let assigned = grow_to("t", 10).with_assignments(Some(vec![
        CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(0)]),
    ]));
    let cases = vec![
        (grow_to("t", count), ResponseError::InvalidPartitions),
        (grow_to("t", 1), ResponseError::InvalidPartitions),
        (grow_to("t", 0), ResponseError::InvalidPartitions),
        (grow_to("t", 10_001), ResponseError::InvalidPartitions),
        (
            grow_to("missing", 4),
            ResponseError::UnknownTopicOrPartition,
        ),
        (assigned, ResponseError::InvalidReplicaAssignment),
    ];
    for (topic, expected) in cases {
        let label = format!("{} -> {}", topic.name.0.as_str(), topic.count);
        let response = client.call(&create_partitions(vec![topic]), 3);
        let result = &response.results[0];
        assert_eq!(result.error_code, code(expected), "{label}");
        assert!(result.error_message.is_some(), "{label}");
    }
    // The same topic twice: both refused, nothing grown.
    let twice = create_partitions(vec![grow_to("t", 20), grow_to("t", 21)]);
    let response = client.call(&twice, 3);
    assert!(response
        .results
        .iter()
        .all(|r| r.error_code == code(ResponseError::InvalidRequest)));
    assert_eq!(broker.list_topics().unwrap()["t"].partitions as i32, count);
    assert!(!dir.path().join(format!("t_{count}")).exists());
}

/// A replica assignment for the new partitions, as librdkafka's admin test sends it: each
/// on this broker alone grows the topic; a wrong count or another broker is refused and
/// grows nothing.
#[test]
fn create_partitions_takes_an_assignment_of_the_new_partitions_to_this_broker() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    let mut client = WireClient::connect(addr);
    let on = |brokers: &[i32]| {
        CreatePartitionsAssignment::default()
            .with_broker_ids(brokers.iter().map(|&b| BrokerId(b)).collect())
    };
    let refused = [
        vec![on(&[0])],
        vec![on(&[0]), on(&[1])],
        vec![on(&[0]), on(&[0, 1])],
        vec![on(&[0]), on(&[])],
    ];
    for assignments in refused {
        let label = format!("{assignments:?}");
        let topic = grow_to("t", 4).with_assignments(Some(assignments));
        let response = client.call(&create_partitions(vec![topic]), 3);
        let result = &response.results[0];
        assert_eq!(
            result.error_code,
            code(ResponseError::InvalidReplicaAssignment),
            "{label}"
        );
        assert!(result.error_message.is_some(), "{label}");
        assert_eq!(broker.list_topics().unwrap()["t"].partitions, 2, "{label}");
    }
    let topic = grow_to("t", 4).with_assignments(Some(vec![on(&[0]), on(&[0])]));
    let response = client.call(&create_partitions(vec![topic]), 3);
    let result = &response.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    assert_eq!(broker.list_topics().unwrap()["t"].partitions, 4);
}

pub fn op(key: &str, operation: i8, value: Option<&str>) -> AlterableConfig {
    AlterableConfig::default()
        .with_name(StrBytes::from_string(key.into()))
        .with_config_operation(operation)
        .with_value(value.map(|v| StrBytes::from_string(v.into())))
}

pub fn alter_configs(topic: &str, configs: Vec<AlterableConfig>) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.into()))
        .with_configs(configs)])
}

pub const SET: i8 = 0;
const DELETE: i8 = 1;
pub const APPEND: i8 = 2;
pub const SUBTRACT: i8 = 3;

#[test]
fn incremental_alter_configs_sets_and_deletes_topic_configs_and_refuses_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let created = TopicConfig::default().retention_bytes(1 << 20);
    broker.create_topic("t", created.clone()).unwrap();
    let mut client = WireClient::connect(addr);

    let request = alter_configs(
        "t",
        vec![
            op("retention.ms", SET, Some("60000")),
            op("message.timestamp.type", SET, Some("LogAppendTime")),
            op("retention.bytes", DELETE, None),
            op("min.insync.replicas", SET, Some("1")),
            op("segment.bytes", SET, Some("1048576")),
            op("compression.type", SET, Some("lz4")),
            op("max.message.bytes", SET, Some("65536")),
        ],
    );
    // validate_only first: checked, nothing changed.
    let response = client.call(&request.clone().with_validate_only(true), 1);
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(broker.list_topics().unwrap()["t"], created);

    let response = client.call(&request, 0);
    let result = &response.responses[0];
    assert_eq!(
        (
            result.error_code,
            result.resource_type,
            result.resource_name.as_str()
        ),
        (0, 2, "t"),
        "{:?}",
        result.error_message
    );
    let altered = TopicConfig::default()
        .retention_ms(60_000)
        .timestamp_type(TimestampType::LogAppendTime)
        .segment_bytes(1 << 20)
        .compression_type(CompressionType::Lz4)
        .max_message_bytes(1 << 16);
    assert_eq!(broker.list_topics().unwrap()["t"], altered);

    // Each refused whole: its valid operation alongside is not applied either.
    let valid = || op("message.timestamp.type", SET, Some("CreateTime"));
    let cases = vec![
        (
            op("segment.bytes", SET, Some("100")),
            ResponseError::InvalidConfig,
        ),
        (
            op("retention.ms", SET, Some("0")),
            ResponseError::InvalidConfig,
        ),
        (
            op("retention.ms", APPEND, Some("1")),
            ResponseError::InvalidConfig,
        ),
        (
            op("cleanup.policy", SUBTRACT, Some("delete")),
            ResponseError::InvalidConfig,
        ),
        (
            op("min.insync.replicas", SET, Some("2")),
            ResponseError::InvalidConfig,
        ),
        (
            op("retention.bytes", SET, None),
            ResponseError::InvalidRequest,
        ),
        (
            op("retention.bytes", 9, Some("1")),
            ResponseError::InvalidRequest,
        ),
    ];
    for (config, expected) in cases {
        let label = format!("{config:?}");
        let response = client.call(&alter_configs("t", vec![valid(), config]), 1);
        let result = &response.responses[0];
        assert_eq!(result.error_code, code(expected), "{label}");
        assert!(result.error_message.is_some(), "{label}");
    }
    // A config named twice for one resource.
    let twice = vec![
        valid(),
        op("retention.ms", SET, Some("1000")),
        op("retention.ms", DELETE, None),
    ];
    let response = client.call(&alter_configs("t", twice), 1);
    assert_eq!(
        response.responses[0].error_code,
        code(ResponseError::InvalidRequest)
    );
    let missing = client.call(&alter_configs("missing", vec![valid()]), 1);
    assert_eq!(
        missing.responses[0].error_code,
        code(ResponseError::UnknownTopicOrPartition)
    );
    let broker_resource = alter_configs("0", vec![valid()]);
    let mut resources = broker_resource.resources.clone();
    resources[0].resource_type = 4;
    let response = client.call(&broker_resource.with_resources(resources), 1);
    assert_eq!(
        response.responses[0].error_code,
        code(ResponseError::InvalidRequest)
    );
    assert_eq!(broker.list_topics().unwrap()["t"], altered);
}

pub fn whole_set(topic: &str, configs: &[(&str, &str)]) -> AlterConfigsRequest {
    use kafka_protocol::messages::alter_configs_request as legacy;
    let configs = configs
        .iter()
        .map(|(k, v)| {
            legacy::AlterableConfig::default()
                .with_name(StrBytes::from_string((*k).into()))
                .with_value(Some(StrBytes::from_string((*v).into())))
        })
        .collect();
    AlterConfigsRequest::default().with_resources(vec![legacy::AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.into()))
        .with_configs(configs)])
}

#[test]
fn alter_configs_replaces_the_whole_set_of_kafka_configs_and_keeps_nanokafkas_own() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let created = TopicConfig::default()
        .partitions(2)
        .max_size(100)
        .retention_ms(1000)
        .timestamp_type(TimestampType::LogAppendTime)
        .segment_bytes(1 << 20)
        .compression_type(CompressionType::Zstd)
        .max_message_bytes(1 << 16);
    broker.create_topic("t", created.clone()).unwrap();
    let mut client = WireClient::connect(addr);
    let request = whole_set("t", &[("retention.bytes", "4096")]);
    let response = client.call(&request.clone().with_validate_only(true), 2);
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(broker.list_topics().unwrap()["t"], created);

    let response = client.call(&request, 0);
    let result = &response.responses[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    // Left out: back to the defaults (segment.bytes, compression.type and max.message.bytes
    // too); max_size has no Kafka name and stays.
    let altered = TopicConfig::default()
        .partitions(2)
        .max_size(100)
        .retention_bytes(4096);
    assert_eq!(broker.list_topics().unwrap()["t"], altered);

    for (configs, expected) in [
        (
            &[("segment.bytes", "100")][..],
            ResponseError::InvalidConfig,
        ),
        (&[("retention.ms", "-5")][..], ResponseError::InvalidConfig),
        (
            &[("retention.ms", "1"), ("retention.ms", "2")][..],
            ResponseError::InvalidRequest,
        ),
        (
            &[("message.format.version", "4.0")][..],
            ResponseError::InvalidConfig,
        ),
    ] {
        let response = client.call(&whole_set("t", configs), 1);
        assert_eq!(
            response.responses[0].error_code,
            code(expected),
            "{configs:?}"
        );
    }
    let response = client.call(&whole_set("missing", &[]), 1);
    assert_eq!(
        response.responses[0].error_code,
        code(ResponseError::UnknownTopicOrPartition)
    );
    assert_eq!(broker.list_topics().unwrap()["t"], altered);

    // As librdkafka's tests alter a topic: every described config sent back, with
    // message.format.version, which Kafka 3 checks and ignores (records are always v2).
    let described = client.call(&describe(vec![resource(2, "t", None)], false), 1);
    let mut configs: Vec<(String, String)> = described.results[0]
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_deref().unwrap_or("").to_owned(),
            )
        })
        .collect();
    configs.push(("message.format.version".into(), "0.10.0.0".into()));
    let configs: Vec<(&str, &str)> = configs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let response = client.call(&whole_set("t", &configs), 0);
    let result = &response.responses[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    assert_eq!(
        broker.list_topics().unwrap()["t"],
        altered,
        "nothing changed"
    );
    broker.produce("t", &1u64).unwrap();
}
