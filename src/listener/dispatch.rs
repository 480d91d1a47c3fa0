//! From a request frame to a response frame: the API table, headers, decoding, the handler,
//! encoding.

use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use tracing::Instrument;

use super::request::{served, ConnectionState, Reply, RequestContext};
use super::{acls, api_versions, frame, groups, metadata, sanity, sasl, Shared};
use super::{
    alter_configs, cluster, describe_producers, describe_topic_partitions,
    incremental_alter_configs,
};
use super::{create_partitions, create_topics, delete_records, delete_topics, describe_configs};
use super::{fetch, init_producer_id, offsets, produce, quotas, scram_credentials};
use crate::async_handle::AsyncNanoKafka;

/// What becomes of one request.
#[derive(Debug)]
pub enum Outcome {
    /// Write this frame.
    Respond(Bytes),
    /// Nothing to write (a produce with `acks=0`).
    Silent,
    /// The request could not be read or is not allowed: close the connection, saying why.
    Close(String),
    /// Write this frame, then close the connection, saying why (a failed authentication).
    RespondAndClose(Bytes, String),
    /// Nothing to write, but close the connection, saying why: a request that takes no
    /// response failed (an `acks=0` produce), and the close is how the client learns of it.
    SilentAndClose(String),
}

/// A request frame read as far as it goes without a broker.
// Made once per request and matched at once: boxing the request would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Read {
    Request {
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        header: RequestHeader,
        request: RequestKind,
    },
    /// ApiVersions at a version not served: Kafka's rule is to answer in v0 with
    /// UNSUPPORTED_VERSION and the full table, so the client can pick a version it shares
    /// with us.
    UnsupportedApiVersions { correlation_id: i32 },
    /// Not a request this listener can read: close the connection, saying why.
    Bad(String),
}

/// Reads one request frame (its body after the size): API, version, the shape check before
/// decoding (`sanity`), header, body.
pub fn read(mut frame: Bytes) -> Read {
    // `frame::read_request` guarantees the fixed part of the header is there.
    let Some(fixed) = frame.get(..8) else {
        return Read::Bad(format!("request of {} bytes", frame.len()));
    };
    let api_key = i16::from_be_bytes([fixed[0], fixed[1]]);
    let version = i16::from_be_bytes([fixed[2], fixed[3]]);
    let correlation_id = i32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
    let Ok(api) = ApiKey::try_from(api_key) else {
        return Read::Bad(format!("unknown API key {api_key}"));
    };
    let Some((min, max)) = served(api) else {
        return Read::Bad(format!("{api:?} is not served"));
    };
    if !(min..=max).contains(&version) {
        if api == ApiKey::ApiVersions {
            return Read::UnsupportedApiVersions { correlation_id };
        }
        return Read::Bad(format!(
            "{api:?} v{version} is not served (v{min} to v{max})"
        ));
    }
    // Before anything decodes it: no count in the frame may size an allocation beyond it.
    if let Err(e) = sanity::check(api, version, &frame) {
        return Read::Bad(format!("{api:?} v{version}: refused before decoding: {e}"));
    }
    let header = match RequestHeader::decode(&mut frame, api.request_header_version(version)) {
        Ok(header) => header,
        Err(e) => return Read::Bad(format!("{api:?} v{version}: bad request header: {e}")),
    };
    match RequestKind::decode(api, &mut frame, version) {
        Ok(request) => Read::Request {
            api,
            version,
            correlation_id,
            header,
            request,
        },
        Err(e) => Read::Bad(format!("{api:?} v{version}: bad request: {e}")),
    }
}

/// Answers one request frame (its body after the size).
pub async fn handle(
    state: &mut ConnectionState,
    broker: &AsyncNanoKafka,
    shared: &Shared,
    frame: Bytes,
) -> Outcome {
    let request_bytes = frame.len();
    let (api, version, correlation_id, header, request) = match read(frame) {
        Read::Request {
            api,
            version,
            correlation_id,
            header,
            request,
        } => (api, version, correlation_id, header, request),
        Read::UnsupportedApiVersions { correlation_id } => {
            shared.metrics.request(ApiKey::ApiVersions);
            return respond(
                ApiKey::ApiVersions,
                0,
                correlation_id,
                &api_versions::unsupported(),
            );
        }
        Read::Bad(reason) => return Outcome::Close(reason),
    };
    if !state.authenticated
        && !matches!(
            api,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        )
    {
        return Outcome::Close(format!("{api:?} before SASL authentication"));
    }
    let client_id = header.client_id.as_deref().unwrap_or("");
    let ctx = RequestContext {
        broker,
        shared,
        version,
        client_id,
        peer: state.peer,
        principal: state.principal.clone(),
    };
    let span = tracing::debug_span!("kafka_request", api = ?api, version, client_id,
        correlation_id, principal = %ctx.principal);
    let started = Instant::now();
    let mut reply = route(&ctx, state, request).instrument(span.clone()).await;
    let cost = quotas::Cost {
        api,
        version,
        request_bytes,
        response: match &reply {
            Reply::Respond(r) | Reply::RespondAndClose(r, _) => Some(r),
            _ => None,
        },
        handler_time: started.elapsed(),
    };
    state.throttle = quotas::throttle(&ctx, cost);
    if let (Some(throttle), Reply::Respond(r) | Reply::RespondAndClose(r, _)) =
        (state.throttle, &mut reply)
    {
        quotas::set_throttle_time(r, throttle);
    }
    shared.metrics.request(api);
    let _entered = span.enter();
    tracing::debug!(
        latency_us = started.elapsed().as_micros() as u64,
        "answered"
    );
    match reply {
        Reply::Respond(response) => respond(api, version, correlation_id, &response),
        Reply::Silent => Outcome::Silent,
        Reply::SilentAndClose(reason) => Outcome::SilentAndClose(reason),
        Reply::Close(reason) => Outcome::Close(format!("{api:?} v{version}: {reason}")),
        Reply::RespondAndClose(response, reason) => {
            match respond(api, version, correlation_id, &response) {
                Outcome::Respond(frame) => Outcome::RespondAndClose(frame, reason),
                other => other,
            }
        }
        Reply::AuthenticationFailed(response, reason) => {
            // A timer on this connection alone (Kafka's failed-authentication delay): a
            // client guessing passwords waits, the broker's threads do not.
            tokio::time::sleep(shared.config.failed_authentication_delay).await;
            match respond(api, version, correlation_id, &response) {
                Outcome::Respond(frame) => Outcome::RespondAndClose(frame, reason),
                other => other,
            }
        }
    }
}

