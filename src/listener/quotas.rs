//! Client quotas on the listener: the throttle (KIP-219) and the admin calls
//! DescribeClientQuotas and AlterClientQuotas.
//!
//! # Throttle
//! After a handler answers, the request is measured against the client's quotas
//! ([`crate::security::quota`]): a Produce request's bytes against `producer_byte_rate`, a
//! Fetch response's bytes against `consumer_byte_rate`, the handler's time against
//! `request_percentage`. Over a quota, the response still goes out, carrying the throttle
//! time in `throttle_time_ms` (the longer of the byte and time throttles), and the connection
//! reads nothing more until the throttle ends: a client that ignores the field is held all
//! the same, and only its own connection waits. With no quota set this costs a request two
//! atomic loads.
//!
//! Handler time is counted for every API but those that wait by design (Fetch, JoinGroup,
//! SyncGroup: their time is mostly the wait) and those before authentication (ApiVersions,
//! SASL), which Kafka exempts too.
//!
//! # Admin calls
//! With ACLs on, DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster and
//! AlterClientQuotas ALTER_CONFIGS, as in Kafka; refused, nothing is read or changed.

use std::time::Duration;

use kafka_protocol::messages::{
    alter_client_quotas_response as altered, describe_client_quotas_response as described,
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, ResponseKind,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use crate::security::acl::Operation;
use crate::security::quota::admin::{self, AdminError, Match};
use crate::security::quota::{QuotaConfig, QuotaEntity, QuotaKey};

/// What one request cost, for the quotas.
pub struct Cost<'a> {
    pub api: ApiKey,
    pub version: i16,
    /// The request frame's size.
    pub request_bytes: usize,
    pub response: Option<&'a ResponseKind>,
    pub handler_time: Duration,
}

/// Records `cost` against the client's quotas; the throttle time, if it is over one.
pub fn throttle(ctx: &RequestContext<'_>, cost: Cost<'_>) -> Option<Duration> {
    let quotas = &ctx.shared.quotas;
    if !quotas.is_active() {
        return None;
    }
    let (user, client) = (ctx.principal.name(), ctx.client_id);
    let bytes = match (cost.api, cost.response) {
        (ApiKey::Produce, _) => Some((QuotaKey::ProducerByteRate, cost.request_bytes)),
        (ApiKey::Fetch, Some(ResponseKind::Fetch(r))) => r
            .compute_size(cost.version)
            .ok()
            .map(|size| (QuotaKey::ConsumerByteRate, size)),
        _ => None,
    };
    let bytes_ms = bytes.map_or(0, |(key, n)| quotas.record(key, user, client, n as f64));
    let time_ms = if counts_handler_time(cost.api) {
        // Kafka's unit: a second of handler time is 100 (percent of one thread for a second).
        let percent_seconds = cost.handler_time.as_secs_f64() * 100.0;
        quotas.record(QuotaKey::RequestPercentage, user, client, percent_seconds)
    } else {
        0
    };
    let ms = bytes_ms.max(time_ms);
    (ms > 0).then(|| Duration::from_millis(ms))
}

fn counts_handler_time(api: ApiKey) -> bool {
    !matches!(
        api,
        ApiKey::ApiVersions
            | ApiKey::SaslHandshake
            | ApiKey::SaslAuthenticate
            | ApiKey::Fetch
            | ApiKey::JoinGroup
            | ApiKey::SyncGroup
    )
}

/// Sets `throttle_time_ms` on any response that has the field (a version that cannot carry
/// it leaves it out when encoded).
pub fn set_throttle_time(response: &mut ResponseKind, throttle: Duration) {
    let ms = i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX);
    macro_rules! with_throttle_time {
        ($($kind:ident),* $(,)?) => {
            match response {
                $(ResponseKind::$kind(r) => r.throttle_time_ms = ms,)*
                _ => {}
            }
        };
    }
    with_throttle_time!(
        ApiVersions,
        Metadata,
        Produce,
        Fetch,
        ListOffsets,
        InitProducerId,
        OffsetForLeaderEpoch,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        DescribeGroups,
        ListGroups,
        CreateTopics,
        DeleteTopics,
        DescribeConfigs,
        CreatePartitions,
        IncrementalAlterConfigs,
        AlterConfigs,
        DescribeCluster,
        DescribeLogDirs,
        DeleteRecords,
        DescribeProducers,
        DescribeTopicPartitions,
        DeleteGroups,
        OffsetDelete,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        DescribeClientQuotas,
        AlterClientQuotas,
    );
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn kafka_error(e: AdminError) -> (ResponseError, String) {
    match e {
        AdminError::InvalidRequest(m) => (ResponseError::InvalidRequest, m),
        AdminError::UnsupportedEntityType(m) => (ResponseError::UnsupportedVersion, m),
    }
}

