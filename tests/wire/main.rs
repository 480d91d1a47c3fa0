//! The Kafka listener through its socket: requests encoded by an independent codec
//! (kafka-protocol), bad and hostile requests, and the protocol's known pitfalls.

mod client;
#[path = "../common/client_batch.rs"]
mod client_batch;
mod common;
mod groups_common;
mod records;

mod acls;
mod admin;
mod basics;
mod cluster;
mod compacted;
mod consumer_groups;
mod delete_groups;
mod delete_records;
mod describe_topic_partitions;
mod fetch;
mod fetch_sessions;
mod fetch_topic_ids;
mod groups;
mod groups_offsets;
mod groups_relay;
mod groups_static;
mod hostile;
mod limits;
mod offsets;
mod produce;
mod quotas;
mod sasl;
#[cfg(feature = "schema-registry")]
mod schema_validation;
mod topic_ids;
