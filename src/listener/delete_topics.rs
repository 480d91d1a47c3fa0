//! DeleteTopics (v1–5): by name (v6's topic ids are not served). Each delete is synchronous,
//! so `timeout_ms` never runs out.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use crate::error::Error;
use crate::security::acl::Operation;

pub async fn handle(
    ctx: &RequestContext<'_>,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let mut responses = Vec::with_capacity(request.topic_names.len());
    for name in request.topic_names {
        let topic = name.0.to_string();
        let result = DeletableTopicResult::default().with_name(Some(name));
        let deleted = match ctx.check_topic_said(Operation::Delete, &topic) {
            Ok(()) => ctx.broker.delete_topic(&topic).await,
            Err(refused) => {
                responses.push(refused_result(ctx.version, result, refused));
                continue;
            }
        };
        let refused = match deleted {
            Ok(()) => {
                tracing::info!(%topic, client_id = ctx.client_id, "deleted topic on a DeleteTopics request");
                responses.push(result);
                continue;
            }
            Err(e @ (Error::UnknownTopic { .. } | Error::InvalidTopicName { .. })) => {
                (ResponseError::UnknownTopicOrPartition, e.to_string())
            }
            Err(e) => {
                tracing::warn!(%topic, error = %e, "cannot delete a topic");
                (ResponseError::UnknownServerError, e.to_string())
            }
        };
        responses.push(refused_result(ctx.version, result, refused));
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

fn refused_result(
    version: i16,
    result: DeletableTopicResult,
    (error, message): (ResponseError, String),
) -> DeletableTopicResult {
    let result = result.with_error_code(error.code());
    // The message field exists from v5 on.
    match version >= 5 {
        true => result.with_error_message(Some(StrBytes::from_string(message))),
        false => result,
    }
}
