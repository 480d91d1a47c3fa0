//! DescribeCluster and DescribeLogDirs: the one broker as the admin tools and consoles ask
//! about it. The cluster is this broker (node 0, its own controller); its one log directory
//! is the data directory, with each partition's size on disk.
//!
//! ACLs: DescribeLogDirs needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED);
//! DescribeCluster needs nothing, as in Kafka (it tells what Metadata tells).

use std::collections::BTreeSet;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use super::NODE_ID;
use crate::security::acl::Operation;
use crate::types::TopicStats;

/// Kafka's "authorized operations were not asked for".
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;
/// DescribeCluster's `endpoint_type` for brokers (2 is controllers, which a client of a
/// broker does not ask for).
const BROKER_ENDPOINTS: i8 = 1;

pub fn describe_cluster(
    ctx: &RequestContext<'_>,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED);
    if ctx.version >= 1 && request.endpoint_type != BROKER_ENDPOINTS {
        return response
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "this broker lists broker endpoints only",
            )));
    }
    let broker = DescribeClusterBroker::default()
        .with_broker_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(ctx.shared.advertised_host.clone()))
        .with_port(ctx.shared.advertised_port);
    response
        .with_cluster_id(StrBytes::from_string(ctx.shared.cluster_id.clone()))
        .with_controller_id(BrokerId(NODE_ID))
        .with_brokers(vec![broker])
}

pub async fn describe_log_dirs(
    ctx: &RequestContext<'_>,
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let failed = |e: ResponseError| DescribeLogDirsResponse::default().with_error_code(e.code());
    if let Err(e) = ctx.check_cluster(Operation::Describe) {
        // Before v3 there is no error field: no log directory says it.
        return match ctx.version >= 3 {
            true => failed(e),
            false => DescribeLogDirsResponse::default(),
        };
    }
    let (dir, stats) = match (ctx.broker.describe_broker().await, ctx.broker.stats().await) {
        (Ok(dir), Ok(stats)) => (dir.data_dir, stats),
        _ => return failed(ResponseError::UnknownServerError),
    };
    // A null list asks for every partition; otherwise the named ones that exist (Kafka
    // leaves out what the broker does not host).
    let wanted: Option<Vec<(String, BTreeSet<i32>)>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.topic.0.to_string(), t.partitions.into_iter().collect()))
            .collect()
    });
    let topics = stats
        .topics
        .iter()
        .filter_map(|(name, topic)| {
            let partitions = match &wanted {
                None => partitions(topic, |_| true),
                Some(wanted) => {
                    let (_, asked) = wanted.iter().find(|(n, _)| n == name)?;
                    partitions(topic, |p| asked.contains(&p))
                }
            };
            (!partitions.is_empty()).then(|| {
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name.clone())))
                    .with_partitions(partitions)
            })
        })
        .collect();
    let result = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(-1)
        .with_usable_bytes(-1);
    DescribeLogDirsResponse::default().with_results(vec![result])
}

/// The partitions of `topic` that `keep` keeps, with their size on disk.
fn partitions(topic: &TopicStats, keep: impl Fn(i32) -> bool) -> Vec<DescribeLogDirsPartition> {
    topic
        .partitions
        .iter()
        .filter(|p| keep(p.partition as i32))
        .map(|p| {
            DescribeLogDirsPartition::default()
                .with_partition_index(p.partition as i32)
                .with_partition_size(i64::try_from(p.size_bytes).unwrap_or(i64::MAX))
        })
        .collect()
}
