//! The request schemas of the served APIs, over every version kafka-protocol 0.18 decodes,
//! field for field as its generated decoders read them (Kafka's message definitions, less
//! what the codec does not read). Field names are in the comments; the walk needs only types.
//!
//! `f(lo, hi, ty)` is a field present in versions `lo..=hi` (`N` for "and later");
//! `tag(t, lo, hi, ty)` a tagged field.

use kafka_protocol::messages::ApiKey;

use super::Ty::{self, *};
use super::{Field, Schema};

const N: i16 = i16::MAX;

const fn f(lo: i16, hi: i16, ty: Ty) -> Field {
    Field {
        lo,
        hi,
        tag: None,
        ty,
    }
}

const fn tag(tag: u32, lo: i16, hi: i16, ty: Ty) -> Field {
    Field {
        lo,
        hi,
        tag: Some(tag),
        ty,
    }
}

const fn api(
    api: ApiKey,
    min: i16,
    max: i16,
    flexible_from: i16,
    body: &'static [Field],
) -> Schema {
    Schema {
        api,
        min,
        max,
        flexible_from,
        body,
    }
}

pub static ALL: &[Schema] = &[
    api(ApiKey::Produce, 3, 13, 9, PRODUCE),
    api(ApiKey::Fetch, 4, 18, 12, FETCH),
    api(ApiKey::ListOffsets, 1, 10, 6, LIST_OFFSETS),
    api(ApiKey::Metadata, 0, 13, 9, METADATA),
    api(ApiKey::OffsetCommit, 2, 9, 8, OFFSET_COMMIT),
    api(ApiKey::OffsetFetch, 1, 9, 6, OFFSET_FETCH),
    api(ApiKey::FindCoordinator, 0, 6, 3, FIND_COORDINATOR),
    api(ApiKey::JoinGroup, 0, 9, 6, JOIN_GROUP),
    api(ApiKey::Heartbeat, 0, 4, 4, HEARTBEAT),
    api(ApiKey::LeaveGroup, 0, 5, 4, LEAVE_GROUP),
    api(ApiKey::SyncGroup, 0, 5, 4, SYNC_GROUP),
    api(ApiKey::DescribeGroups, 0, 6, 5, DESCRIBE_GROUPS),
    api(ApiKey::ListGroups, 0, 5, 3, LIST_GROUPS),
    api(ApiKey::SaslHandshake, 0, 1, N, SASL_HANDSHAKE),
    api(ApiKey::ApiVersions, 0, 4, 3, API_VERSIONS),
    api(ApiKey::CreateTopics, 2, 7, 5, CREATE_TOPICS),
    api(ApiKey::DeleteTopics, 1, 6, 4, DELETE_TOPICS),
    api(ApiKey::InitProducerId, 0, 5, 2, INIT_PRODUCER_ID),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4, 4, LEADER_EPOCH),
    api(ApiKey::DescribeConfigs, 1, 4, 4, DESCRIBE_CONFIGS),
    api(ApiKey::SaslAuthenticate, 0, 2, 2, SASL_AUTHENTICATE),
    api(ApiKey::CreatePartitions, 0, 3, 2, CREATE_PARTITIONS),
    api(
        ApiKey::IncrementalAlterConfigs,
        0,
        1,
        1,
        INCREMENTAL_ALTER_CONFIGS,
    ),
    api(ApiKey::AlterConfigs, 0, 2, 2, ALTER_CONFIGS),
    api(ApiKey::DescribeCluster, 0, 2, 0, DESCRIBE_CLUSTER),
    api(ApiKey::DescribeLogDirs, 1, 4, 2, DESCRIBE_LOG_DIRS),
    api(ApiKey::DeleteRecords, 0, 2, 2, DELETE_RECORDS),
    api(ApiKey::DescribeProducers, 0, 0, 0, DESCRIBE_PRODUCERS),
    api(
        ApiKey::DescribeUserScramCredentials,
        0,
        0,
        0,
        DESCRIBE_USER_SCRAM_CREDENTIALS,
    ),
    api(
        ApiKey::AlterUserScramCredentials,
        0,
        0,
        0,
        ALTER_USER_SCRAM_CREDENTIALS,
    ),
    api(ApiKey::DeleteGroups, 0, 2, 2, DELETE_GROUPS),
    api(ApiKey::OffsetDelete, 0, 0, N, OFFSET_DELETE),
    api(
        ApiKey::DescribeTopicPartitions,
        0,
        0,
        0,
        DESCRIBE_TOPIC_PARTITIONS,
    ),
    api(
        ApiKey::ConsumerGroupHeartbeat,
        0,
        1,
        0,
        CONSUMER_GROUP_HEARTBEAT,
    ),
    api(
        ApiKey::ConsumerGroupDescribe,
        0,
        1,
        0,
        CONSUMER_GROUP_DESCRIBE,
    ),
    api(
        ApiKey::DescribeClientQuotas,
        0,
        1,
        1,
        DESCRIBE_CLIENT_QUOTAS,
    ),
    api(ApiKey::AlterClientQuotas, 0, 1, 1, ALTER_CLIENT_QUOTAS),
    api(ApiKey::DescribeAcls, 1, 3, 2, ACL_FILTER),
    api(ApiKey::CreateAcls, 1, 3, 2, CREATE_ACLS),
    api(ApiKey::DeleteAcls, 1, 3, 2, DELETE_ACLS),
];

