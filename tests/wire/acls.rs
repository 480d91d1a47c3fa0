//! DescribeAcls through the socket, where librdkafka hides what the broker answers (it drops
//! DescribeAcls' top-level error): SECURITY_DISABLED without an authorizer,
//! CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster, INVALID_REQUEST for a filter
//! naming an UNKNOWN pattern type; a topic's Metadata and ListOffsets refused as Kafka
//! refuses them; and the quota and SCRAM admin calls refused without the cluster's operations.

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    DescribeAclsRequest, ListOffsetsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use nanokafka::security::acl::{
    AclBinding, AclStore, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME,
};
use nanokafka::{ListenerConfig, TopicConfig};

use crate::client::WireClient;
use crate::common::{listening_broker, listening_broker_with};

/// ANY of everything, in the wire codes.
fn every_acl() -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1)
        // The codec's default for a nullable string is the empty string, which matches none.
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
}

fn allow_anonymous(resource_type: ResourceType, name: &str, operation: Operation) -> AclBinding {
    AclBinding {
        resource_type,
        pattern_type: PatternType::Literal,
        name: name.into(),
        principal: "User:ANONYMOUS".into(),
        host: "*".into(),
        operation,
        permission: Permission::Allow,
    }
}

#[test]
fn describe_acls_answers_kafkas_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (_open, addr) = listening_broker(dir.path());
    let response = WireClient::connect(addr).call(&every_acl(), 3);
    assert_eq!(response.error_code, ResponseError::SecurityDisabled.code());

    let dir = tempfile::tempdir().unwrap();
    let config = ListenerConfig::new("127.0.0.1:0").authorizer(["User:admin"]);
    let (broker, addr) = listening_broker_with(dir.path(), config);
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let mut client = WireClient::connect(addr);
    let response = client.call(&every_acl(), 3);
    assert_eq!(
        response.error_code,
        ResponseError::ClusterAuthorizationFailed.code()
    );

    let describe = allow_anonymous(ResourceType::Cluster, CLUSTER_NAME, Operation::Describe);
    AclStore::open(dir.path())
        .unwrap()
        .update(|acls| (acls.add(describe), ()))
        .unwrap();
    let response = client.call(&every_acl(), 3);
    assert_eq!(response.error_code, 0, "{response:?}");
    assert_eq!(response.resources.len(), 1);
    assert_eq!(
        response.resources[0].acls[0].operation,
        Operation::Describe.code()
    );
    let unknown_pattern = every_acl().with_pattern_type_filter(0);
    let response = client.call(&unknown_pattern, 3);
    assert_eq!(response.error_code, ResponseError::InvalidRequest.code());

    // DESCRIBE on the cluster is not DESCRIBE on a topic.
    let name = TopicName(StrBytes::from_static_str("t"));
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name.clone())),
    ]));
    let response = client.call(&metadata, 12);
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );
    let offsets = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
        .with_name(name)
        .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-1)])]);
    let response = client.call(&offsets, 7);
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );
}

#[test]
fn the_quota_admin_calls_need_the_clusters_config_operations() {
    use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
    use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
    use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};

    let dir = tempfile::tempdir().unwrap();
    let config = ListenerConfig::new("127.0.0.1:0").authorizer(["User:admin"]);
    let (_broker, addr) = listening_broker_with(dir.path(), config);
    let mut client = WireClient::connect(addr);
    let s = |v: &str| StrBytes::from_string(v.to_owned());
    let alter = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(s("client-id"))
            .with_entity_name(Some(s("greedy")))])
        .with_ops(vec![OpData::default()
            .with_key(s("producer_byte_rate"))
            .with_value(1024.0)])]);
    let describe =
        DescribeClientQuotasRequest::default().with_components(vec![ComponentData::default()
            .with_entity_type(s("client-id"))
            .with_match_type(2)
            .with_match(None)]);
    let refused = ResponseError::ClusterAuthorizationFailed.code();
    assert_eq!(client.call(&alter, 1).entries[0].error_code, refused);
    assert_eq!(client.call(&describe, 1).error_code, refused);

    let store = AclStore::open(dir.path()).unwrap();
    for operation in [Operation::AlterConfigs, Operation::DescribeConfigs] {
        let acl = allow_anonymous(ResourceType::Cluster, CLUSTER_NAME, operation);
        store.update(|acls| (acls.add(acl), ())).unwrap();
    }
    assert_eq!(client.call(&alter, 1).entries[0].error_code, 0);
    let described = client.call(&describe, 1);
    assert_eq!(described.error_code, 0, "{described:?}");
    assert_eq!(
        described.entries.unwrap().len(),
        1,
        "the quota refused before was not set"
    );
}

