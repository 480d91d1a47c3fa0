//! What every handler and the dispatcher share: the APIs served, a request's context, a
//! handler's reply, and what a connection knows between requests.

use kafka_protocol::messages::{ApiKey, ResponseKind};

use super::principal::Principal;
use super::{ListenerConfig, Shared};
use crate::async_handle::AsyncNanoKafka;

/// The APIs served and their versions: what ApiVersions advertises, and what a request must
/// fall in to be read. Each range is one both this listener and the codec support.
pub const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::CreateTopics, 2, 5),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    // v0 is advertised because librdkafka enables SASL only when it is, but answered
    // ILLEGAL_SASL_STATE: it would be followed by raw tokens outside Kafka's framing (`sasl`).
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
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
    /// Where the SASL exchange is.
    pub sasl: SaslStage,
    /// The client's address.
    pub peer: std::net::SocketAddr,
    /// Who the connection acts as: `User:ANONYMOUS` until it authenticates.
    pub principal: Principal,
    /// Set by a request over the client's quota: how long the connection reads nothing
    /// after its response (`quotas`).
    pub throttle: Option<std::time::Duration>,
    /// A SCRAM exchange between its two messages.
    pub scram: Option<Box<crate::security::scram_exchange::ScramExchange>>,
}

/// Where a connection is in the SASL exchange (`sasl` moves it on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SaslStage {
    /// No handshake yet.
    #[default]
    Start,
    /// PLAIN was chosen; a SaslAuthenticate is expected.
    PlainChosen,
    /// A SCRAM mechanism was chosen; the client-first message is expected.
    ScramChosen(crate::security::scram::ScramMechanism),
    /// The server-first message was sent; the client-final message is expected.
    ScramFinal,
    /// Authenticated (or the listener has no SASL): nothing more to exchange.
    Done,
}

impl ConnectionState {
    pub fn new(config: &ListenerConfig, peer: std::net::SocketAddr) -> Self {
        ConnectionState {
            authenticated: !config.sasl_required(),
            sasl: SaslStage::default(),
            peer,
            principal: Principal::anonymous(),
            throttle: None,
            scram: None,
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
    /// The client's address.
    pub peer: std::net::SocketAddr,
    /// Who the connection acts as (ACLs and quotas are keyed on it).
    pub principal: Principal,
}

impl RequestContext<'_> {
    /// The client's host as Kafka's group coordinator records it (a group member's
    /// `client.host` in DescribeGroups): its IP address after a slash, `/127.0.0.1`.
    pub fn client_host(&self) -> String {
        format!("/{}", self.peer.ip())
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
    /// Answer, then close, saying why (Kafka's way with a failed authentication).
    RespondAndClose(Box<ResponseKind>, String),
    /// A failed authentication: answer once the failed-authentication delay has passed,
    /// then close, saying why.
    AuthenticationFailed(Box<ResponseKind>, String),
    /// No answer, but close, saying why (Kafka's way with a failed `acks=0` produce).
    SilentAndClose(String),
}