const DESCRIBE_TOPIC_PARTITIONS: &[Field] = &[
    f(0, N, Array(&Struct(&[f(0, N, Str)]))), // topics: name
    f(0, N, I32),                             // response_partition_limit
    // cursor
    f(
        0,
        N,
        NStruct(&[
            f(0, N, Str), // topic_name
            f(0, N, I32), // partition_index
        ]),
    ),
];

const PRODUCE: &[Field] = &[
    f(0, N, NStr), // transactional_id
    f(0, N, I16),  // acks
    f(0, N, I32),  // timeout_ms
    // topic_data
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, 12, Str),  // name
            f(13, N, Uuid), // topic_id
            // partition_data
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, I32),    // index
                    f(0, N, NBytes), // records
                ])),
            ),
        ])),
    ),
];

const FETCH: &[Field] = &[
    f(0, 14, I32), // replica_id
    f(0, N, I32),  // max_wait_ms
    f(0, N, I32),  // min_bytes
    f(0, N, I32),  // max_bytes
    f(0, N, I8),   // isolation_level
    f(7, N, I32),  // session_id
    f(7, N, I32),  // session_epoch
    // topics
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, 12, Str),  // topic
            f(13, N, Uuid), // topic_id
            // partitions
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, I32),        // partition
                    f(9, N, I32),        // current_leader_epoch
                    f(0, N, I64),        // fetch_offset
                    f(12, N, I32),       // last_fetched_epoch
                    f(5, N, I64),        // log_start_offset
                    f(0, N, I32),        // partition_max_bytes
                    tag(0, 17, N, Uuid), // replica_directory_id
                    tag(1, 18, N, I64),  // high_watermark
                ])),
            ),
        ])),
    ),
    // forgotten_topics_data
    f(
        7,
        N,
        Array(&Struct(&[
            f(7, 12, Str),        // topic
            f(13, N, Uuid),       // topic_id
            f(7, N, Array(&I32)), // partitions
        ])),
    ),
    f(11, N, Str),      // rack_id
    tag(0, 0, N, NStr), // cluster_id
    // replica_state
    tag(
        1,
        15,
        N,
        Struct(&[
            f(15, N, I32), // replica_id
            f(15, N, I64), // replica_epoch
        ]),
    ),
];

