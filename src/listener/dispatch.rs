//! From a request frame to a response frame: the API table, headers, decoding, the handler,
//! encoding.

use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use tracing::Instrument;

use super::{api_versions, frame, groups, metadata, ListenerConfig, Shared};
use super::{create_topics, delete_topics, describe_configs};
use super::{fetch, init_producer_id, offsets, produce};
use crate::async_handle::AsyncNanoKafka;

/// The APIs served and their versions: what ApiVersions advertises, and what a request must
/// fall in to be read. Each range is one both this listener and the codec support.
pub const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 8),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::CreateTopics, 2, 5),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::DescribeConfigs, 1, 4),
];

/// The versions of `api` served, if any.
pub fn served(api: ApiKey) -> Option<(i16, i16)> {
    SERVED
        .iter()
        .find(|(key, _, _)| *key == api)
        .map(|&(_, min, max)| (min, max))
}

/// What a connection knows between requests.
#[derive(Debug)]
pub struct ConnectionState {
    /// False until SASL/PLAIN succeeds, when the listener requires it.
    pub authenticated: bool,
}

impl ConnectionState {
    pub fn new(config: &ListenerConfig) -> Self {
        ConnectionState {
            authenticated: config.sasl_plain.is_none(),
        }
    }
}

/// What one request asks of its handler.
#[derive(Debug)]
pub struct RequestContext<'a> {
    pub broker: &'a AsyncNanoKafka,
    pub shared: &'a Shared,
    pub version: i16,
    /// The client's own name for itself (`client.id`), empty when it sent none.
    pub client_id: &'a str,
}

/// What becomes of one request.
#[derive(Debug)]
pub enum Outcome {
    /// Write this frame.
    Respond(Bytes),
    /// Nothing to write (a produce with `acks=0`).
    Silent,
    /// The request could not be read or is not allowed: close the connection, saying why.
    Close(String),
}

/// Answers one request frame (its body after the size).
pub async fn handle(
    state: &mut ConnectionState,
    broker: &AsyncNanoKafka,
    shared: &Shared,
    mut frame: Bytes,
) -> Outcome {
    // `frame::read_request` guarantees the fixed part of the header is there.
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Ok(api) = ApiKey::try_from(api_key) else {
        return Outcome::Close(format!("unknown API key {api_key}"));
    };
    let Some((min, max)) = served(api) else {
        return Outcome::Close(format!("{api:?} is not served"));
    };
    if !(min..=max).contains(&version) {
        if api == ApiKey::ApiVersions {
            // Kafka's rule: answer in v0 with UNSUPPORTED_VERSION and the full table, so the
            // client can pick a version it shares with us.
            shared.metrics.request(api);
            return respond(api, 0, correlation_id, &api_versions::unsupported());
        }
        return Outcome::Close(format!(
            "{api:?} v{version} is not served (v{min} to v{max})"
        ));
    }
    let header = match RequestHeader::decode(&mut frame, api.request_header_version(version)) {
        Ok(header) => header,
        Err(e) => return Outcome::Close(format!("{api:?} v{version}: bad request header: {e}")),
    };
    let request = match RequestKind::decode(api, &mut frame, version) {
        Ok(request) => request,
        Err(e) => return Outcome::Close(format!("{api:?} v{version}: bad request: {e}")),
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
    let span =
        tracing::debug_span!("kafka_request", api = ?api, version, client_id, correlation_id);
    let ctx = RequestContext {
        broker,
        shared,
        version,
        client_id,
    };
    let started = Instant::now();
    let reply = route(&ctx, state, request).instrument(span.clone()).await;
    shared.metrics.request(api);
    let _entered = span.enter();
    tracing::debug!(
        latency_us = started.elapsed().as_micros() as u64,
        "answered"
    );
    match reply {
        Reply::Respond(response) => respond(api, version, correlation_id, &response),
        Reply::Silent => Outcome::Silent,
        Reply::Close(reason) => Outcome::Close(format!("{api:?} v{version}: {reason}")),
    }
}

/// A handler's answer.
#[derive(Debug)]
pub enum Reply {
    Respond(Box<ResponseKind>),
    /// The request takes no response (a produce with `acks=0`).
    Silent,
    /// The request is refused in a way the protocol cannot answer: close, saying why.
    Close(String),
}

/// Calls the handler of `request`'s API.
async fn route(
    ctx: &RequestContext<'_>,
    _state: &mut ConnectionState,
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