/// Calls the handler of `request`'s API.
async fn route(
    ctx: &RequestContext<'_>,
    state: &mut ConnectionState,
    request: RequestKind,
) -> Reply {
    Reply::Respond(Box::new(match request {
        RequestKind::ApiVersions(r) => ResponseKind::ApiVersions(api_versions::handle(ctx, r)),
        RequestKind::Metadata(r) => ResponseKind::Metadata(metadata::handle(ctx, r).await),
        RequestKind::Produce(r) => return produce::handle(ctx, r).await,
        RequestKind::Fetch(r) => ResponseKind::Fetch(fetch::handle(ctx, r).await),
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(offsets::list_offsets(ctx, r).await)
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offsets::offset_for_leader_epoch(ctx, r).await)
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id::handle(ctx, r).await)
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(groups::find_coordinator(ctx, r))
        }
        RequestKind::JoinGroup(r) => ResponseKind::JoinGroup(groups::join_group(ctx, r).await),
        RequestKind::SyncGroup(r) => ResponseKind::SyncGroup(groups::sync_group(ctx, r).await),
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(groups::heartbeat(ctx, r).await),
        RequestKind::LeaveGroup(r) => ResponseKind::LeaveGroup(groups::leave_group(ctx, r).await),
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(groups::offset_commit(ctx, r).await)
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(groups::offset_fetch(ctx, r).await)
        }
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(groups::describe_groups(ctx, r).await)
        }
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(groups::list_groups(ctx, r).await),
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(create_topics::handle(ctx, r).await)
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(delete_topics::handle(ctx, r).await)
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(ctx, r).await)
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(create_partitions::handle(ctx, r).await)
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(alter_configs::handle(ctx, r).await)
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(incremental_alter_configs::handle(ctx, r).await)
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(cluster::describe_cluster(ctx, r))
        }
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(cluster::describe_log_dirs(ctx, r).await)
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(ctx, r).await)
        }
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(describe_producers::handle(ctx, r).await)
        }
        RequestKind::DescribeTopicPartitions(r) => {
            ResponseKind::DescribeTopicPartitions(describe_topic_partitions::handle(ctx, r).await)
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(groups::delete_groups(ctx, r).await)
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(groups::offset_delete(ctx, r).await)
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            ResponseKind::ConsumerGroupHeartbeat(groups::consumer_group_heartbeat(ctx, r).await)
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            ResponseKind::ConsumerGroupDescribe(groups::consumer_group_describe(ctx, r).await)
        }
        RequestKind::DescribeAcls(r) => ResponseKind::DescribeAcls(acls::describe_acls(ctx, r)),
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(acls::create_acls(ctx, r)),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(acls::delete_acls(ctx, r)),
        RequestKind::DescribeUserScramCredentials(r) => {
            ResponseKind::DescribeUserScramCredentials(scram_credentials::describe(ctx, r))
        }
        RequestKind::AlterUserScramCredentials(r) => {
            ResponseKind::AlterUserScramCredentials(scram_credentials::alter(ctx, r).await)
        }
        RequestKind::SaslHandshake(r) => {
            ResponseKind::SaslHandshake(sasl::handshake(ctx, state, r))
        }
        RequestKind::SaslAuthenticate(r) => return sasl::authenticate(ctx, state, r),
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(quotas::describe(ctx, r))
        }
        RequestKind::AlterClientQuotas(r) => ResponseKind::AlterClientQuotas(quotas::alter(ctx, r)),
        // `handle` decodes only requests of served APIs, and each has an arm above.
        _ => return Reply::Close("served, but no handler answers it".into()),
    }))
}

/// Encodes a response frame: size, header (v0 for ApiVersions whatever the version, so a
/// client that does not know our versions yet can read it), body.
fn respond(api: ApiKey, version: i16, correlation_id: i32, body: &ResponseKind) -> Outcome {
    let header_version = match api {
        ApiKey::ApiVersions => 0,
        _ => api.response_header_version(version),
    };
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0); // the size, written by `seal_response`
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let encoded = header
        .encode(&mut buf, header_version)
        .and_then(|()| body.encode(&mut buf, version));
    match encoded {
        Ok(()) => Outcome::Respond(frame::seal_response(buf)),
        // A handler set a field the version cannot carry: our bug, but only this connection
        // pays for it.
        Err(e) => {
            tracing::error!(api = ?api, version, error = %e, "cannot encode a response");
            Outcome::Close(format!("{api:?} v{version}: response does not encode: {e}"))
        }
    }
}