const LIST_OFFSETS: &[Field] = &[
    f(0, N, I32), // replica_id
    f(2, N, I8),  // isolation_level
    // topics
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str), // name
            // partitions
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, I32), // partition_index
                    f(4, N, I32), // current_leader_epoch
                    f(0, N, I64), // timestamp
                ])),
            ),
        ])),
    ),
    f(10, N, I32), // timeout_ms
];

const METADATA: &[Field] = &[
    // topics
    f(
        0,
        N,
        NArray(&Struct(&[
            f(10, N, Uuid), // topic_id
            f(0, N, NStr),  // name
        ])),
    ),
    f(4, N, Bool),  // allow_auto_topic_creation
    f(8, 10, Bool), // include_cluster_authorized_operations
    f(8, N, Bool),  // include_topic_authorized_operations
];

const OFFSET_COMMIT: &[Field] = &[
    f(0, N, Str),  // group_id
    f(0, N, I32),  // generation_id_or_member_epoch
    f(0, N, Str),  // member_id
    f(7, N, NStr), // group_instance_id
    f(2, 4, I64),  // retention_time_ms
    // topics
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str), // name
            // partitions
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, I32),  // partition_index
                    f(0, N, I64),  // committed_offset
                    f(6, N, I32),  // committed_leader_epoch
                    f(0, N, NStr), // committed_metadata
                ])),
            ),
        ])),
    ),
];

const OFFSET_FETCH: &[Field] = &[
    f(0, 7, Str), // group_id
    // topics
    f(
        0,
        7,
        NArray(&Struct(&[
            f(0, 7, Str),         // name
            f(0, 7, Array(&I32)), // partition_indexes
        ])),
    ),
    // groups
    f(
        8,
        N,
        Array(&Struct(&[
            f(8, N, Str),  // group_id
            f(9, N, NStr), // member_id
            f(9, N, I32),  // member_epoch
            // topics
            f(
                8,
                N,
                NArray(&Struct(&[
                    f(8, N, Str),         // name
                    f(8, N, Array(&I32)), // partition_indexes
                ])),
            ),
        ])),
    ),
    f(7, N, Bool), // require_stable
];

const FIND_COORDINATOR: &[Field] = &[
    f(0, 3, Str),         // key
    f(1, N, I8),          // key_type
    f(4, N, Array(&Str)), // coordinator_keys
];

const JOIN_GROUP: &[Field] = &[
    f(0, N, Str),  // group_id
    f(0, N, I32),  // session_timeout_ms
    f(1, N, I32),  // rebalance_timeout_ms
    f(0, N, Str),  // member_id
    f(5, N, NStr), // group_instance_id
    f(0, N, Str),  // protocol_type
    // protocols
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str),   // name
            f(0, N, Bytes), // metadata
        ])),
    ),
    f(8, N, NStr), // reason
];

const HEARTBEAT: &[Field] = &[
    f(0, N, Str),  // group_id
    f(0, N, I32),  // generation_id
    f(0, N, Str),  // member_id
    f(3, N, NStr), // group_instance_id
];

const LEAVE_GROUP: &[Field] = &[
    f(0, N, Str), // group_id
    f(0, 2, Str), // member_id
    // members
    f(
        3,
        N,
        Array(&Struct(&[
            f(3, N, Str),  // member_id
            f(3, N, NStr), // group_instance_id
            f(5, N, NStr), // reason
        ])),
    ),
];

const SYNC_GROUP: &[Field] = &[
    f(0, N, Str),  // group_id
    f(0, N, I32),  // generation_id
    f(0, N, Str),  // member_id
    f(3, N, NStr), // group_instance_id
    f(5, N, NStr), // protocol_type
    f(5, N, NStr), // protocol_name
    // assignments
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str),   // member_id
            f(0, N, Bytes), // assignment
        ])),
    ),
];

const DESCRIBE_GROUPS: &[Field] = &[
    f(0, N, Array(&Str)), // groups
    f(3, N, Bool),        // include_authorized_operations
];

const LIST_GROUPS: &[Field] = &[
    f(4, N, Array(&Str)), // states_filter
    f(5, N, Array(&Str)), // types_filter
];

