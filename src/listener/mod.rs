//! The Kafka listener: Kafka's wire protocol on a TCP socket, so that Kafka clients (kcat,
//! librdkafka, kafka-python, aiokafka, kafkajs, ...) produce, fetch and join groups on the
//! embedded broker. Off by default; [`crate::NanoKafkaBuilder::listen`] turns it on.
//!
//! # Shape
//! It is a client of the broker like any other: every request becomes calls on an
//! [`crate::AsyncNanoKafka`], so the listener sits above the actors and nothing below knows it
//! exists. It runs on an arbiter of its own (thread `nanokafka-listener`), so decoding and
//! encoding requests never delays the broker's or the partitions' threads:
//! * `server`: binds (loopback unless told otherwise; a plaintext and a TLS address when
//!   asked, one broker to clients: they share groups, fetch sessions, request memory and the
//!   connection cap, and each advertises itself), accepts, enforces `max_connections`, and
//!   starts one task per connection;
//! * `tls`: the certificate files ([`TlsConfig`]) read into a rustls server configuration,
//!   and the principal a client certificate names (its subject DN, as Kafka prints it);
//!   `handshake`: a TLS connection's handshake under the authentication deadline, a failure
//!   closing only its connection. The connection code below is generic over the stream;
//! * `connection`: reads frames (`frame`, capped at `max_frame_bytes`), answers them one at a
//!   time, in order, and writes each answer before the next request is handled, as a Kafka
//!   broker does. Up to `max_in_flight` pipelined requests wait read behind the one being
//!   answered. A request that waits (a Fetch for data, a JoinGroup for the rebalance) holds
//!   back only its own connection's later requests. Before SASL authentication it reads one
//!   small frame at a time under a deadline; it closes a connection idle for too long;
//! * `memory`: the bound on request bytes held across all connections, which every frame
//!   reserves from before its body is read;
//! * `request`: what the dispatcher and every handler share: the API table (ApiVersions
//!   advertises exactly it), a request's context, a handler's reply, a connection's state;
//! * `principal`: who a connection acts as (`User:<name>`), what ACLs and quotas key on;
//! * `authorize`: the one question handlers ask before they act (`ctx.may_topic(..)`,
//!   `check_group`, `check_cluster`), answered by the ACLs of `crate::security::acl` when
//!   the listener enforces them; `acls` serves DescribeAcls, CreateAcls and DeleteAcls;
//! * `dispatch`: the request header, decoding, the per-API handler, the response header and
//!   encoding. A request it cannot
//!   read (unknown API, unserved version, malformed or truncated body) closes its
//!   connection with a log line; it never reaches the broker. Before anything is decoded,
//!   `sanity` walks the request against its schema: kafka-protocol sizes each array from the
//!   count on the wire before reading an element, so an impossible count must be refused
//!   first (a failed allocation aborts the process);
//! * one module per API family answers requests with the broker's state: `metadata` and
//!   `describe_topic_partitions` (topics, partitions, topic ids), `cluster`
//!   (DescribeCluster, DescribeLogDirs), `produce` (with `schema_validation`, the check of a
//!   topic's records against the schema registry), `fetch` (with `fetch_session`, the fetch
//!   sessions), `offsets` (ListOffsets, OffsetForLeaderEpoch), `delete_records`, `describe_producers`, `init_producer_id`,
//!   `groups` (the classic group protocol, one `KafkaGroupActor` per group, over the native
//!   groups; DeleteGroups, OffsetDelete), `create_topics` / `delete_topics` /
//!   `describe_configs` / `create_partitions` / `incremental_alter_configs` /
//!   `alter_configs` (with `config::kafka_names`, Kafka's config names), `sasl`
//!   (SASL/PLAIN and SCRAM, whose exchange is `crate::security::scram_exchange`), `scram_credentials`
//!   (Describe/AlterUserScramCredentials over the data directory's credential store), `quotas`
//!   (client quotas: the throttle after each request, Describe/AlterClientQuotas); `errors`
//!   maps the crate's errors to Kafka's codes.
//!
//! # What a Kafka client sees
//! One broker (node id 0, the controller and every group's coordinator), every partition led
//! by it with leader epoch 0, `throttle_time_ms` 0 unless the client is over a quota. Topics are created on demand by Metadata
//! when the client allows it and [`ListenerConfig::auto_create_topics`] is on (the default),
//! with the default [`crate::TopicConfig`].

