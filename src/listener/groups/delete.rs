//! DeleteGroups and OffsetDelete: a group's committed offsets, registrations and
//! coordinators deleted, everywhere or on some partitions, once it has no members (Kafka's
//! NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC otherwise).

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};
use kafka_protocol::ResponseError;

use super::super::errors::to_kafka;
use super::super::request::RequestContext;
use crate::error::Error;
use crate::security::acl::Operation;

pub async fn delete_groups(
    ctx: &RequestContext<'_>,
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(request.groups_names.len());
    for group in request.groups_names {
        let deleted = match ctx.check_group(Operation::Delete, &group) {
            Ok(()) => delete_group(ctx, group.0.as_str()).await,
            Err(e) => Err(e),
        };
        let code = match deleted {
            Ok(()) => 0,
            Err(e) => e.code(),
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group)
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}

/// Deletes `group`: its Kafka client group (when empty), then its native groups and
/// committed offsets on every topic.
async fn delete_group(ctx: &RequestContext<'_>, group: &str) -> Result<(), ResponseError> {
    let classic = ctx.shared.groups.retire(group).await;
    if classic == Some(false) {
        return Err(ResponseError::NonEmptyGroup);
    }
    match ctx.broker.delete_group(group).await {
        Ok(true) => {}
        Ok(false) if classic.is_some() => {}
        Ok(false) => return Err(ResponseError::GroupIdNotFound),
        Err(Error::GroupNotEmpty { .. }) => return Err(ResponseError::NonEmptyGroup),
        Err(e) => return Err(to_kafka(&e)),
    }
    tracing::info!(
        group,
        client_id = ctx.client_id,
        "group deleted on a DeleteGroups request"
    );
    Ok(())
}

pub async fn offset_delete(
    ctx: &RequestContext<'_>,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group = request.group_id.0.to_string();
    if let Err(e) = ctx.check_group(Operation::Delete, &group) {
        return OffsetDeleteResponse::default().with_error_code(e.code());
    }
    let known_classic = ctx.shared.groups.get(&group).is_some();
    let mut any_known = known_classic;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        // Kafka's rule: the group's DELETE, and READ on each topic whose offsets go. A refused
        // topic is not probed, so a group named only with refused topics is answered with
        // their refusal, never GROUP_ID_NOT_FOUND.
        let readable = ctx.check_topic(Operation::Read, &name);
        any_known |= readable.is_err();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let index = p.partition_index;
            let deleted = match (&readable, u32::try_from(index)) {
                (Err(refused), _) => Err(*refused),
                (Ok(()), Ok(partition)) => ctx
                    .broker
                    .delete_group_offsets(&name, &group, &[partition])
                    .await
                    .map_err(|e| match e {
                        Error::GroupNotEmpty { .. } => {
                            any_known = true;
                            ResponseError::GroupSubscribedToTopic
                        }
                        e => to_kafka(&e),
                    }),
                (Ok(()), Err(_)) => Err(ResponseError::UnknownTopicOrPartition),
            };
            let code = match deleted {
                Ok(known) => {
                    any_known |= known;
                    0
                }
                Err(e) => e.code(),
            };
            partitions.push(
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(index)
                    .with_error_code(code),
            );
        }
        topics.push(
            OffsetDeleteResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    if !any_known {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupIdNotFound.code());
    }
    OffsetDeleteResponse::default().with_topics(topics)
}