const SASL_HANDSHAKE: &[Field] = &[
    f(0, N, Str), // mechanism
];

const API_VERSIONS: &[Field] = &[
    f(3, N, Str), // client_software_name
    f(3, N, Str), // client_software_version
];

const CREATE_TOPICS: &[Field] = &[
    // topics
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str), // name
            f(0, N, I32), // num_partitions
            f(0, N, I16), // replication_factor
            // assignments
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, I32),         // partition_index
                    f(0, N, Array(&I32)), // broker_ids
                ])),
            ),
            // configs
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, Str),  // name
                    f(0, N, NStr), // value
                ])),
            ),
        ])),
    ),
    f(0, N, I32),  // timeout_ms
    f(0, N, Bool), // validate_only
];

const DELETE_TOPICS: &[Field] = &[
    // topics
    f(
        6,
        N,
        Array(&Struct(&[
            f(6, N, NStr), // name
            f(6, N, Uuid), // topic_id
        ])),
    ),
    f(0, 5, Array(&Str)), // topic_names
    f(0, N, I32),         // timeout_ms
];

const INIT_PRODUCER_ID: &[Field] = &[
    f(0, N, NStr), // transactional_id
    f(0, N, I32),  // transaction_timeout_ms
    f(3, N, I64),  // producer_id
    f(3, N, I16),  // producer_epoch
];

const LEADER_EPOCH: &[Field] = &[
    f(3, N, I32), // replica_id
    // topics
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str), // topic
            // partitions
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, I32), // partition
                    f(0, N, I32), // current_leader_epoch
                    f(0, N, I32), // leader_epoch
                ])),
            ),
        ])),
    ),
];

const DESCRIBE_CONFIGS: &[Field] = &[
    // resources
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, I8),           // resource_type
            f(0, N, Str),          // resource_name
            f(0, N, NArray(&Str)), // configuration_keys
        ])),
    ),
    f(0, N, Bool), // include_synonyms
    f(3, N, Bool), // include_documentation
];

const CREATE_PARTITIONS: &[Field] = &[
    // topics
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str), // name
            f(0, N, I32), // count
            // assignments
            f(
                0,
                N,
                NArray(&Struct(&[
                    f(0, N, Array(&I32)), // broker_ids
                ])),
            ),
        ])),
    ),
    f(0, N, I32),  // timeout_ms
    f(0, N, Bool), // validate_only
];

const INCREMENTAL_ALTER_CONFIGS: &[Field] = &[
    // resources
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, I8),  // resource_type
            f(0, N, Str), // resource_name
            // configs
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, Str),  // name
                    f(0, N, I8),   // config_operation
                    f(0, N, NStr), // value
                ])),
            ),
        ])),
    ),
    f(0, N, Bool), // validate_only
];

const ALTER_CONFIGS: &[Field] = &[
    // resources
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, I8),  // resource_type
            f(0, N, Str), // resource_name
            // configs
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, Str),  // name
                    f(0, N, NStr), // value
                ])),
            ),
        ])),
    ),
    f(0, N, Bool), // validate_only
];

const SASL_AUTHENTICATE: &[Field] = &[
    f(0, N, Bytes), // auth_bytes
];

const DESCRIBE_CLUSTER: &[Field] = &[
    f(0, N, Bool), // include_cluster_authorized_operations
    f(1, N, I8),   // endpoint_type
    f(2, N, Bool), // include_fenced_brokers
];

const DESCRIBE_LOG_DIRS: &[Field] = &[
    // topics
    f(
        1,
        N,
        NArray(&Struct(&[
            f(1, N, Str),         // topic
            f(1, N, Array(&I32)), // partitions
        ])),
    ),
];

const DELETE_RECORDS: &[Field] = &[
    // topics
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str), // name
            // partitions
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, I32), // partition_index
                    f(0, N, I64), // offset
                ])),
            ),
        ])),
    ),
    f(0, N, I32), // timeout_ms
];