mod acls;
mod alter_configs;
mod api_versions;
mod authorize;
mod cluster;
mod config;
mod connection;
mod create_partitions;
mod create_topics;
mod delete_records;
mod delete_topics;
mod describe_configs;
mod describe_producers;
mod describe_topic_partitions;
mod dispatch;
mod errors;
mod fetch;
mod fetch_session;
mod frame;
mod groups;
mod handshake;
mod incremental_alter_configs;
mod init_producer_id;
mod memory;
mod metadata;
mod offsets;
mod principal;
mod produce;
mod quotas;
mod request;
/// The request check before decoding, for tests and fuzzing (`internals` feature).
#[cfg(feature = "internals")]
pub mod sanity;
#[cfg(not(feature = "internals"))]
mod sanity;
mod sasl;
mod schema_validation;
mod scram_credentials;
mod server;
mod tls;

pub(crate) use crate::metrics::listener::ListenerMetrics;
#[cfg(any(feature = "console", feature = "schema-registry"))]
pub(crate) use config::http_bind_addr;
#[cfg(feature = "console")]
pub(crate) use config::PlainCredentials;
pub use config::{AutoCreate, ListenerConfig, DEFAULT_NUM_PARTITIONS, MAX_IN_FLIGHT};
#[cfg(feature = "console")]
pub(crate) use groups::{KafkaGroupView, KafkaGroupsReader, KafkaMemberView};
#[cfg(feature = "internals")]
pub use handshake::{TlsAcceptCheck, TlsAccepted};
#[cfg(feature = "console")]
pub(crate) use incremental_alter_configs::changes_between;
pub(crate) use server::{bind, ListenerHandle};
pub use tls::TlsConfig;

/// The APIs and versions the listener serves (`internals` feature).
#[cfg(feature = "internals")]
pub use request::SERVED;

/// Kafka's node id for this broker: the one broker, controller and coordinator.
pub(crate) const NODE_ID: i32 = 0;

/// What every connection of one address shares. The plaintext and the TLS address of one
/// listener share everything but their advertised address and the TLS acceptor: the
/// metrics (and so the connection cap), groups, request memory and fetch sessions are one.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: ListenerConfig,
    pub metrics: std::sync::Arc<ListenerMetrics>,
    /// The host and port clients are told to connect to (Metadata, FindCoordinator).
    pub advertised_host: String,
    pub advertised_port: i32,
    /// A Kafka cluster id: stable for a data directory, so clients that cache it agree
    /// across restarts.
    pub cluster_id: String,
    /// The Kafka client groups (classic protocol), by name.
    pub groups: std::sync::Arc<groups::KafkaGroups>,
    /// The bound on request bytes held across connections (`queued_max_request_bytes`).
    pub memory: std::sync::Arc<memory::RequestMemory>,
    /// The broker's clock: fetch sessions expire by it.
    pub clock: crate::clock::SharedClock,
    /// Every fetch session (KIP-227); locked only between awaits.
    pub fetch_sessions: std::sync::Arc<std::sync::Mutex<fetch_session::FetchSessions>>,
    /// The TLS handshake of every connection accepted, on a TLS address.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// The client quotas enforced, from `<data_dir>/security/quotas` (one set, shared by
    /// every address, so a client's rate counts wherever it connects).
    pub quotas: std::sync::Arc<crate::security::quota::ClientQuotas>,
    /// Who may do what (`authorize`); `None` when ACLs are off: everything is allowed.
    pub authorizer: Option<std::sync::Arc<crate::security::acl::Authorizer>>,
    /// The SCRAM credentials, when SCRAM is enabled (`ListenerConfig::sasl_scram`).
    pub scram: Option<std::sync::Arc<crate::security::scram::LiveScramStore>>,
}

impl Shared {
    pub fn fetch_sessions(&self) -> std::sync::MutexGuard<'_, fetch_session::FetchSessions> {
        // The cache is consistent after any call, so a panic elsewhere leaves nothing half done.
        self.fetch_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

/// Reads a request frame (its bytes after the size) as a connection does before it calls a
/// handler: API and version served, the shape check, header, body. For fuzzing
/// (`internals` feature): the API, version and request, or why the connection would close.
#[cfg(feature = "internals")]
pub fn read_request(
    frame: bytes::Bytes,
) -> std::result::Result<
    (
        kafka_protocol::messages::ApiKey,
        i16,
        kafka_protocol::messages::RequestKind,
    ),
    String,
> {
    match dispatch::read(frame) {
        dispatch::Read::Request {
            api,
            version,
            request,
            ..
        } => Ok((api, version, request)),
        dispatch::Read::UnsupportedApiVersions { .. } => Ok((
            kafka_protocol::messages::ApiKey::ApiVersions,
            0,
            kafka_protocol::messages::RequestKind::ApiVersions(Default::default()),
        )),
        dispatch::Read::Bad(reason) => Err(reason),
    }
}