/// DescribeClientQuotas: the quotas of the entities the filter selects.
pub fn describe(
    ctx: &RequestContext<'_>,
    r: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let filter: Result<Vec<(String, Match)>, AdminError> = (r.components.iter())
        .map(|c| {
            Ok((
                c.entity_type.to_string(),
                Match::from_wire(c.match_type, c._match.as_deref())?,
            ))
        })
        .collect();
    if let Err((code, message)) = ctx.check_cluster_said(Operation::DescribeConfigs) {
        return DescribeClientQuotasResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(text(&message)))
            .with_entries(None);
    }
    let config = ctx.shared.quotas.config();
    match filter.and_then(|f| admin::describe(&config, &f, r.strict)) {
        Ok(selected) => {
            let entries = selected
                .into_iter()
                .map(|(entity, values)| {
                    described::EntryData::default()
                        .with_entity(
                            (entity.parts().into_iter())
                                .map(|(t, n)| {
                                    described::EntityData::default()
                                        .with_entity_type(text(t))
                                        .with_entity_name(n.map(text))
                                })
                                .collect(),
                        )
                        .with_values(
                            (values.into_iter())
                                .map(|(k, v)| {
                                    described::ValueData::default()
                                        .with_key(text(k.name()))
                                        .with_value(v)
                                })
                                .collect(),
                        )
                })
                .collect();
            DescribeClientQuotasResponse::default().with_entries(Some(entries))
        }
        Err(e) => {
            let (code, message) = kafka_error(e);
            DescribeClientQuotasResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(text(&message)))
                .with_entries(None)
        }
    }
}

/// AlterClientQuotas: each entry applied whole or refused with its own error; nothing
/// written for `validate_only`.
pub fn alter(ctx: &RequestContext<'_>, r: AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    let quotas = &ctx.shared.quotas;
    let mut results = Vec::with_capacity(r.entries.len());
    let apply = |config: &mut QuotaConfig,
                 results: &mut Vec<Result<(), (ResponseError, String)>>| {
        for entry in &r.entries {
            let parts = (entry.entity.iter()).map(|e| (&*e.entity_type, e.entity_name.as_deref()));
            let ops: Vec<admin::Op> = (entry.ops.iter())
                .map(|op| (op.key.to_string(), (!op.remove).then_some(op.value)))
                .collect();
            let result = QuotaEntity::from_parts(parts)
                .map_err(AdminError::InvalidRequest)
                .and_then(|entity| admin::alter(config, &entity, &ops))
                .map_err(kafka_error);
            results.push(result);
        }
    };
    if let Err(refused) = ctx.check_cluster_said(Operation::AlterConfigs) {
        results.extend(r.entries.iter().map(|_| Err(refused.clone())));
    } else if r.validate_only {
        apply(&mut quotas.config(), &mut results);
    } else if let Err(e) = quotas.alter(|config| apply(config, &mut results)) {
        tracing::error!(error = %e, "cannot write the client quotas");
        let failed = (
            ResponseError::UnknownServerError,
            format!("quotas not written: {e}"),
        );
        for result in &mut results {
            if result.is_ok() {
                *result = Err(failed.clone());
            }
        }
    }
    let entries = (r.entries.iter().zip(results))
        .map(|(entry, result)| {
            let (code, message) = match result {
                Ok(()) => (0, None),
                Err((code, message)) => (code.code(), Some(text(&message))),
            };
            let entity = (entry.entity.iter())
                .map(|e| {
                    altered::EntityData::default()
                        .with_entity_type(e.entity_type.clone())
                        .with_entity_name(e.entity_name.clone())
                })
                .collect();
            altered::EntryData::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_entity(entity)
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}
