//! InitProducerId (v0 to v4): a new producer id, epoch 0, for an idempotent producer.
//!
//! Ids come from the broker's persisted allocator, so none is ever handed out twice from a
//! data directory, also across restarts (each partition remembers the sequences of every id
//! that wrote to it). A producer that asks again with its id and epoch (v3+, after an
//! error) gets a new id, as Kafka does without a transactional id.
//!
//! ACLs: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or, as Kafka 3.x
//! allows, WRITE on some topic; else `CLUSTER_AUTHORIZATION_FAILED`.
//!
//! This broker has no transactions: a transactional id is refused with
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`. Of Kafka's possible answers it is the one every
//! client reports at once as a fatal, readable error ("Transactional Id authorization
//! failed"), where `COORDINATOR_NOT_AVAILABLE` would be retried until a timeout.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub async fn handle(
    ctx: &RequestContext<'_>,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let refused = |error: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if request.transactional_id.is_some() {
        tracing::info!(
            client_id = ctx.client_id,
            "refused a transactional producer: this broker has no transactions"
        );
        return refused(ResponseError::TransactionalIdAuthorizationFailed);
    }
    if !(ctx.may_cluster(Operation::IdempotentWrite)
        || ctx.may_any(Operation::Write, ResourceType::Topic))
    {
        return refused(ResponseError::ClusterAuthorizationFailed);
    }
    match ctx.broker.allocate_producer_id().await {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::warn!(error = %e, "cannot allocate a producer id");
            // Retriable: the client asks again.
            refused(ResponseError::CoordinatorNotAvailable)
        }
    }
}