#[test]
fn the_scram_admin_calls_need_describe_and_alter_on_the_cluster() {
    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
    use kafka_protocol::messages::{
        AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
    };

    let dir = tempfile::tempdir().unwrap();
    let config = ListenerConfig::new("127.0.0.1:0").authorizer(["User:admin"]);
    let (_broker, addr) = listening_broker_with(dir.path(), config);
    let mut client = WireClient::connect(addr);
    let refused = ResponseError::ClusterAuthorizationFailed.code();
    let describe = DescribeUserScramCredentialsRequest::default().with_users(None);
    assert_eq!(client.call(&describe, 0).error_code, refused);
    let alter = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        ScramCredentialDeletion::default()
            .with_name(StrBytes::from_static_str("alice"))
            .with_mechanism(1),
    ]);
    let answered = client.call(&alter, 0);
    assert_eq!(answered.results.len(), 1);
    assert_eq!(answered.results[0].error_code, refused);

    let store = AclStore::open(dir.path()).unwrap();
    for operation in [Operation::Alter, Operation::Describe] {
        let acl = allow_anonymous(ResourceType::Cluster, CLUSTER_NAME, operation);
        store.update(|acls| (acls.add(acl), ())).unwrap();
    }
    assert_eq!(client.call(&describe, 0).error_code, 0);
    // Allowed now, the deletion meets Kafka's answer for a credential that does not exist.
    let answered = client.call(&alter, 0);
    assert_eq!(
        answered.results[0].error_code,
        ResponseError::ResourceNotFound.code()
    );
}

#[test]
fn offset_delete_needs_read_on_the_topic_and_a_consumer_heartbeat_describe_on_its_topics() {
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, GroupId, OffsetDeleteRequest};

    let dir = tempfile::tempdir().unwrap();
    let config = ListenerConfig::new("127.0.0.1:0").authorizer(["User:admin"]);
    let (broker, addr) = listening_broker_with(dir.path(), config);
    broker.create_topic("t", TopicConfig::default()).unwrap();
    broker.produce("t", &1u64).unwrap();
    broker.join_group("t", "g", "m").unwrap();
    broker.commit("t", "g", 0, 0).unwrap();
    broker.leave_group("t", "g", "m").unwrap();
    let store = AclStore::open(dir.path()).unwrap();
    let allow = |resource_type, name: &str, operation| {
        let acl = allow_anonymous(resource_type, name, operation);
        store.update(|acls| (acls.add(acl), ())).unwrap();
    };
    allow(ResourceType::Group, "g", Operation::Delete);
    allow(ResourceType::Group, "g", Operation::Read);
    let mut client = WireClient::connect(addr);

    let delete = OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_topics(vec![OffsetDeleteRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![OffsetDeleteRequestPartition::default()])]);
    let committed = |broker: &nanokafka::NanoKafka| {
        broker.stats().unwrap().topics["t"].partitions[0]
            .committed
            .contains_key("g")
    };
    let refused = ResponseError::TopicAuthorizationFailed.code();
    let response = client.call(&delete, 0);
    assert_eq!(response.topics[0].partitions[0].error_code, refused);
    assert!(
        committed(&broker),
        "a refused OffsetDelete deleted the offset"
    );

    let heartbeat = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("t"))]))
        .with_topic_partitions(Some(vec![]));
    let response = client.call(&heartbeat, 0);
    assert_eq!(response.error_code, refused, "{response:?}");
    assert!(response.member_id.is_none() || response.member_id.as_deref() == Some(""));

    allow(ResourceType::Topic, "t", Operation::Read);
    let response = client.call(&delete, 0);
    assert_eq!(response.topics[0].partitions[0].error_code, 0);
    assert!(!committed(&broker));
    // READ implies DESCRIBE, as in Kafka: the member joins.
    let response = client.call(&heartbeat, 0);
    assert_eq!(response.error_code, 0, "{response:?}");
}