const DESCRIBE_PRODUCERS: &[Field] = &[
    // topics
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str),         // name
            f(0, N, Array(&I32)), // partition_indexes
        ])),
    ),
];

/// DescribeAcls' body, and each filter of DeleteAcls.
const ACL_FILTER: &[Field] = &[
    f(0, N, I8),   // resource_type_filter
    f(0, N, NStr), // resource_name_filter
    f(1, N, I8),   // pattern_type_filter
    f(0, N, NStr), // principal_filter
    f(0, N, NStr), // host_filter
    f(0, N, I8),   // operation
    f(0, N, I8),   // permission_type
];

const CREATE_ACLS: &[Field] = &[
    // creations
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, I8),  // resource_type
            f(0, N, Str), // resource_name
            f(1, N, I8),  // resource_pattern_type
            f(0, N, Str), // principal
            f(0, N, Str), // host
            f(0, N, I8),  // operation
            f(0, N, I8),  // permission_type
        ])),
    ),
];

const DELETE_ACLS: &[Field] = &[
    f(0, N, Array(&Struct(ACL_FILTER))), // filters
];

const DESCRIBE_USER_SCRAM_CREDENTIALS: &[Field] = &[
    f(0, N, NArray(&Struct(&[f(0, N, Str)]))), // users: name
];

const ALTER_USER_SCRAM_CREDENTIALS: &[Field] = &[
    // deletions
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str), // name
            f(0, N, I8),  // mechanism
        ])),
    ),
    // upsertions
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str),   // name
            f(0, N, I8),    // mechanism
            f(0, N, I32),   // iterations
            f(0, N, Bytes), // salt
            f(0, N, Bytes), // salted_password
        ])),
    ),
];

const DELETE_GROUPS: &[Field] = &[
    f(0, N, Array(&Str)), // groups_names
];

const OFFSET_DELETE: &[Field] = &[
    f(0, N, Str), // group_id
    // topics
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str), // name
            // partitions
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, I32), // partition_index
                ])),
            ),
        ])),
    ),
];

const CONSUMER_GROUP_HEARTBEAT: &[Field] = &[
    f(0, N, Str),          // group_id
    f(0, N, Str),          // member_id
    f(0, N, I32),          // member_epoch
    f(0, N, NStr),         // instance_id
    f(0, N, NStr),         // rack_id
    f(0, N, I32),          // rebalance_timeout_ms
    f(0, N, NArray(&Str)), // subscribed_topic_names
    f(1, N, NStr),         // subscribed_topic_regex
    f(0, N, NStr),         // server_assignor
    // topic_partitions
    f(
        0,
        N,
        NArray(&Struct(&[
            f(0, N, Uuid),        // topic_id
            f(0, N, Array(&I32)), // partitions
        ])),
    ),
];

const CONSUMER_GROUP_DESCRIBE: &[Field] = &[
    f(0, N, Array(&Str)), // group_ids
    f(0, N, Bool),        // include_authorized_operations
];

const DESCRIBE_CLIENT_QUOTAS: &[Field] = &[
    // components
    f(
        0,
        N,
        Array(&Struct(&[
            f(0, N, Str),  // entity_type
            f(0, N, I8),   // match_type
            f(0, N, NStr), // match
        ])),
    ),
    f(0, N, Bool), // strict
];

const ALTER_CLIENT_QUOTAS: &[Field] = &[
    // entries
    f(
        0,
        N,
        Array(&Struct(&[
            // entity
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, Str),  // entity_type
                    f(0, N, NStr), // entity_name
                ])),
            ),
            // ops
            f(
                0,
                N,
                Array(&Struct(&[
                    f(0, N, Str),  // key
                    f(0, N, I64),  // value: a float64, eight bytes as an i64 is
                    f(0, N, Bool), // remove
                ])),
            ),
        ])),
    ),
    f(0, N, Bool), // validate_only
];
